"""One error tree for the whole of rocketq.

Every error a server can answer with carries the RocketMQ response code it maps to, so a
processor raises and the transport turns the exception into a response with that code and the
message as remark. On the client side `for_code()` turns a response back into the same class.

Errors carry what they are about as fields (``code``, ``broker_addr``, ``topic``), not pasted
into their text; ``str()`` renders them after the message.

``retriable`` answers one question: may the same request succeed if sent again, to another
broker? The producer reads it to decide whether a failed send moves to another broker
(``client/producer/send_call.py``). For broker answers it is True exactly for the response
codes Java's producer retries on: DefaultMQProducer.retryResponseCodes of 4.9.x
(TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION, NO_BUYER_ID,
NOT_IN_CURRENT_UNIT), plus the two that 5.x added and rocketq already retried on
(SYSTEM_BUSY: an overloaded broker, GO_AWAY: a broker shutting down). Transport failures and
client-side lookups that a route refresh can fix are retriable too, as Java's producer
retries every RemotingException and MQClientException.
"""

from __future__ import annotations

from rocketq.codec.codes import ResponseCode


class RocketQError(Exception):
    """Base of every error rocketq raises on purpose.

    ``broker_addr`` is the server the error came from or concerns, ``topic`` the topic; both
    are None when they do not apply.
    """

    code: int = ResponseCode.SYSTEM_ERROR
    retriable: bool = False
    broker_addr: str | None = None
    topic: str | None = None

    def __init__(
        self,
        message: str = "",
        *,
        code: int | None = None,
        broker_addr: str | None = None,
        topic: str | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if broker_addr is not None:
            self.broker_addr = broker_addr
        if topic is not None:
            self.topic = topic

    @property
    def remark(self) -> str:
        """The message alone (what a server sends as a response's remark)."""
        return str(self.args[0]) if self.args else ""

    def _fields_text(self) -> str:
        text = ""
        if self.topic is not None:
            text += f"  TOPIC: {self.topic}"
        if self.broker_addr is not None:
            text += f"  BROKER: {self.broker_addr}"
        return text

    def __str__(self) -> str:
        return self.remark + self._fields_text()


class ProtocolError(RocketQError):
    """Bytes that do not form a valid RemotingCommand, header or message.

    The codec raises only this (or a subclass) for any input, however malformed; a transport that
    sees it on a frame closes that connection. Retriable: an answer one peer garbled, another
    peer may answer properly.
    """

    retriable = True


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
    """An error answered by a server with a response code; raised by processors, seen by clients.

    One a client received (``for_code``) shows its code as RocketMQ's MQBrokerException does:
    ``CODE: 17  DESC: <remark>  BROKER: <addr>``.
    """

    answered: bool = False

    def __str__(self) -> str:
        if not self.answered:
            return super().__str__()
        return f"CODE: {self.code}  DESC: {self.remark}{self._fields_text()}"


class SystemError_(ServerError):  # noqa: N801 - RocketMQ's SYSTEM_ERROR; trailing _ avoids the builtin
    """Retriable: Java's producer retries SYSTEM_ERROR on another broker."""

    code = ResponseCode.SYSTEM_ERROR
    retriable = True


class SystemBusy(ServerError):
    """Retriable: an overloaded broker; another may take the request (retried by Java 5.x, not 4.9.x)."""

    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupported(ServerError):
    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class MessageIllegal(ServerError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailable(ServerError):
    """Retriable: this broker cannot serve now (slave, shutting down, store not writable)."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermission(ServerError):
    """Retriable: the refusal is this broker's (a broker whose write permission was wiped keeps
    answering it while others of the topic take sends); Java's producer retries it too."""

    code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExist(ServerError):
    """Retriable: another broker of the route may carry the topic (or auto-create it)."""

    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class NoBuyerId(ServerError):
    """Retriable, as in Java's producer (a Taobao-era code no rocketq broker answers)."""

    code = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnit(ServerError):
    """Retriable, as in Java's producer (unit mode; no rocketq broker answers it)."""

    code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


class GoAway(ServerError):
    """Retriable: a 5.x broker shutting down asks the client to go elsewhere (retried by Java 5.3)."""

    code = ResponseCode.GO_AWAY
    retriable = True


class TopicExistAlready(ServerError):
    code = ResponseCode.TOPIC_EXIST_ALREADY


class QueryNotFound(ServerError):
    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailed(ServerError):
    # Declared int, as MQClientError.code is: FilterExpressionError inherits from both.
    code: int = ResponseCode.SUBSCRIPTION_PARSE_FAILED


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
    """The store refused or failed an operation (disk full, closed, corrupt data).

    `put_status` names the RocketMQ PutMessageStatus a put refused by this error answers with
    (the store maps it in one place, `store/put.py`; the broker maps statuses to codes)."""

    code = ResponseCode.SYSTEM_ERROR
    put_status = "UNKNOWN_ERROR"


class StoreClosed(StoreError):
    """Puts after shutdown, or before the store finished loading."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    put_status = "SERVICE_NOT_AVAILABLE"

    def __init__(self, root: str) -> None:
        super().__init__(f"message store {root} is not open")
        self.root = root


class StoreIsSlave(StoreError):
    """Puts on a slave: its commit log is written by replication from the master only."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    put_status = "SERVICE_NOT_AVAILABLE"

    def __init__(self, root: str) -> None:
        super().__init__(f"message store {root} is in slave mode, so putMessage is forbidden")


class DiskFull(StoreError):
    """No disk blocks for `needed` bytes of `path`: writing them through a mapping would fault,
    so the put is refused before anything of it is written."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    put_status = "SERVICE_NOT_AVAILABLE"

    def __init__(self, path: str, needed: int) -> None:
        super().__init__(f"no space left on device for {needed} bytes of {path}")
        self.path = path
        self.needed = needed


class MessageTooLarge(StoreError):
    """A record larger than a commit-log segment can ever hold."""

    code = ResponseCode.MESSAGE_ILLEGAL
    put_status = "MESSAGE_ILLEGAL"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record of {size} bytes cannot fit a {limit}-byte segment")
        self.size = size
        self.limit = limit


class CreateMappedFileFailed(StoreError):
    """A segment file could not be created or mapped (permissions, descriptors, ...)."""

    code = ResponseCode.SYSTEM_ERROR
    put_status = "CREATE_MAPPED_FILE_FAILED"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"create mapped file {path} failed: {reason}")
        self.path = path
        self.reason = reason


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
        NoBuyerId,
        NotInCurrentUnit,
        GoAway,
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


def for_code(
    code: int, remark: str | None = None, *, broker_addr: str | None = None, topic: str | None = None
) -> ServerError:
    """The exception a client raises for a response with this code (unknown codes keep the code)."""
    cls = _BY_CODE.get(code, ServerError)
    err = cls(remark or "", code=code, broker_addr=broker_addr, topic=topic)
    err.answered = True
    return err


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


class FilterExpressionError(SubscriptionParseFailed, InvalidArgument):
    """A SQL92 filter expression that does not parse, or compares what cannot be compared.

    ``position`` is the 0-based offset in ``expression`` where it goes wrong; ``line`` and
    ``column`` (1-based) say the same the way RocketMQ's parser does. Raised by ``subscribe()``
    (so ``except InvalidArgument`` catches it) and answered by the broker with its code.
    """

    def __init__(self, message: str, *, expression: str, position: int) -> None:
        before = expression[:position]
        self.expression = expression
        self.position = position
        self.line = before.count("\n") + 1
        self.column = position - (before.rfind("\n") + 1) + 1
        super().__init__(f"Invalid MessageSelector: {message} at line {self.line}, column {self.column} "
                         f"(offset {position}) of {expression!r}")

    @classmethod
    def at(cls, expression: str, position: int, message: str) -> FilterExpressionError:
        return cls(message, expression=expression, position=position)


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


class PullFailed(MQClientError):
    """A lite-pull consumer's queue failed ``failures`` pulls in a row: ``poll()`` raises this
    rather than answer empty batches forever. ``__cause__`` is the last failure, whose ``code``
    this carries; the pulls go on, so a later ``poll()`` recovers when the cause goes away."""

    retriable = True
    message_queue: object = None
    failures: int = 0


class RequestTimeout(MQClientError):
    """``Producer.request`` got no reply within its timeout (RocketMQ's RequestTimeoutException,
    ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION). Not retriable: the request may have been served."""

    code = 10006


class CreateReplyMessageError(InvalidArgument):
    """``create_reply_message`` of a message that is no request: no CLUSTER property (the broker
    adds it to every stored message) or no message (CREATE_REPLY_MESSAGE_EXCEPTION)."""

    code = 10007


class MQBrokerError(ServerError):
    """A broker answered with a code the client has no narrower class for (MQBrokerException)."""
