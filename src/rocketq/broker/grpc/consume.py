"""The consumer side of MessagingService: ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue and QueryAssignment, served by the broker's pop processors (the
receipt handle a v2 client acks is the pop handle, RocketMQ's extraInfo)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from rocketq.broker.client_manager import ClientChannelInfo
from rocketq.broker.grpc import convert
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from rocketq.codec.message import decode_messages
from rocketq.codec.pop import (
    batch_acks,
    build_extra_info,
    encode_batch_ack_body,
    parse_extra_info,
    receipt_handles,
)

CONSUME_POP = "CONSUME_POP"  # RocketMQ 5's ConsumeType: the broker hands out, the client acks
DEFAULT_INVISIBLE_MS = 30_000
DEFAULT_POLL_MS = 20_000
MAX_BATCH = 32  # a pop hands out at most 32 messages
_INIT_MODE_MIN = 0  # a new group starts at the queue's first message, like Apache's proxy


class _Answer:
    """The channel a pop processor answers a parked pop on: resolves one future."""

    def __init__(self, remote_address: str) -> None:
        self.remote_address = remote_address
        self.attrs: dict[str, Any] = {}
        self.future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self.is_active = True

    def send(self, response: RemotingCommand) -> None:
        if not self.future.done():
            self.future.set_result(response)


async def answered(answer: Any, channel: _Answer | None, wait: float) -> RemotingCommand | None:
    """A processor's answer: a response, an awaitable of one, or None when parked (then what the
    channel receives, or None after `wait` seconds)."""
    if isinstance(answer, RemotingCommand):
        return answer
    if answer is not None:
        return await answer  # type: ignore[no-any-return]
    if channel is None:
        return None
    try:
        return await asyncio.wait_for(asyncio.shield(channel.future), wait)
    except TimeoutError:
        return None


class ConsumeRpcs:
    _ctl: Any
    d: Any
    s: Any
    client: Any
    status: Any
    error: Any
    topic: Any

    def register_consumer(self, c: Any, group: str, client_type: int) -> None:
        """A v2 consumer in the consumer manager: admin's connections list it with the group."""
        info = ClientChannelInfo(c, c.client_id, c.language or "GRPC", 0)
        self._ctl.consumer_manager.register_consumer(group, info, CONSUME_POP, "CLUSTERING",
                                                     "CONSUME_FROM_LAST_OFFSET", None, False)

    def _pop(self) -> Any:
        processors = self._ctl.processors
        if processors is None or processors.pop is None:
            raise RuntimeError("this broker serves no pop (a slave)")
        return processors.pop

    # -- QueryAssignment ---------------------------------------------------------------------------

    async def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802 - the RPC's name
        """One assignment per broker group with a readable queue (queue id -1, every queue of it):
        pop spreads a broker's queues among the consumers, and the client receives from each."""
        route = await self.QueryRoute(self.s.QueryRouteRequest(topic=request.topic), context)  # type: ignore[attr-defined]
        if route.status.code != self.d.OK:
            return self.s.QueryAssignmentResponse(status=route.status)
        assignments: dict[str, Any] = {}
        for q in route.message_queues:
            if q.permission in (self.d.READ, self.d.READ_WRITE) and q.broker.name not in assignments:
                mq = self.d.MessageQueue()
                mq.CopyFrom(q)
                mq.id = -1
                assignments[q.broker.name] = self.d.Assignment(message_queue=mq)
        if not assignments:
            return self.s.QueryAssignmentResponse(status=self.status("FORBIDDEN", "no readable queue"))
        return self.s.QueryAssignmentResponse(status=self.status("OK"),
                                              assignments=list(assignments.values()))

    # -- ReceiveMessage -------------------------------------------------------------------------------

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        c = self.client(context)
        s = self.s
        group = self.topic(c, request.group)
        topic = self.topic(c, request.message_queue.topic)
        invisible = (request.invisible_duration.ToMilliseconds() if request.HasField("invisible_duration")
                     else DEFAULT_INVISIBLE_MS)
        poll = (request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout")
                else DEFAULT_POLL_MS)
        if invisible <= 0:
            yield s.ReceiveMessageResponse(status=self.status("ILLEGAL_INVISIBLE_TIME"))
            return
        fe = request.filter_expression
        exp_type = "SQL92" if fe.type == self.d.SQL else "TAG"
        fifo = bool(c.settings is not None and c.settings.subscription.fifo)
        h = PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=-1,
            max_msg_nums=min(MAX_BATCH, max(1, request.batch_size)), invisible_time=invisible,
            poll_time=poll, born_time=int(time.time() * 1000), init_mode=_INIT_MODE_MIN,
            exp_type=exp_type, exp=fe.expression or "*", order=fifo,
            attempt_id=request.attempt_id if request.HasField("attempt_id") else None)
        cmd = RemotingCommand(int(RequestCode.POP_MESSAGE), ext_fields=h.to_ext())
        channel = _Answer(c.remote_address)
        try:
            self._ctl.subscription_manager.find_subscription_group_config(group)  # auto-creates
            resp = await answered(self._pop().pop(cmd, channel), channel, poll / 1000 + 5)
        except Exception as exc:
            yield s.ReceiveMessageResponse(status=self.error(exc))
            return
        if resp is None or resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            yield s.ReceiveMessageResponse(status=self.status("MESSAGE_NOT_FOUND", "no new message"))
            return
        if resp.code != ResponseCode.SUCCESS:
            refused = self.status(convert.code_name(resp.code), resp.remark or "")
            yield s.ReceiveMessageResponse(status=refused)
            return
        ext = resp.ext_fields or {}
        body = resp.body
        msgs = decode_messages(body if isinstance(body, bytes | bytearray | memoryview) else b"".join(body))
        pop_time = int(ext["popTime"])
        handles = receipt_handles(msgs, ext, pop_time, invisible, int(ext["reviveQid"]),
                                  self._ctl.broker_name, topic)
        yield s.ReceiveMessageResponse(status=self.status("OK"))
        d = self.d
        name = request.message_queue.topic.name
        ns = request.message_queue.topic.resource_namespace
        response = s.ReceiveMessageResponse
        for m, handle in zip(msgs, handles, strict=True):
            yield response(message=convert.v2_fields(d, m, name, ns, handle, invisible, digest=True))
        delivery = s.ReceiveMessageResponse()
        delivery.delivery_timestamp.FromMilliseconds(pop_time)
        yield delivery

    # -- AckMessage, ChangeInvisibleDuration ----------------------------------------------------------

    async def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        """The request's receipt handles in one BATCH_ACK_MESSAGE (one ack record per checkpoint);
        a handle that is not one is refused on its own."""
        c = self.client(context)
        group = self.topic(c, request.group)
        topic = self.topic(c, request.topic)
        statuses: list[Any] = []
        good: list[str] = []
        for e in request.entries:
            try:
                parse_extra_info(e.receipt_handle)
            except ValueError as exc:
                statuses.append(self.status("INVALID_RECEIPT_HANDLE", str(exc)))
                continue
            statuses.append(None)
            good.append(e.receipt_handle)
        if good:
            done = await self._batch_ack(group, topic, good)
            statuses = [done if st is None else st for st in statuses]
        result = self.s.AckMessageResultEntry
        entries = [result(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
                   for e, st in zip(request.entries, statuses, strict=True)]
        bad = [st for st in statuses if st.code != self.d.OK]
        status = self.status("OK") if not bad else bad[0] if len(bad) == len(entries) else self.status(
            "MULTIPLE_RESULTS")
        return self.s.AckMessageResponse(status=status, entries=entries)

    async def _batch_ack(self, group: str, topic: str, handles: list[str]) -> Any:
        try:
            body = encode_batch_ack_body(self._ctl.broker_name, batch_acks(group, topic, handles))
            cmd = RemotingCommand(int(RequestCode.BATCH_ACK_MESSAGE), body=body)
            resp = await answered(self._pop().batch_ack(cmd, None), None, 0)
        except Exception as exc:
            return self.error(exc)
        if resp is None:
            return self.status("INTERNAL_ERROR", "the ack had no answer")
        if resp.code != ResponseCode.SUCCESS:
            return self.status(convert.code_name(resp.code), resp.remark or "")
        return self.status("OK")

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:  # noqa: N802
        c = self.client(context)
        s = self.s
        handle = request.receipt_handle
        try:
            info = parse_extra_info(handle)
        except ValueError as exc:
            return s.ChangeInvisibleDurationResponse(status=self.status("INVALID_RECEIPT_HANDLE", str(exc)))
        invisible = request.invisible_duration.ToMilliseconds()
        group = self.topic(c, request.group)
        real = info.real_topic(self.topic(c, request.topic), group)
        offset = info.queue_offset if info.queue_offset is not None else info.ck_offset
        h = ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=real, queue_id=info.queue_id,
            extra_info=handle, offset=offset, invisible_time=invisible)
        cmd = RemotingCommand(int(RequestCode.CHANGE_MESSAGE_INVISIBLETIME), ext_fields=h.to_ext())
        try:
            resp = await answered(self._pop().change_invisible_time(cmd, None), None, 0)
        except Exception as exc:
            return s.ChangeInvisibleDurationResponse(status=self.error(exc))
        if resp is None or resp.code != ResponseCode.SUCCESS:
            code = resp.code if resp is not None else ResponseCode.SYSTEM_ERROR
            return s.ChangeInvisibleDurationResponse(status=self.status(convert.code_name(code)))
        ext = resp.ext_fields or {}
        # the new handle names the checkpoint the change wrote (it starts at the message)
        new = build_extra_info(offset, int(ext["popTime"]), int(ext["invisibleTime"]), int(ext["reviveQid"]),
                               real, info.broker_name, info.queue_id, offset)
        return s.ChangeInvisibleDurationResponse(status=self.status("OK"), receipt_handle=new)
