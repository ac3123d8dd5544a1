"""SendMessageProcessor: SEND_MESSAGE (V1), SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, CONSUMER_SEND_MSG_BACK.

The hot path takes runs: every send a pipelining producer's read delivered reaches
`process_many` at once (`handles_runs`). Each one-message send is checked on its own (the V2
fields read straight from extFields, a handful of `str.find`s over the client's properties
string, which is never decoded into a dict nor re-encoded: the broker appends UNIQ_KEY /
CLUSTER to it), then the run is stored with one `append_many` and answered with pre-formatted
extFields. With ASYNC_FLUSH the answers go back in the same loop iteration, without a Task;
with SYNC_FLUSH one group-commit waiter answers the whole run. Wire parsing that needs no
broker state (V2 fields, properties, batch bodies) is in `send_wire.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING, Any, Union

import orjson

from rocketq.broker.processors.send_wire import (
    P_DELAY,
    P_KEYS,
    P_TAGS,
    P_UNIQ,
    P_WAIT,
    TIMER_KEYS,
    SendFields,
    batch_properties_suffix,
    decode_batch_body,
    index_keys,
    joined_msg_ids,
    v2_fields,
)
from rocketq.broker.timer import (
    TIMER_TOPIC,
    add_recall_handle,
    real_queue_id,
    recall_handle_for,
    transform_timer_message,
)
from rocketq.broker.topic_manager import PERM_READ, PERM_WRITE, check_send_allowed, check_topic_name
from rocketq.broker.transaction.half import half_properties, is_transactional
from rocketq.codec.bodies import TopicFilterType
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from rocketq.codec.message import (
    MessageSysFlag,
    decode_message,
    encode_properties,
    tags_code,
)
from rocketq.codec.properties import MessageConst, append_encoded, append_properties, get_property, needle
from rocketq.codec.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
)
from rocketq.errors import (
    InvalidParameter,
    MessageIllegal,
    NoPermission,
    ProtocolError,
    SubscriptionGroupNotExist,
    SystemError_,
    TopicNotExist,
)
from rocketq.remoting.endpoint import handles_runs
from rocketq.store.commitlog import EncodedBatch
from rocketq.store.model import (
    ENTRY_PROPERTIES,
    ENTRY_QUEUE_ID,
    MessageToStore,
    PutMessageResult,
    PutMessageStatus,
    SingleEntry,
)

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.rebalance_lock import RebalanceLockManager
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.send")

_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_from_ext_v1 = SendMessageRequestHeader.from_ext
_from_ext_v2 = SendMessageRequestHeader.from_ext_v2

_TRAN_MASK = MessageSysFlag.TRANSACTION_MASK
_MULTI_TAGS = MessageSysFlag.MULTI_TAGS_FLAG
_MULTI_TAG_TYPE = TopicFilterType.MULTI_TAG
DLQ_NUMS_PER_GROUP = 1
TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
APPLY_TOPIC_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"

# Stored statuses answer with the send header fields; the others with a code and remark.
_PUT_OK = PutMessageStatus.PUT_OK
# The answers of a stored message: the code says which wait after the append fell short.
_STORED_CODES = {
    _PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
_FAILED: dict[PutMessageStatus, tuple[int, str]] = {
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: (
        ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max}B, msg properties length limit 32KB."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max}B, msg properties length limit 32KB."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's disk "
        "is full [{disk}], messages are put to the slave, message store has been shut down, etc."),
    PutMessageStatus.OS_PAGE_CACHE_BUSY: (
        ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}

# One answer of process_many: a response, an awaitable of one, or what `process` would raise.
_Result = Union["RemotingCommand", Awaitable["RemotingCommand"], BaseException, None]
# A checked single send: (its index in the results, request, what to store, wait for the flush, uniq)
_Checked = tuple[int, "RemotingCommand", SingleEntry, bool, str]
# A stored one waiting for the group commit: (index, request, offset, queue offset, queue id, uniq)
_Stored = tuple[int, "RemotingCommand", int, int, int, str]

# A one-message send answer's extFields, in the order `_response` builds them (msgId, queueId,
# queueOffset, MSG_REGION, TRACE_ON, transactionId).
_OK_EXT = b'{"msgId":"%b%016X","queueId":"%d","queueOffset":"%d",%b,"transactionId":"%b"}'




_HALF = RMQ_SYS_TRANS_HALF_TOPIC
_P_REAL_QID = needle(MessageConst.PROPERTY_REAL_QUEUE_ID)


def _real_queue_id(entry: SingleEntry) -> int:
    """The queue a half message's answer names: the producer's (REAL_QID), as RocketMQ answers."""
    text = get_property(ENTRY_PROPERTIES(entry), _P_REAL_QID)
    return int(text) if text and text.lstrip("-").isdigit() else 0


def _parse_born_host(channel: Any) -> tuple[str, int]:
    """(ip, port) of the peer, parsed once per connection and kept on the channel."""
    attrs = channel.attrs
    host = attrs.get("born_host")
    if host is None:
        ip, _, port = str(channel.remote_address).rpartition(":")
        ip = ip.strip("[]") or "127.0.0.1"
        try:
            host = (ip, int(port))
        except ValueError:
            host = (ip, 0)
        attrs["born_host"] = host
    return host  # type: ignore[no-any-return]


class SendMessageProcessor:
    """Handles every producer write (RocketMQ SendMessageProcessor)."""

    def __init__(self, controller: BrokerController, lock_manager: RebalanceLockManager) -> None:
        self._ctl = controller
        self._locks = lock_manager  # an orderly group that holds queues sends its retries to the DLQ
        self._tm = controller.topic_manager
        self._topics = controller.topic_manager.table  # the manager never rebinds its table
        self._rand = random.Random()
        self._tags_codes: dict[str, int] = {}
        self.refresh_config()

    def refresh_config(self) -> None:
        """Cache config-derived values (called again after UPDATE_BROKER_CONFIG)."""
        ctl = self._ctl
        bc = ctl.broker_config
        self._store = ctl.store
        self._msg_id_prefix = ctl.store.msg_id_prefix
        self._stats = ctl.stats
        self._uniq = ctl.uniq_id_generator
        self._cluster = bc.broker_cluster_name
        self._cluster_entry = f"CLUSTER\x01{bc.broker_cluster_name}\x02"
        self._batch_suffixes: dict[str, bytes] = {}  # batch header properties -> what each message gets
        self._broker_writable = bool(bc.broker_permission & PERM_WRITE)
        self._max_size = ctl.store_config.max_message_size
        self._trace_on = "true" if bc.trace_on else "false"
        self._region = bc.region_id
        self._ext_tail = b'"MSG_REGION":%b,"TRACE_ON":%b' % (orjson.dumps(self._region),
                                                            orjson.dumps(self._trace_on))
        self._msg_id_json = orjson.dumps(self._msg_id_prefix)[1:-1]
        # ASYNC_FLUSH on an ASYNC_MASTER (or WAIT=false) acks after the page-cache write: append
        # synchronously and answer without a Task. SYNC_FLUSH awaits the group commit, SYNC_MASTER
        # a slave's ack (one future for both: MessageStore.stored_future).

    @property
    def _sync_flush(self) -> bool:
        # Read per put, not once: in controller mode the role (and with it the SYNC_MASTER wait)
        # is known only after start-up and changes with every switch.
        return self._store.must_wait

    # -- entry points ----------------------------------------------------------------------------

    @handles_runs("process_many")
    def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | Awaitable[RemotingCommand]:
        """SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320)."""
        h, batch = self._header(request)
        if batch:
            changes = self._tm.changes
            answer = self._send_batch(request, channel, h)
            self._ctl.hold_service.wake_now()
            return answer if self._tm.changes == changes else self._after_persist(answer)
        result = self.process_many([request], channel)[0]
        if isinstance(result, BaseException):
            raise result
        assert result is not None
        return result

    def process_many(self, requests: list[RemotingCommand], channel: Any) -> list[_Result]:
        """A run of sends read together from one connection, answered as `process` answers each.

        Single messages are checked one by one and then stored together (`append_many`: one
        lock, one clock reading, one copy into the commit log); a batch request in the run
        first stores the singles before it, so the store sees every message in arrival order.
        """
        results: list[_Result] = []
        lane: list[_Checked] = []
        born_host = channel.attrs.get("born_host") or _parse_born_host(channel)
        changes = self._tm.changes
        for request in requests:
            try:
                fields = v2_fields(request.ext_fields) if request.code == _SEND_V2 else None
                if fields is None:
                    h, batch = self._header(request)
                    if batch:
                        if lane:
                            self._store_lane(lane, results)
                            lane = []
                        results.append(self._send_batch(request, channel, h))
                        continue
                    fields = (h.topic, h.queue_id, h.sys_flag, h.born_timestamp, h.flag, h.properties,
                              h.reconsume_times or 0)
                entry, wait, uniq = self._prepare_single(request, channel, fields, born_host)
            except Exception as exc:
                results.append(exc)
                continue
            lane.append((len(results), request, entry, wait, uniq))
            results.append(None)
        if lane:
            self._store_lane(lane, results)
        # Answer the long polls these messages woke before the sends: see wake_now().
        self._ctl.hold_service.wake_now()
        if self._tm.changes != changes:  # a topic was created on the way: answer once it is on disk
            wrap = self._after_persist
            return [r if r is None or isinstance(r, BaseException) else wrap(r) for r in results]
        return results

    async def _after_persist(self, answer: RemotingCommand | Awaitable[RemotingCommand]) -> RemotingCommand:
        """`answer`, once the topic table that the send changed is on disk: an acknowledged
        message must not be left on a topic a kill -9 forgets. The message itself is stored
        already, so a failed table write (logged by its writer) does not fail the send."""
        with contextlib.suppress(SystemError_):
            await self._tm.persisted()
        return await answer if isinstance(answer, Awaitable) else answer

    def _header(self, request: RemotingCommand) -> tuple[SendMessageRequestHeader, bool]:
        """The typed header and whether the request is a batch."""
        code = request.code
        ext = request.ext_fields
        if code == _SEND_MESSAGE:
            h = _from_ext_v1(ext)
            # The C++ client sends its batches as code 10 with batch "1" (its booleans are 0/1).
            return h, h.batch or (ext is not None and ext.get("batch") == "1")
        h = _from_ext_v2(ext)
        return h, code == _SEND_BATCH or h.batch or (ext is not None and ext.get("m") == "1")

    # -- pre-checks (PROTOCOL.md §2.3) --------------------------------------------------------------

    def _topic_config(self, h: SendMessageRequestHeader, channel: Any) -> Any:
        topic = h.topic
        cfg = self._topics.get(topic)
        if cfg is None:
            cfg = self._create_missing_topic(h, channel)
        elif topic in NOT_ALLOWED_SEND_TOPICS:
            check_send_allowed(topic)
        if not self._broker_writable and cfg.order:
            ip = self._ctl.broker_config.broker_ip1
            raise NoPermission(f"the broker[{ip}] sending message is forbidden")
        if not cfg.perm & PERM_WRITE:
            raise NoPermission(f"the topic[{topic}] sending message is forbidden")
        return cfg

    def _create_missing_topic(self, h: SendMessageRequestHeader, channel: Any) -> Any:
        topic = h.topic
        check_topic_name(topic)
        check_send_allowed(topic)
        is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        sys_flag = 0
        if h.unit_mode:
            sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if is_retry else TOPIC_SYS_FLAG_UNIT
        tm = self._ctl.topic_manager
        log.warning("the topic %s not exist, producer: %s", topic, channel.remote_address)
        cfg = tm.create_topic_in_send_message_method(
            topic, h.default_topic, str(channel.remote_address), h.default_topic_queue_nums, sys_flag)
        if cfg is None and is_retry:
            cfg = tm.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
        if cfg is None:
            raise TopicNotExist(f"topic[{topic}] not exist, apply first please! {APPLY_TOPIC_URL}")
        return cfg

    def _queue_id(self, cfg: Any, queue_id: int, channel: Any) -> int:
        if queue_id < 0:
            nums = cfg.write_queue_nums
            if nums <= 0:
                raise NoPermission(f"the topic[{cfg.topic_name}] has no writable queue")
            return self._rand.randrange(nums)
        if queue_id >= max(cfg.write_queue_nums, cfg.read_queue_nums):
            raise InvalidParameter(
                f"request queueId[{queue_id}] is illegal, {cfg} Producer: {channel.remote_address}")
        return queue_id

    def _retry_or_dlq(self, h: SendMessageRequestHeader, request: RemotingCommand) -> tuple[str, int] | None:
        """For a %RETRY% topic: (DLQ topic, queue) when the message has been retried too often."""
        group = h.topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        sgc = self._ctl.subscription_manager.find_subscription_group_config(group)
        if sgc is None:
            raise SubscriptionGroupNotExist(f"subscription group not exist, {group}")
        max_times = sgc.retry_max_times
        if h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        # An orderly group that still holds queue locks cannot consume a retry: straight to the DLQ.
        locked = self._locks.has_live_locks(group)
        if (h.reconsume_times or 0) <= max_times and not locked:
            return None
        dlq = DLQ_GROUP_TOPIC_PREFIX + group
        cfg = self._ctl.topic_manager.create_topic_in_send_message_back_method(
            dlq, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
        if cfg is None:
            raise SystemError_(f"topic[{dlq}] not exist")
        return dlq, self._rand.randrange(DLQ_NUMS_PER_GROUP)

    def _half(self, topic: str, queue_id: int, props: str, sys_flag: int) -> tuple[str, int, str, int]:
        """A transactional send becomes a half message (TransactionalMessageBridge.parseHalfMessageInner):
        queue 0 of the half topic, REAL_TOPIC / REAL_QID appended, the transaction bits cleared."""
        bc = self._ctl.broker_config
        if bc.reject_transaction_message:
            raise NoPermission(f"the broker[{bc.broker_ip1}] sending transaction message is forbidden")
        if RMQ_SYS_TRANS_HALF_TOPIC not in self._topics:
            self._ctl.transaction_service.bridge.half_topic_config()
        return RMQ_SYS_TRANS_HALF_TOPIC, 0, half_properties(props, topic, queue_id), sys_flag & ~_TRAN_MASK

    # -- single message ------------------------------------------------------------------------------

    def _prepare_single(self, request: RemotingCommand, channel: Any, fields: SendFields,
                        born_host: tuple[str, int]) -> tuple[SingleEntry, bool, str]:
        """Every check of a one-message send, and what to store: (entry, wait for the flush, uniq).

        The rare paths (a topic to create or refuse, a retry topic) decode the full header."""
        topic, queue_id, sys_flag, born_ts, flag, props_or_none, reconsume_times = fields
        cfg = self._topics.get(topic)
        if cfg is None or topic in NOT_ALLOWED_SEND_TOPICS or not cfg.perm & PERM_WRITE or (
                cfg.order and not self._broker_writable):
            cfg = self._topic_config(self._header(request)[0], channel)
        if queue_id < 0 or queue_id >= cfg.write_queue_nums:
            queue_id = self._queue_id(cfg, queue_id, channel)
        body = request.body
        if len(body) > self._max_size:
            raise MessageIllegal(f"the message body size over max value, MAX: {self._max_size}")
        props = props_or_none or ""
        if cfg.topic_filter_type is _MULTI_TAG_TYPE:
            sys_flag |= _MULTI_TAGS
        if topic[0] == "%" and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            moved = self._retry_or_dlq(self._header(request)[0], request)
            if moved is not None:
                topic, queue_id = moved
                props = append_properties(props, ("DELAY", "-1"))
        half = "TRAN_MSG" in props and is_transactional(props)
        if half:
            topic, queue_id, props, sys_flag = self._half(topic, queue_id, props, sys_flag)
        uniq = get_property(props, P_UNIQ) or ""
        # Most messages carry no KEYS and some no TAGS: a substring test is cheaper than a lookup.
        tags = get_property(props, P_TAGS) if P_TAGS in props else None
        keys = get_property(props, P_KEYS) if P_KEYS in props else None
        # The broker's own entries are appended to the client's string in one concatenation.
        if uniq:
            tail = "" if self._cluster_entry in props else self._cluster_entry
        else:
            uniq = self._uniq()
            tail = f"UNIQ_KEY\x01{uniq}\x02{self._cluster_entry}"
        if tail:
            props = append_encoded(props, tail)
        if tags:
            tcode = self._tags_codes.get(tags)
            if tcode is None:
                tcode = tags_code(tags)
                if len(self._tags_codes) < 4096:
                    self._tags_codes[tags] = tcode
        else:
            tcode = 0
        if P_DELAY in props and not half:
            delay = get_property(props, P_DELAY)
            if delay is not None and delay != "0" and delay != "-1":
                topic, queue_id, props, tcode = self._delay(topic, queue_id, props, delay)
        # A half message is not a timer yet: RocketMQ times a transactional one when it is committed.
        if "TIMER_" in props and not half and topic != RMQ_SYS_SCHEDULE_TOPIC and topic != TIMER_TOPIC and (
                any(get_property(props, k) for k in TIMER_KEYS)):
            topic, queue_id, props = transform_timer_message(topic, queue_id, props, self._ctl.store_config)
        wait = True
        if self._sync_flush and P_WAIT in props:
            wait = (get_property(props, P_WAIT) or "true").lower() == "true"
        # A plain tuple in SingleEntry's field order, not the class (see SingleEntry): exact
        # tuples are what CPython builds and unpacks fastest.
        entry: SingleEntry = (  # type: ignore[assignment]
            topic, queue_id, body, flag, props, tcode, (uniq,) if not keys else index_keys(uniq, keys),
            sys_flag, born_ts, born_host, reconsume_times)
        return entry, wait, uniq

    def _store_lane(self, lane: list[_Checked], results: list[_Result]) -> None:
        """Store the checked single messages of a run and put their answers in `results`."""
        stored = self._store.append_many([item[2] for item in lane])
        self._stats.put_total += sum(type(r) is tuple for r in stored)
        ok = self._ok_response
        waiting: list[_Stored] = []
        timers: list[tuple[int, SingleEntry, str]] = []
        target = 0
        for (i, request, entry, wait, uniq), r in zip(lane, stored, strict=True):
            if type(r) is tuple:
                phys, size, qoff = r
                if entry[0] is not _HALF:
                    queue_id = ENTRY_QUEUE_ID(entry)
                else:
                    queue_id = _real_queue_id(entry)
                    self._ctl.transaction_service.bridge.remember_half(entry, phys, qoff)
                if wait and self._sync_flush:
                    waiting.append((i, request, phys, qoff, queue_id, uniq))
                    target = max(target, phys + size)
                else:
                    results[i] = ok(request, phys, qoff, queue_id, uniq, 0)
                if entry[0] == TIMER_TOPIC:
                    timers.append((i, entry, uniq))
            else:
                results[i] = self._failed_response(request, r)  # type: ignore[arg-type]
        if waiting:
            loop = asyncio.get_running_loop()
            futures = [loop.create_future() for _ in waiting]
            for item, fut in zip(waiting, futures, strict=True):
                results[item[0]] = fut
            # One group-commit (and slave-ack) waiter answers the whole run.
            self._store.stored_future(target).add_done_callback(
                partial(self._answer_when_flushed, waiting, futures))
        for i, entry, uniq in timers:
            results[i] = self._with_recall_handle(results[i], entry, uniq)

    def _with_recall_handle(self, answer: _Result, entry: SingleEntry, uniq: str) -> _Result:
        """A timer message's answer with its recall handle (5.x's attachRecallHandle)."""
        handle = recall_handle_for(entry[4], uniq, self._ctl.broker_config.broker_name)
        if handle is None:
            return answer
        qid = real_queue_id(entry[4])
        if isinstance(answer, asyncio.Future):
            async def later(fut: asyncio.Future[RemotingCommand]) -> RemotingCommand:
                return add_recall_handle(await fut, handle, qid)

            return later(answer)
        if isinstance(answer, BaseException) or answer is None or not hasattr(answer, "ext_json"):
            return answer
        return add_recall_handle(answer, handle, qid)  # type: ignore[arg-type]

    def _answer_when_flushed(self, waiting: list[_Stored], futures: list[asyncio.Future[RemotingCommand]],
                             flushed: asyncio.Future[PutMessageStatus]) -> None:
        if flushed.cancelled():  # the store is shutting down: no answers, as for a cancelled task
            for fut in futures:
                fut.cancel()
            return
        code = _STORED_CODES[flushed.result()]
        ok = self._ok_response
        for (_, request, phys, qoff, queue_id, uniq), fut in zip(waiting, futures, strict=True):
            if not fut.done():
                fut.set_result(ok(request, phys, qoff, queue_id, uniq, code))

    def _ok_response(self, request: RemotingCommand, phys: int, qoff: int, queue_id: int, uniq: str,
                     code: int) -> RemotingCommand:
        """The answer to a stored one-message send (code 0, or FLUSH_DISK_TIMEOUT): the extFields
        `_response` would send, formatted straight to JSON (one per message on the hot path)."""
        if uniq.isalnum():  # nothing to escape: the common case, a hex UNIQ_KEY
            ext = _OK_EXT % (self._msg_id_json, phys, queue_id, qoff, self._ext_tail, uniq.encode())
            return request.make_response(code, ext_json=ext)
        return request.make_response(code, None, {
            "msgId": f"{self._msg_id_prefix}{phys:016X}",
            "queueId": str(queue_id),
            "queueOffset": str(qoff),
            "MSG_REGION": self._region,
            "TRACE_ON": self._trace_on,
            "transactionId": uniq,
        })

    def _failed_response(self, request: RemotingCommand, status: PutMessageStatus) -> RemotingCommand:
        code, remark = _FAILED.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        self._stats.on_put_failed()
        disk = self._store.disk_util() if status is PutMessageStatus.SERVICE_NOT_AVAILABLE else ""
        return request.make_response(code, remark.format(max=self._max_size, disk=disk),
                                     {"MSG_REGION": self._region, "TRACE_ON": self._trace_on})

    def _response(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                  uniq: str | None, msg_id: str | None = None) -> RemotingCommand:
        status = result.status
        code = _STORED_CODES.get(status)
        if code is not None:
            self._stats.put_total += result.msg_num
            ext = {
                "msgId": f"{result.msg_id_prefix}{result.wrote_offset:016X}" if msg_id is None else msg_id,
                "queueId": str(queue_id),
                "queueOffset": str(result.logical_offset),
                "MSG_REGION": self._region,
                "TRACE_ON": self._trace_on,
            }
            if uniq:
                ext["transactionId"] = uniq
            return request.make_response(code, None, ext)
        return self._failed_response(request, status)

    def _delay(self, topic: str, queue_id: int, props: str, delay: str) -> tuple[str, int, str, int]:
        """Stage a DELAY=<level> message in SCHEDULE_TOPIC_XXXX (PROTOCOL.md §4.2)."""
        try:
            level = int(delay)
        except ValueError:
            raise MessageIllegal(f"the DELAY property is not a delay level: {delay!r}") from None
        if level <= 0:
            return topic, queue_id, props, tags_code(get_property(props, P_TAGS))
        schedule = self._ctl.schedule_service
        if schedule is None:
            raise MessageIllegal("delayed messages (DELAY) are not supported by this broker")
        level = min(level, schedule.max_delay_level)
        props = append_properties(props, ("REAL_TOPIC", topic), ("REAL_QID", str(queue_id)))
        deliver_at = int(time.time() * 1000) + schedule.delay_ms(level)
        return RMQ_SYS_SCHEDULE_TOPIC, level - 1, props, deliver_at

    # -- batch -------------------------------------------------------------------------------------------

    def _send_batch(self, request: RemotingCommand, channel: Any,
                    h: SendMessageRequestHeader) -> RemotingCommand | Awaitable[RemotingCommand]:
        cfg = self._topic_config(h, channel)
        queue_id = self._queue_id(cfg, h.queue_id, channel)
        topic = h.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MessageIllegal(f"batch request does not support retry group {topic}")
        sys_flag = h.sys_flag
        if sys_flag & _TRAN_MASK:  # CommitLog.asyncPutMessages: a batch cannot be transactional
            return self._failed_response(request, PutMessageStatus.MESSAGE_ILLEGAL)
        if cfg.topic_filter_type is _MULTI_TAG_TYPE:
            sys_flag |= _MULTI_TAGS
        props = h.properties or ""
        delay = get_property(props, P_DELAY)
        if delay is not None and delay not in ("0", "-1"):
            raise MessageIllegal("batch messages cannot carry a delay level (DELAY)")
        suffix = self._batch_suffixes.get(props)
        if suffix is None:
            suffix = batch_properties_suffix(props, self._cluster)
            if len(self._batch_suffixes) < 64:  # a client sends one or two header texts
                self._batch_suffixes[props] = suffix
        flags, bodies, tails, tcodes, keys = decode_batch_body(request.body, self._max_size, self._tags_codes,
                                                               self._uniq, suffix)
        wait = get_property(props, P_WAIT)
        batch = EncodedBatch(topic, queue_id, flags, bodies, tails, tcodes, keys, sys_flag, h.born_timestamp,
                             _parse_born_host(channel), h.reconsume_times or 0,
                             wait is None or wait.lower() == "true")
        uniq = get_property(props, P_UNIQ) or keys[0][0]
        result = self._store.append_messages(batch)
        if not self._sync_flush or not batch.wait_store_msg_ok or not result.ok:
            return self._batch_response(request, result, queue_id, uniq)
        return self._await_batch(result, request, queue_id, uniq)

    def _await_batch(self, stored: PutMessageResult, request: RemotingCommand,
                     queue_id: int, uniq: str) -> asyncio.Future[RemotingCommand]:
        """The answer once the batch (appended already, in arrival order) is durable."""
        answer: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

        def flushed(done: asyncio.Future[PutMessageStatus]) -> None:
            if done.cancelled():
                answer.cancel()
            elif not answer.done():
                status = done.result()
                result = stored if status is _PUT_OK else dataclasses.replace(stored, status=status)
                answer.set_result(self._batch_response(request, result, queue_id, uniq))

        self._store.stored_future(stored.wrote_offset + stored.wrote_bytes).add_done_callback(flushed)
        return answer

    def _batch_response(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                        uniq: str) -> RemotingCommand:
        ids = joined_msg_ids(result) if result.ok else ""
        return self._response(request, result, queue_id, uniq, ids)

    # -- CONSUMER_SEND_MSG_BACK ----------------------------------------------------------------------

    def consumer_send_msg_back(self, request: RemotingCommand, channel: Any) -> Awaitable[RemotingCommand]:
        """A message the consumer failed to process goes to %RETRY%<group> (delayed) or %DLQ%<group>."""
        h = ConsumerSendMsgBackRequestHeader.from_ext(request.ext_fields)
        return self._send_back(request, channel, h)

    async def _send_back(self, request: RemotingCommand, channel: Any,
                         h: ConsumerSendMsgBackRequestHeader) -> RemotingCommand:
        ctl = self._ctl
        changes = self._tm.changes
        sgc = ctl.subscription_manager.find_subscription_group_config(h.group)
        if sgc is None:
            raise SubscriptionGroupNotExist(f"subscription group not exist, {h.group}")
        if not ctl.broker_config.broker_permission & PERM_WRITE:
            raise NoPermission(f"the broker[{ctl.broker_config.broker_ip1}] sending message is forbidden")
        if sgc.retry_queue_nums <= 0:
            return request.make_response(ResponseCode.SUCCESS)
        if h.offset < 0:
            raise InvalidParameter(f"the commit log offset {h.offset} is negative")
        raw = ctl.store.look_message_by_offset(h.offset)
        if raw is None:
            raise SystemError_(f"look message by offset failed, {h.offset}")
        try:
            msg, _ = decode_message(raw)
        except ProtocolError as exc:
            raise SystemError_(f"look message by offset failed, {h.offset}: {exc}") from None
        props = dict(msg.properties)
        retry_topic = props.get("RETRY_TOPIC") or msg.topic
        props["RETRY_TOPIC"] = retry_topic
        max_times = sgc.retry_max_times
        if h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        delay_level = h.delay_level
        if msg.reconsume_times >= max_times or delay_level < 0:
            topic = DLQ_GROUP_TOPIC_PREFIX + h.group
            cfg = ctl.topic_manager.create_topic_in_send_message_back_method(
                topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
            queue_id = 0
            delay_level = 0
        else:
            topic = RETRY_GROUP_TOPIC_PREFIX + h.group
            cfg = ctl.topic_manager.create_topic_in_send_message_back_method(
                topic, sgc.retry_queue_nums, PERM_WRITE | PERM_READ, 0)
            queue_id = self._rand.randrange(max(1, cfg.write_queue_nums))
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
        if not cfg.perm & PERM_WRITE:
            raise NoPermission(f"the topic[{topic}] sending message is forbidden")
        props.pop("DELAY", None)
        props.pop("REAL_TOPIC", None)
        props.pop("REAL_QID", None)
        props.setdefault("ORIGIN_MESSAGE_ID", msg.offset_msg_id)
        uniq = props.get("UNIQ_KEY") or self._uniq()
        props["UNIQ_KEY"] = uniq
        props["CLUSTER"] = self._cluster
        text = encode_properties(props)
        tcode = tags_code(props.get("TAGS"))
        if delay_level > 0:
            text = append_properties(text, ("DELAY", str(delay_level)))
            topic, queue_id, text, tcode = self._delay(topic, queue_id, text, str(delay_level))
        put = MessageToStore(
            topic, queue_id, msg.body, msg.flag, text, tcode, index_keys(uniq, props.get("KEYS")),
            msg.sys_flag, msg.born_timestamp, msg.born_host, msg.reconsume_times + 1, 0, 0, True,
        )
        result = await ctl.store.put_message(put)
        if result.ok:
            self._stats.on_put(result.msg_num)
            answer = request.make_response(ResponseCode.SUCCESS)
            return answer if self._tm.changes == changes else await self._after_persist(answer)
        return request.make_response(ResponseCode.SYSTEM_ERROR, result.status.name)
