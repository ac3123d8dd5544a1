"""One error tree for the whole of rocketq.

Every error a server can answer with carries the RocketMQ response code it maps to, so a
processor raises and the transport turns the exception into a response with that code and the
message as remark. On the client side `for_code()` turns a response back into the same class.
"""

from __future__ import annotations

from rocketq.codec.codes import ResponseCode


class RocketQError(Exception):
    """Base of every error rocketq raises on purpose."""

    code: int = ResponseCode.SYSTEM_ERROR
    retriable: bool = False

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def remark(self) -> str:
        return str(self)


class ProtocolError(RocketQError):
    """Bytes that do not form a valid RemotingCommand, header or message.

    The codec raises only this (or a subclass) for any input, however malformed; a transport that
    sees it on a frame closes that connection.
    """


class FrameTooLarge(ProtocolError):
    """A frame whose declared length exceeds the 16 MiB limit."""


class MalformedRequest(ProtocolError):
    """A header read as far as its opaque and flag, with another member of the wrong type or range.

    Unlike other protocol errors this one leaves the stream usable (the frame's length was
    sound) and names the request it belongs to, so a server answers it with this code and the
    message as remark instead of closing the connection.
    """

    code = ResponseCode.INVALID_PARAMETER

    def __init__(self, message: str, *, opaque: int, flag: int) -> None:
        super().__init__(message)
        self.opaque = opaque
        self.flag = flag


class ConfigError(RocketQError):
    """A config key that does not exist, a value of the wrong type, or a forbidden key."""

    code = ResponseCode.INVALID_PARAMETER


class RestartRequired(ConfigError):
    """A runtime update of a key that only takes effect at start (or that rocketq does not honour).

    NO_PERMISSION, as RocketMQ answers a key of its configBlackList: the key exists, but this
    request may not change it."""

    code = ResponseCode.NO_PERMISSION

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"config key '{key}' {reason}")
        self.key = key
        self.reason = reason


class RemotingError(RocketQError):
    """Transport failure: connect, send or timeout (client side)."""

    retriable = True


class RemotingConnectError(RemotingError):
    code = -1004


class RemotingTimeoutError(RemotingError):
    code = -1006


class RemotingSendError(RemotingError):
    code = -1004


class ServerError(RocketQError):
    """An error answered by a server with a response code; raised by processors, seen by clients."""


class SystemError_(ServerError):  # noqa: N801 - RocketMQ's SYSTEM_ERROR; trailing _ avoids the builtin
    code = ResponseCode.SYSTEM_ERROR


class SystemBusy(ServerError):
    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupported(ServerError):
    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class MessageIllegal(ServerError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailable(ServerError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermission(ServerError):
    code = ResponseCode.NO_PERMISSION


class TopicNotExist(ServerError):
    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class TopicExistAlready(ServerError):
    code = ResponseCode.TOPIC_EXIST_ALREADY


class QueryNotFound(ServerError):
    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailed(ServerError):
    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExist(ServerError):
    code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatest(ServerError):
    code = ResponseCode.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExist(ServerError):
    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class InvalidParameter(ServerError):
    code = ResponseCode.INVALID_PARAMETER


class HeaderError(InvalidParameter):
    """A request header field (extFields) that is missing or does not parse as its Java type."""


class FlushDiskTimeout(ServerError):
    code = ResponseCode.FLUSH_DISK_TIMEOUT


class StoreError(RocketQError):
    """The store refused or failed an operation (disk full, closed, corrupt data)."""

    code = ResponseCode.SYSTEM_ERROR


class StoreClosed(StoreError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE


class DiskFull(StoreError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE


class MessageTooLarge(StoreError):
    code = ResponseCode.MESSAGE_ILLEGAL


_BY_CODE: dict[int, type[ServerError]] = {
    cls.code: cls
    for cls in (
        SystemError_,
        SystemBusy,
        RequestCodeNotSupported,
        MessageIllegal,
        ServiceNotAvailable,
        NoPermission,
        TopicNotExist,
        TopicExistAlready,
        QueryNotFound,
        SubscriptionParseFailed,
        SubscriptionNotExist,
        SubscriptionNotLatest,
        SubscriptionGroupNotExist,
        InvalidParameter,
        FlushDiskTimeout,
    )
}


def for_code(code: int, remark: str | None = None) -> ServerError:
    """The exception a client raises for a response with this code (unknown codes keep the code)."""
    cls = _BY_CODE.get(code, ServerError)
    return cls(remark or f"response code {code}", code=code)


# -- client side (MQClientException / MQBrokerException) --------------------------------------------


class MQClientError(RocketQError):
    """A failure the client detects itself (RocketMQ's MQClientException): bad state, bad input,
    no name server, no route. ``code`` is a ResponseCode when one fits, else a ClientErrorCode."""

    code = -1


class ServiceStateError(MQClientError):
    """A producer/consumer used in the wrong lifecycle state (second start, send before start)."""


class GroupAlreadyRegistered(MQClientError):
    """A second producer or consumer of one group inside one MQClientInstance (client id)."""


class InvalidMessage(MQClientError):
    """A message refused before sending: bad topic, empty or oversized body, bad batch."""

    code = ResponseCode.MESSAGE_ILLEGAL


class InvalidArgument(MQClientError):
    """A bad argument to a client call (group name, selector result, subscription expression)."""


class NoNameServer(MQClientError):
    """No name server address configured or found (ClientErrorCode.NO_NAME_SERVER_EXCEPTION)."""

    code = 10004
    retriable = True


class TopicRouteNotFound(MQClientError):
    """No route for a topic, not even the auto-create one (ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION)."""

    code = 10005


class BrokerNotFound(MQClientError):
    """A broker name the route names but whose address is unknown (BROKER_NOT_EXIST_EXCEPTION)."""

    code = 10003
    retriable = True


class MQBrokerError(ServerError):
    """A broker answered with a code the client has no narrower class for (MQBrokerException)."""
