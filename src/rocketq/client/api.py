"""MQClientAPI: one async method per client RPC (RocketMQ's MQClientAPIImpl).

Every method sends one request through the shared ``RemotingClient`` and turns the answer into a
value or an exception: a broker's error code becomes the ``rocketq.errors`` class of that code
(``MQBrokerError`` when no narrower class exists), transport failures stay ``RemotingError``.
Timeouts are in seconds (``None``: the config's ``mq_client_api_timeout``).

A pull answer comes back undecoded (``PullResultExt``): decoding its records, the tag filter and
the next-broker suggestion belong to the pull wrapper (``rocketq.client.consumer.pull_api``), as
MQClientAPIImpl.processPullResponse and PullAPIWrapper.processPullResult split it in Java.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Sequence
from typing import Any, Final

import orjson

from rocketq.client.condition_log import ConditionLog
from rocketq.client.config import ClientConfig
from rocketq.client.message import MessageExt, MessageQueue, PullResultExt, PullStatus, SendResult, SendStatus
from rocketq.codec.bodies import (
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    SubscriptionData,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from rocketq.codec.codes import V5_0_0, RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    BoundaryType,
    ConsumerSendMsgBackRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rocketq.codec.headers.timer import RecallMessageRequestHeader
from rocketq.codec.message import (
    MessageSysFlag,
    decode_message,
    decode_messages,
    decode_properties,
    decompress_body,
)
from rocketq.errors import (
    MQBrokerError,
    MQClientError,
    NoNameServer,
    ProtocolError,
    RemotingConnectError,
    RemotingError,
    RemotingSendError,
    RemotingTimeoutError,
    ServerError,
    TopicRouteNotFound,
    for_code,
)
from rocketq.remoting import RemotingClient

__all__ = [
    "PULL_SYS_FLAG_COMMIT_OFFSET",
    "PULL_SYS_FLAG_LITE_PULL",
    "PULL_SYS_FLAG_SUBSCRIPTION",
    "PULL_SYS_FLAG_SUSPEND",
    "MQClientAPI",
    "broker_error",
    "decode_records",
    "decompressed",
    "failure_reason",
    "parse_pull_response",
    "parse_tags",
    "process_send_response",
    "vip_address",
]

log = logging.getLogger("rocketq.client")

# PullSysFlag (PROTOCOL.md §4.6)
PULL_SYS_FLAG_COMMIT_OFFSET: Final = 0x1
PULL_SYS_FLAG_SUSPEND: Final = 0x2
PULL_SYS_FLAG_SUBSCRIPTION: Final = 0x4
PULL_SYS_FLAG_CLASS_FILTER: Final = 0x8
PULL_SYS_FLAG_LITE_PULL: Final = 0x10

# Request header fields RocketMQ 5.0 added (RpcRequestHeader's, TopicRequestHeader's, and those of
# the requests clients send; broker/compat.py has the same list, per code): sent only to brokers
# that announced 5.0 or later.
FIELDS_5X: Final = (
    "bname", "lo", "ns", "nsd", "oway",
    "maxMsgBytes", "requestSource", "proxyFrowardClientId", "setZeroIfNotFound", "committed",
)

_SEND_STATUS: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS: Final[dict[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
_DEFAULT_REGION: Final = "DefaultRegion"
_COMPRESSED = MessageSysFlag.COMPRESSED_FLAG


def broker_error(response: RemotingCommand, addr: str | None = None, topic: str | None = None) -> ServerError:
    """The exception for an error answer: the code's own class, else MQBrokerError; ``addr``
    (the server that answered) and ``topic`` become its fields."""
    code = response.code
    err = for_code(code, response.remark, broker_addr=addr or None, topic=topic)
    if type(err) is ServerError:
        err = MQBrokerError(err.remark, code=code, broker_addr=err.broker_addr, topic=topic)
        err.answered = True
    return err


def failure_reason(exc: BaseException) -> str:
    """A transport failure in a few words ("connection refused", "timed out", ...)."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, RemotingTimeoutError) or isinstance(cause, TimeoutError):
        return "timed out"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return str(exc)


def vip_address(addr: str) -> str:
    """The broker's VIP channel (listen port - 2), RocketMQ's MixAll.brokerVIPChannel."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        return addr
    return f"{host}:{int(port) - 2}"


def parse_tags(expression: str | None) -> frozenset[str] | None:
    """The tag set of a TAG subscription ``"A || B"``; None for ``*`` (everything)."""
    if expression is None:
        return None
    expression = expression.strip()
    if not expression or expression == "*":
        return None
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return tags or None


# -- send -------------------------------------------------------------------------------------------


class _SendResultBuilder:
    # A frozen dataclass stores each field through object.__setattr__ (about 1 us for a
    # SendResult, once per message); filling a twin with the same slots and retagging it gives
    # the same frozen instance for a quarter of that.
    __slots__ = SendResult.__slots__


def _send_result(
    status: SendStatus,
    msg_id: str,
    mq: MessageQueue,
    queue_offset: int,
    offset_msg_id: str | None,
    transaction_id: str | None,
    region_id: str | None,
    trace_on: bool,
    recall_handle: str | None = None,
) -> SendResult:
    r: Any = object.__new__(_SendResultBuilder)
    r.status = status
    r.msg_id = msg_id
    r.message_queue = mq
    r.queue_offset = queue_offset
    r.offset_msg_id = offset_msg_id
    r.transaction_id = transaction_id
    r.region_id = region_id
    r.trace_on = trace_on
    r.recall_handle = recall_handle
    r.__class__ = SendResult
    return r  # type: ignore[no-any-return]


def process_send_response(
    response: RemotingCommand,
    broker_name: str,
    topic: str,
    msg_id: str,
    addr: str | None = None,
    mq: MessageQueue | None = None,
) -> SendResult:
    """A send answer -> SendResult (stored) or the error of its code (not stored).

    ``mq``, the queue the request named, is reused for the result when the broker kept it.
    """
    status = _SEND_STATUS.get(response.code)
    if status is None:
        raise broker_error(response, addr, topic)
    ext = response.ext_fields
    if not ext:
        raise ProtocolError("send response without a header", broker_addr=addr, topic=topic)
    try:
        queue_id = int(ext["queueId"])
        queue_offset = int(ext["queueOffset"])
        offset_msg_id = ext["msgId"]
    except (KeyError, ValueError) as e:
        raise ProtocolError(f"malformed send response header: {e!r}", broker_addr=addr, topic=topic) from None
    if mq is None or mq.queue_id != queue_id or mq.topic != topic:
        mq = MessageQueue(topic, broker_name, queue_id)
    return _send_result(
        status,
        msg_id,
        mq,
        queue_offset,
        offset_msg_id,
        ext.get("transactionId"),
        ext.get("MSG_REGION", _DEFAULT_REGION),
        ext.get("TRACE_ON", "true") != "false",
        ext.get("recallHandle"),
    )


# -- pull -------------------------------------------------------------------------------------------


def decompressed(msg: MessageExt) -> MessageExt:
    """``msg`` with its body inflated when the producer compressed it."""
    if msg.sys_flag & _COMPRESSED:
        return dataclasses.replace(msg, body=decompress_body(msg.body, msg.sys_flag))
    return msg


def decode_records(
    body: bytes | bytearray | memoryview, addr: str | None, extra_properties: str = ""
) -> list[MessageExt]:
    """Every record of a pull or query body; a corrupt record ends the batch, as in
    MessageDecoder.decodes (``ProtocolError`` only when not even the first one decodes)."""
    try:
        return decode_messages(body, extra_properties)
    except ProtocolError as first:
        extra = decode_properties(extra_properties)
        out: list[MessageExt] = []
        pos = 0
        while pos < len(body):
            try:
                msg, pos = decode_message(body, pos)
            except ProtocolError:
                break
            msg.properties.update(extra)
            out.append(msg)
        if not out:
            raise ProtocolError(f"undecodable pull body: {first.remark}", broker_addr=addr) from None
        log.warning("pull body from %s: decoded %d messages, then %s", addr, len(out), first)
        return out


def parse_pull_response(
    response: RemotingCommand, addr: str | None = None, topic: str | None = None
) -> PullResultExt:
    """A pull answer -> PullResultExt (records left undecoded); codes other than the four pull
    outcomes raise the error of their code."""
    status = _PULL_STATUS.get(response.code)
    if status is None:
        raise broker_error(response, addr, topic)
    ext = response.ext_fields
    if ext is None:
        raise ProtocolError("pull response without a header", broker_addr=addr, topic=topic)
    try:
        next_begin = int(ext["nextBeginOffset"])
        min_offset = int(ext["minOffset"])
        max_offset = int(ext["maxOffset"])
        suggest = int(ext.get("suggestWhichBrokerId", "0"))
    except (KeyError, ValueError) as e:
        raise ProtocolError(f"malformed pull response header: {e!r}", broker_addr=addr, topic=topic) from None
    body: bytes | bytearray | memoryview = b""
    if status is PullStatus.FOUND:
        raw = response.body
        body = raw if isinstance(raw, bytes | bytearray | memoryview) else response.body_bytes()
    return PullResultExt(status, next_begin, min_offset, max_offset, suggest, body)


class MQClientAPI:
    """The client's RPCs. Shared by every producer and consumer of one MQClientInstance."""

    def __init__(self, remoting_client: RemotingClient, config: ClientConfig) -> None:
        self.remoting_client = remoting_client
        self.config = config
        self._namesrv_addrs: list[str] = []
        self._namesrv_index = 0
        # Why the last name-server request failed on every address (None once one answered).
        self.namesrv_failure: RemotingError | None = None
        # An unreachable name server needs the user's action: WARNING, but once per outage.
        self._namesrv_down = ConditionLog(log, logging.WARNING)
        self._default_timeout = config.mq_client_api_timeout / 1000.0
        self._vip = config.vip_channel_enabled
        # broker address -> the MQVersion its last answer announced. A code or field newer than
        # 4.9 goes to a broker only once it has told us it is new enough (docs/interop.md).
        self.broker_versions: dict[str, int] = {}
        # brokers announcing 5.x that still refused LITE_PULL_MESSAGE: they get PULL_MESSAGE
        self._lite_pull_refused: set[str] = set()

    @property
    def default_timeout(self) -> float:
        """Seconds an RPC waits unless told otherwise (mq_client_api_timeout)."""
        return self._default_timeout

    def _timeout(self, timeout: float | None) -> float:
        return self._default_timeout if timeout is None else timeout

    def _broker(self, addr: str) -> str:
        return vip_address(addr) if self._vip else addr

    async def _invoke(
        self, addr: str, code: int, ext: dict[str, str] | None, body: bytes, timeout: float | None
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, self.fields_for(addr, ext), body)
        response = await self.remoting_client.invoke(addr, request, self._timeout(timeout))
        self.broker_versions[addr] = response.version
        return response

    def knows_5x(self, addr: str) -> bool:
        """Whether ``addr`` announced RocketMQ 5.0 or later in an answer."""
        return self.broker_versions.get(addr, 0) >= V5_0_0

    def fields_for(self, addr: str, ext: dict[str, str] | None) -> dict[str, str] | None:
        """``ext`` without the header fields 5.0 added unless ``addr`` is known to be 5.x: a 4.x
        broker ignores them, so nothing may depend on one there."""
        if ext and not self.knows_5x(addr):
            for key in FIELDS_5X:
                if key in ext:
                    del ext[key]
        return ext

    # -- name servers ----------------------------------------------------------------------------

    @property
    def namesrv_addr_list(self) -> list[str]:
        return list(self._namesrv_addrs)

    def update_name_server_address_list(self, addrs: str | Sequence[str]) -> None:
        """Replace the name server list (``"a:9876;b:9876"`` or a sequence)."""
        if isinstance(addrs, str):
            addrs = addrs.split(";")
        cleaned = [a.strip() for a in addrs if a and a.strip()]
        if cleaned == self._namesrv_addrs:
            return
        log.info("name server address updated. NEW : %s , OLD: %s", cleaned, self._namesrv_addrs)
        self._namesrv_addrs = cleaned
        # Spread clients over the name servers like Java's random start index.
        self._namesrv_index = random.randrange(len(cleaned)) if cleaned else 0

    async def invoke_namesrv(self, request: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Send to the current name server; on a connect failure try each other one once."""
        addrs = self._namesrv_addrs
        if not addrs:
            raise NoNameServer("No name server address, please set it (namesrv_addr or env NAMESRV_ADDR)")
        last: RemotingError | None = None
        for _ in range(len(addrs)):
            addr = addrs[self._namesrv_index % len(addrs)]
            try:
                response = await self.remoting_client.invoke(addr, request, self._timeout(timeout))
            except (RemotingConnectError, RemotingSendError) as e:
                reason = failure_reason(e)
                self._namesrv_down.report(addr, reason, "name server %s unreachable (%s): %s",
                                          addr, reason, e)
                last = e
                self._namesrv_index = (self._namesrv_index + 1) % len(addrs)
            except RemotingError as e:
                self.namesrv_failure = e
                raise
            else:
                self.namesrv_failure = None
                if self._namesrv_down.active(addr):
                    self._namesrv_down.clear(addr)
                    log.info("name server %s reachable again", addr)
                return response
        assert last is not None
        self.namesrv_failure = last
        raise last

    def route_error(self, topic: str, message: str) -> TopicRouteNotFound:
        """The error for a topic without a route: ``message``, unless the name servers could not
        be reached, which it then says, with the transport failure as its cause."""
        failure = self.namesrv_failure
        if failure is None:
            return TopicRouteNotFound(message, topic=topic)
        addrs = ";".join(self._namesrv_addrs)
        reason = failure_reason(failure)
        err = TopicRouteNotFound(f"no name server reachable at {addrs} ({reason})", topic=topic)
        err.__cause__ = failure
        return err

    async def get_topic_route_info_from_name_server(
        self, topic: str, timeout: float | None = None
    ) -> TopicRouteData:
        """The route of ``topic``; ``TopicNotExist`` when the name server has none."""
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic, accept_standard_json_only=True).to_ext(),
        )
        response = await self.invoke_namesrv(request, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, topic=topic)
        return TopicRouteData.from_json(response.body_bytes())

    # -- pull -------------------------------------------------------------------------------------

    async def pull_message(
        self, addr: str, header: PullMessageRequestHeader, timeout: float
    ) -> PullResultExt:
        """PULL_MESSAGE, records undecoded; LITE_PULL_MESSAGE (5.0's own code, served by its own
        executor there) when the lite-pull flag is set and ``addr`` announced 5.0 or later.

        4.x brokers know only PULL_MESSAGE (4.x Java lite-pull consumers send it, flag and all);
        a broker that refuses 361 all the same is remembered and asked with 11 from then on.
        ``timeout`` must cover the long-poll hold (suspend_timeout_millis) plus the round trip.
        """
        ext = self.fields_for(addr, header.to_ext())
        if header.sys_flag & PULL_SYS_FLAG_LITE_PULL and self.supports_lite_pull(addr):
            request = RemotingCommand.request(RequestCode.LITE_PULL_MESSAGE, ext)
            response = await self.remoting_client.invoke(addr, request, timeout)
            if response.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                self.broker_versions[addr] = response.version
                return parse_pull_response(response, addr, header.topic)
            log.info("broker %s does not support LITE_PULL_MESSAGE, pulling with PULL_MESSAGE", addr)
            self._lite_pull_refused.add(addr)
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
        response = await self.remoting_client.invoke(addr, request, timeout)
        self.broker_versions[addr] = response.version
        return parse_pull_response(response, addr, header.topic)

    def supports_lite_pull(self, addr: str) -> bool:
        return self.knows_5x(addr) and addr not in self._lite_pull_refused

    # -- offsets ----------------------------------------------------------------------------------

    async def query_consumer_offset(
        self, addr: str, header: QueryConsumerOffsetRequestHeader, timeout: float | None = None
    ) -> int:
        """The group's stored offset of a queue; -1 when the broker has none (QUERY_NOT_FOUND)."""
        response = await self._invoke(
            self._broker(addr), RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext(), b"", timeout
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return self._offset(response, addr)

    async def update_consumer_offset(
        self, addr: str, header: UpdateConsumerOffsetRequestHeader, timeout: float | None = None
    ) -> None:
        response = await self._invoke(
            self._broker(addr), RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext(), b"", timeout
        )
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)

    async def update_consumer_offset_oneway(
        self, addr: str, header: UpdateConsumerOffsetRequestHeader
    ) -> None:
        """What push consumers send every persist interval; returns once the frame is queued."""
        addr = self._broker(addr)
        ext = self.fields_for(addr, header.to_ext())
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext, oneway=True)
        await self.remoting_client.invoke_oneway(addr, request, self._default_timeout)

    def _offset(self, response: RemotingCommand, addr: str, key: str = "offset") -> int:
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)
        try:
            return int((response.ext_fields or {})[key])
        except (KeyError, ValueError):
            raise ProtocolError(f"response has no valid <{key}>", broker_addr=addr) from None

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        """The queue's max offset (the index the next message gets)."""
        ext = GetMaxOffsetRequestHeader(mq.topic, mq.queue_id).to_ext()
        response = await self._invoke(self._broker(addr), RequestCode.GET_MAX_OFFSET, ext, b"", timeout)
        return self._offset(response, addr)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        ext = GetMinOffsetRequestHeader(mq.topic, mq.queue_id).to_ext()
        response = await self._invoke(self._broker(addr), RequestCode.GET_MIN_OFFSET, ext, b"", timeout)
        return self._offset(response, addr)

    async def search_offset(
        self,
        addr: str,
        mq: MessageQueue,
        timestamp: int,
        timeout: float | None = None,
        boundary_type: BoundaryType = BoundaryType.LOWER,
    ) -> int:
        """The broker's offset for ``timestamp`` ms: from 5.0 the first (LOWER) / last (UPPER)
        message stored at it, before 5.0 the nearest one (``PullAPIWrapper.offset_at_or_after``
        corrects that). 4.x knows no ``boundaryType``: it is sent only for UPPER, LOWER being
        5.x's default when absent."""
        ext = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp, boundary_type).to_ext()
        if boundary_type is BoundaryType.LOWER:
            ext.pop("boundaryType", None)
        response = await self._invoke(
            self._broker(addr), RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext, b"", timeout
        )
        return self._offset(response, addr)

    async def get_earliest_msg_storetime(
        self, addr: str, mq: MessageQueue, timeout: float | None = None
    ) -> int:
        ext = GetEarliestMsgStoretimeRequestHeader(mq.topic, mq.queue_id).to_ext()
        response = await self._invoke(
            self._broker(addr), RequestCode.GET_EARLIEST_MSG_STORETIME, ext, b"", timeout
        )
        return self._offset(response, addr, "timestamp")

    # -- clients and groups -------------------------------------------------------------------------

    async def get_consumer_id_list_by_group(
        self, addr: str, consumer_group: str, timeout: float | None = None
    ) -> list[str]:
        """Client ids of the group's live consumers on that broker (unsorted, as sent)."""
        response = await self._invoke(
            addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": consumer_group}, b"", timeout
        )
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)
        body = response.body_bytes()
        if not body:
            return []
        return list(GetConsumerListByGroupResponseBody.from_json(body).consumer_id_list)

    async def send_heartbeat(self, addr: str, heartbeat: HeartbeatData, timeout: float | None = None) -> int:
        """HEART_BEAT; returns the broker's version (the response's ``version`` field)."""
        response = await self._invoke(addr, RequestCode.HEART_BEAT, None, heartbeat.to_json(), timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)
        return response.version

    async def check_client_in_broker(self, addr: str, group: str, client_id: str,
                                     subscription: SubscriptionData, timeout: float | None = None) -> None:
        """CHECK_CLIENT_CONFIG: can this broker filter by the subscription's expression type (SQL92)?

        ``MQClientError`` with the broker's code and remark if not, as Java's MQClientException."""
        body = orjson.dumps({"clientId": client_id, "group": group,
                             "subscriptionData": subscription.to_obj()})
        response = await self._invoke(addr, RequestCode.CHECK_CLIENT_CONFIG, None, body, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise MQClientError(f"CODE: {response.code}  DESC: {response.remark or ''}  BROKER: {addr}",
                                code=response.code)

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        producer_group: str | None = None,
        consumer_group: str | None = None,
        timeout: float | None = None,
    ) -> None:
        ext = UnregisterClientRequestHeader(client_id, producer_group, consumer_group).to_ext()
        response = await self._invoke(addr, RequestCode.UNREGISTER_CLIENT, ext, b"", timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)

    async def consumer_send_message_back(
        self,
        addr: str,
        broker_name: str,
        msg: MessageExt,
        consumer_group: str,
        delay_level: int,
        timeout: float | None = None,
        max_consume_retry_times: int | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-queues the message to %RETRY%<group> (or the DLQ).

        ``broker_name`` is the broker the message was pulled from (kept for RocketMQ's signature;
        the request goes to ``addr``).
        """
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=consumer_group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            unit_mode=False,
            max_reconsume_times=max_consume_retry_times,
        )
        response = await self._invoke(
            self._broker(addr), RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext(), b"", timeout
        )
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)

    async def lock_batch_mq(
        self, addr: str, body: LockBatchRequestBody, timeout: float | None = None
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ: the queues of ``body.mq_set`` this client now holds the lock of."""
        response = await self._invoke(addr, RequestCode.LOCK_BATCH_MQ, None, body.to_json(), timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)
        data = response.body_bytes()
        if not data:
            return set()
        return set(LockBatchResponseBody.from_json(data).lock_ok_mq_set)

    async def unlock_batch_mq(
        self, addr: str, body: UnlockBatchRequestBody, timeout: float | None = None, oneway: bool = False
    ) -> None:
        if oneway:
            request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body.to_json(), oneway=True)
            await self.remoting_client.invoke_oneway(addr, request, self._timeout(timeout))
            return
        response = await self._invoke(addr, RequestCode.UNLOCK_BATCH_MQ, None, body.to_json(), timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)

    # -- queries ----------------------------------------------------------------------------------

    async def recall_message(self, addr: str, header: RecallMessageRequestHeader,
                             timeout: float | None = None) -> str:
        """RECALL_MESSAGE (370, RocketMQ 5.3.2): cancel a pending timer message; its message id."""
        response = await self._invoke(addr, RequestCode.RECALL_MESSAGE, header.to_ext(), b"", timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr, header.topic)
        return (response.ext_fields or {}).get("msgId", "")

    async def view_message(self, addr: str, phy_offset: int, timeout: float | None = None) -> MessageExt:
        """The message stored at commit-log offset ``phy_offset`` (decode an offset msgId for both)."""
        ext = ViewMessageRequestHeader(phy_offset).to_ext()
        response = await self._invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, ext, b"", timeout)
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)
        msg, _ = decode_message(response.body_bytes())
        return decompressed(msg)

    async def query_message(
        self, addr: str, header: QueryMessageRequestHeader, timeout: float | None = None
    ) -> list[MessageExt]:
        """QUERY_MESSAGE by key (or UNIQ_KEY with ``unique_key_query``); [] when nothing matches."""
        response = await self._invoke(addr, RequestCode.QUERY_MESSAGE, header.to_ext(), b"", timeout)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        if response.code != ResponseCode.SUCCESS:
            raise broker_error(response, addr)
        body = response.body_bytes()
        msgs = decode_records(body, addr) if body else []
        return [decompressed(m) for m in msgs]

