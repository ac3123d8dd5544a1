"""The pull-style RPCs of newer v2 clients (PullMessage, UpdateOffset, GetOffset, QueryOffset),
ForwardMessageToDeadLetterQueue and RecallMessage: read from the store and the consumer offset
table the remoting pull path uses; the DLQ forward is CONSUMER_SEND_MSG_BACK with delay level -1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from rocketq.broker.grpc import convert
from rocketq.broker.processors.timer import TimerProcessor
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import ConsumerSendMsgBackRequestHeader
from rocketq.codec.headers.timer import RecallMessageRequestHeader
from rocketq.codec.message import decode_messages
from rocketq.codec.pop import parse_extra_info

PULL_RECHECK_S = 0.2  # a long-polling pull looks at the queue again this often
MAX_PULL_BATCH = 32


def _tags(expression: str) -> frozenset[str] | None:
    """The tags a TAG expression selects; None for every message."""
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return None if not tags or "*" in tags else tags


class OffsetRpcs:
    _ctl: Any
    d: Any
    s: Any
    client: Any
    status: Any
    error: Any
    topic: Any
    _batch_ack: Any
    _pop: Any

    def _queue(self, c: Any, mq: Any) -> tuple[str, int]:
        return self.topic(c, mq.topic), mq.id

    async def GetOffset(self, request: Any, context: Any) -> Any:  # noqa: N802 - the RPC's name
        c = self.client(context)
        topic, qid = self._queue(c, request.message_queue)
        offset = self._ctl.offset_manager.query_offset(self.topic(c, request.group), topic, qid)
        if offset < 0:
            return self.s.GetOffsetResponse(status=self.status("OFFSET_NOT_FOUND"))
        return self.s.GetOffsetResponse(status=self.status("OK"), offset=offset)

    async def UpdateOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        c = self.client(context)
        topic, qid = self._queue(c, request.message_queue)
        if request.offset < 0:
            return self.s.UpdateOffsetResponse(status=self.status("ILLEGAL_OFFSET"))
        self._ctl.offset_manager.commit_offset(c.remote_address, self.topic(c, request.group), topic, qid,
                                               request.offset)
        return self.s.UpdateOffsetResponse(status=self.status("OK"))

    async def QueryOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        c = self.client(context)
        topic, qid = self._queue(c, request.message_queue)
        store = self._ctl.store
        policy = request.query_offset_policy
        if policy == self.d.BEGINNING:
            offset = store.get_min_offset_in_queue(topic, qid)
        elif policy == self.d.END:
            offset = store.get_max_offset_in_queue(topic, qid)
        else:
            now = int(time.time() * 1000)
            when = convert.millis(request.timestamp) if request.HasField("timestamp") else now
            offset = store.get_offset_in_queue_by_time(topic, qid, when)
        return self.s.QueryOffsetResponse(status=self.status("OK"), offset=offset)

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        c = self.client(context)
        s = self.s
        mq = request.message_queue
        topic, qid = self._queue(c, mq)
        if self._ctl.topic_manager.select_topic_config(topic) is None:
            yield s.PullMessageResponse(status=self.status("TOPIC_NOT_FOUND"))
            return
        wanted = _tags(request.filter_expression.expression)
        wait = request.long_polling_timeout.ToMilliseconds() / 1000 if request.HasField(
            "long_polling_timeout") else 0.0
        deadline = asyncio.get_running_loop().time() + wait
        offset = request.offset
        while True:
            batch = min(MAX_PULL_BATCH, max(1, request.batch_size))
            r = self._ctl.store.get_message(topic, qid, offset, batch)
            msgs = decode_messages(b"".join(r.buffers)) if r.found else []
            if r.next_begin_offset > offset and not msgs:
                offset = r.next_begin_offset  # an offset out of range moves to the queue's edge
            if msgs or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(PULL_RECHECK_S)
        if wanted is not None:
            msgs = [m for m in msgs if m.properties.get("TAGS") in wanted]
        yield s.PullMessageResponse(status=self.status("OK" if msgs else "MESSAGE_NOT_FOUND"))
        for m in msgs:
            yield s.PullMessageResponse(message=convert.to_v2(self.d, m, mq.topic.name,
                                                              mq.topic.resource_namespace))
        yield s.PullMessageResponse(next_offset=max(r.next_begin_offset, offset))

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        c = self.client(context)
        s = self.s
        group = self.topic(c, request.group)
        topic = self.topic(c, request.topic)
        try:
            info = parse_extra_info(request.receipt_handle)
        except ValueError as exc:
            bad = self.status("INVALID_RECEIPT_HANDLE", str(exc))
            return s.ForwardMessageToDeadLetterQueueResponse(status=bad)
        real = info.real_topic(topic, group)
        offset = info.queue_offset if info.queue_offset is not None else info.ck_offset
        r = self._ctl.store.get_message(real, info.queue_id, offset, 1)
        msgs = decode_messages(b"".join(r.buffers)) if r.found else []
        if not msgs or msgs[0].queue_offset != offset:
            return s.ForwardMessageToDeadLetterQueueResponse(status=self.status("MESSAGE_NOT_FOUND"))
        h = ConsumerSendMsgBackRequestHeader(offset=msgs[0].commit_log_offset, group=group, delay_level=-1,
                                             origin_msg_id=request.message_id, origin_topic=topic)
        cmd = RemotingCommand(int(RequestCode.CONSUMER_SEND_MSG_BACK), ext_fields=h.to_ext())
        processors = self._ctl.processors
        try:
            resp = await processors.send.consumer_send_msg_back(cmd, c)
        except Exception as exc:
            return s.ForwardMessageToDeadLetterQueueResponse(status=self.error(exc))
        if resp.code != ResponseCode.SUCCESS:
            return s.ForwardMessageToDeadLetterQueueResponse(
                status=self.status(convert.code_name(resp.code), resp.remark or ""))
        return s.ForwardMessageToDeadLetterQueueResponse(
            status=await self._batch_ack(group, topic, [request.receipt_handle]))

    async def RecallMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        # The remoting RECALL_MESSAGE processor decides (handle, topic, broker, time, recallMessageEnable).
        c = self.client(context)
        h = RecallMessageRequestHeader(topic=self.topic(c, request.topic),
                                       recall_handle=request.recall_handle)
        cmd = RemotingCommand(int(RequestCode.RECALL_MESSAGE), ext_fields=h.to_ext())
        try:
            resp = await TimerProcessor(self._ctl).recall_message(cmd, c)
        except Exception as exc:
            return self.s.RecallMessageResponse(status=self.error(exc))
        if resp.code != ResponseCode.SUCCESS:
            return self.s.RecallMessageResponse(
                status=self.status(convert.code_name(resp.code), resp.remark or ""))
        msg_id = (resp.ext_fields or {}).get("msgId", "")
        return self.s.RecallMessageResponse(status=self.status("OK"), message_id=msg_id)
