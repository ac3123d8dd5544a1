"""The pop family's request handlers: header in, `PopService` call, response out (RocketMQ's
PopMessageProcessor, AckMessageProcessor, ChangeInvisibleTimeProcessor, PeekMessageProcessor,
NotificationProcessor and PollingInfoProcessor, their checks and answers)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from rocketq.broker.filter import build_subscription, is_tag_type, not_supported
from rocketq.broker.message_filter import record_filter_for
from rocketq.broker.pop.polling import PopWaiter
from rocketq.broker.pop.service import PopRequest, PopResult, PopService
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from rocketq.codec.pop import ExtraInfo, decode_batch_ack_body, parse_extra_info
from rocketq.errors import SubscriptionParseFailed
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.pop")

PERM_READ = 4
MAX_POP_NUMS = 32
TIMEOUT_TOO_MUCH_MS = 500  # PopMessageRequestHeader.isTimeoutTooMuch


class PopProcessors:
    def __init__(self, controller: BrokerController, service: PopService) -> None:
        self._ctl = controller
        self.service = service

    # -- shared checks -------------------------------------------------------------------------------

    def _check_serving(self, request: RemotingCommand) -> RemotingCommand | None:
        """Pop writes checkpoints and acks: only a master does (a broker in controller mode is
        built with pop and serves it while the controllers have it master)."""
        if self.service.serving:
            return None
        return request.make_response(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            f"the broker[{self._ctl.broker_config.broker_ip1}] is not a master: pop is served by the master",
        )

    def _check_read(
        self,
        request: RemotingCommand,
        topic: str,
        queue_id: int,
        what: str,
        bad_queue_code: int = ResponseCode.SYSTEM_ERROR,
    ) -> RemotingCommand | None:
        ctl = self._ctl
        bc = ctl.broker_config
        if not bc.broker_permission & PERM_READ:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{bc.broker_ip1}] {what} message is forbidden"
            )
        cfg = ctl.topic_manager.select_topic_config(topic)
        if cfg is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not cfg.perm & PERM_READ:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden"
            )
        if queue_id >= cfg.read_queue_nums or queue_id < -1:
            return request.make_response(
                bad_queue_code,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{cfg.read_queue_nums}]",
            )
        return None

    def _check_group(self, request: RemotingCommand, group: str) -> RemotingCommand | None:
        sgc = self._ctl.subscription_manager.find_subscription_group_config(group)
        if sgc is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not sgc.consume_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        return None

    def _check_offset(
        self, request: RemotingCommand, topic: str, queue_id: int, offset: int
    ) -> RemotingCommand | None:
        cfg = self._ctl.topic_manager.select_topic_config(topic)
        if cfg is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if queue_id < 0 or queue_id >= cfg.read_queue_nums:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:["
                f"{topic}] topicConfig.readQueueNums:[{cfg.read_queue_nums}]",
            )
        store = self._ctl.store
        lo = store.get_min_offset_in_queue(topic, queue_id)
        hi = store.get_max_offset_in_queue(topic, queue_id)
        if offset < lo or offset > hi:
            return request.make_response(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{lo}~{hi}",
            )
        return None

    def _flushed(self, response: RemotingCommand, target: int) -> Any:
        """`response`, after the bytes up to `target` are durable under SYNC_FLUSH."""
        if target <= 0 or not self._ctl.store_config.sync_flush:
            return response
        return self._after_flush(response, target)

    async def _after_flush(self, response: RemotingCommand, target: int) -> RemotingCommand:
        await self._ctl.store.flush_future(target)
        return response

    # -- POP_MESSAGE ---------------------------------------------------------------------------------

    def pop(self, request: RemotingCommand, channel: Any) -> Any:
        return self._check_serving(request) or self._pop(request, channel, True)

    def _pop(
        self, request: RemotingCommand, channel: Any, allow_suspend: bool, poll_ms: int | None = None
    ) -> Any:
        """`poll_ms` is set when a parked pop is re-run: what is left of its pollTime."""
        h = PopMessageRequestHeader.from_ext(request.ext_fields)
        now = int(time.time() * 1000)
        poll_time = h.poll_time if poll_ms is None else poll_ms
        if poll_ms is None and h.born_time > 0 and now - h.born_time - h.poll_time > TIMEOUT_TOO_MUCH_MS:
            return request.make_response(
                ResponseCode.POLLING_TIMEOUT,
                f"the broker[{self._ctl.broker_config.broker_ip1}] pop message is timeout too much",
            )
        if h.max_msg_nums > MAX_POP_NUMS:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"the broker[{self._ctl.broker_config.broker_ip1}] pop message's num is greater than 32",
            )
        bad = self._check_read(request, h.topic, h.queue_id, "pop") or self._check_group(
            request, h.consumer_group
        )
        if bad is not None:
            return bad
        subscription = None
        if h.exp:
            if not is_tag_type(h.exp_type) and not self._ctl.broker_config.enable_property_filter:
                return request.make_response(ResponseCode.SYSTEM_ERROR, not_supported(h.exp_type))
            try:
                subscription = build_subscription(h.topic, h.exp, h.exp_type)
            except SubscriptionParseFailed:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
                )
        req = PopRequest(
            h.consumer_group,
            h.topic,
            h.queue_id,
            max(1, h.max_msg_nums),
            h.invisible_time,
            h.init_mode,
            subscription,
            record_filter_for(self._ctl, h.consumer_group, h.topic, subscription),
            h.order,
            h.attempt_id,
            channel_address(channel),
        )
        result = self.service.pop(req)
        if result.count:
            if result.rest_num > 0:
                # more is waiting: let another parked pop of the topic take it
                self.service.wake(h.topic, h.queue_id, h.consumer_group)
            return self._flushed(self._answer(request, result), result.flush_target)
        if allow_suspend and poll_time > 0:
            key = (h.topic, h.consumer_group, h.queue_id)
            if self.service.polling.park(key, request, channel, poll_time, self._rerun_pop):
                return None
            return self._answer(request, result, ResponseCode.POLLING_FULL)
        return self._answer(request, result, ResponseCode.POLLING_TIMEOUT)

    def _answer(
        self, request: RemotingCommand, result: PopResult, code: int = ResponseCode.SUCCESS
    ) -> RemotingCommand:
        if code == ResponseCode.SUCCESS:
            return request.make_response(code, "FOUND", result.ext_fields(), result.buffers)
        return request.make_response(code, "NO_MESSAGE_IN_QUEUE", result.ext_fields())

    def _rerun_pop(self, w: PopWaiter, timed_out: bool) -> None:
        """A parked pop: re-run once woken (parking again if it still finds nothing and has time)."""
        refused = self._check_serving(w.request)  # woken by a demotion: pop is the master's now
        if refused is not None:
            self._send(w.channel, refused)
            return
        remaining = 0 if timed_out else int((w.deadline - asyncio.get_running_loop().time()) * 1000)
        self._send(w.channel, self._pop(w.request, w.channel, remaining > 0, max(0, remaining)))

    def _send(self, channel: Any, answer: Any) -> None:
        if answer is None:
            return
        if not isinstance(answer, RemotingCommand):
            task = asyncio.ensure_future(answer)
            task.add_done_callback(
                lambda t: None if t.cancelled() or t.exception() else channel.send(t.result())
            )
            return
        try:
            channel.send(answer)
        except Exception:
            log.warning("pop answer to %s failed", channel_address(channel), exc_info=True)

    # -- ACK_MESSAGE / BATCH_ACK_MESSAGE ----------------------------------------------------------

    def _handle(
        self,
        request: RemotingCommand,
        h: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader,
    ) -> ExtraInfo | RemotingCommand:
        """The parsed receipt handle of an ACK / CHANGE_INVISIBLETIME, or the answer refusing it."""
        bad = self._check_offset(request, h.topic, h.queue_id, h.offset)
        if bad is not None:
            return bad
        try:
            return parse_extra_info(h.extra_info)
        except ValueError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, str(exc))

    def ack(self, request: RemotingCommand, channel: Any) -> Any:
        if refused := self._check_serving(request):
            return refused
        h = AckMessageRequestHeader.from_ext(request.ext_fields)
        info = self._handle(request, h)
        if isinstance(info, RemotingCommand):
            return info
        target = self.service.ack(h.consumer_group, h.topic, h.queue_id, info, h.offset)
        return self._flushed(request.make_response(ResponseCode.SUCCESS), target)

    def batch_ack(self, request: RemotingCommand, channel: Any) -> Any:
        if refused := self._check_serving(request):
            return refused
        # Java answers NO_MESSAGE bare here; the remark says why (every refusal of ours carries one).
        if not request.body:
            return request.make_response(ResponseCode.NO_MESSAGE, "the batch ack has no body")
        try:
            broker_name, acks = decode_batch_ack_body(request.body)
        except ValueError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        if not acks:
            return request.make_response(ResponseCode.NO_MESSAGE, "the batch ack body has no acks")
        target = self.service.batch_ack(broker_name or self._ctl.broker_name, acks)
        return self._flushed(request.make_response(ResponseCode.SUCCESS), target)

    # -- CHANGE_MESSAGE_INVISIBLETIME -----------------------------------------------------------------

    def change_invisible_time(self, request: RemotingCommand, channel: Any) -> Any:
        if refused := self._check_serving(request):
            return refused
        h = ChangeInvisibleTimeRequestHeader.from_ext(request.ext_fields)
        info = self._handle(request, h)
        if isinstance(info, RemotingCommand):
            return info
        pop_time, invisible, revive_qid, target = self.service.change_invisible_time(
            h.consumer_group, h.topic, h.queue_id, info, h.offset, h.invisible_time
        )
        if target < 0:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "the checkpoint could not be written")
        ext = {"popTime": str(pop_time), "invisibleTime": str(invisible), "reviveQid": str(revive_qid)}
        return self._flushed(request.make_response(ResponseCode.SUCCESS, None, ext), target)

    # -- PEEK_MESSAGE, NOTIFICATION, POLLING_INFO -----------------------------------------------------

    def peek(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = PeekMessageRequestHeader.from_ext(request.ext_fields)
        bad = self._check_read(request, h.topic, h.queue_id, "peek") or self._check_group(
            request, h.consumer_group
        )
        if bad is not None:
            return bad
        buffers, count = self.service.peek(h.consumer_group, h.topic, h.queue_id, max(1, h.max_msg_nums))
        ext = {
            "popTime": str(int(time.time() * 1000)),
            "invisibleTime": "0",
            "reviveQid": "0",
            "restNum": "0",
        }
        if count:
            return request.make_response(ResponseCode.SUCCESS, "FOUND", ext, buffers)
        return request.make_response(ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", ext)

    def notification(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        return self._notification(request, channel, True)

    def _notification(
        self, request: RemotingCommand, channel: Any, allow_suspend: bool
    ) -> RemotingCommand | None:
        h = NotificationRequestHeader.from_ext(request.ext_fields)
        bad = self._check_read(request, h.topic, h.queue_id, "notification") or self._check_group(
            request, h.consumer_group
        )
        if bad is not None:
            return bad
        has = self.service.has_message(h.consumer_group, h.topic, h.queue_id, h.order, h.attempt_id)
        if not has and allow_suspend and h.poll_time > 0:
            key = (h.topic, h.consumer_group, h.queue_id)
            if self.service.polling.park(key, request, channel, h.poll_time, self._rerun_notification):
                return None
            return request.make_response(ResponseCode.POLLING_FULL, "polling full")
        return request.make_response(ResponseCode.SUCCESS, None, {"hasMsg": "true" if has else "false"})

    def _rerun_notification(self, w: PopWaiter, timed_out: bool) -> None:
        self._send(w.channel, self._notification(w.request, w.channel, False))

    def polling_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = PollingInfoRequestHeader.from_ext(request.ext_fields)
        bad = self._check_read(request, h.topic, h.queue_id, "polling info") or self._check_group(
            request, h.consumer_group
        )
        if bad is not None:
            return bad
        n = self.service.polling.polling_num_of((h.topic, h.consumer_group, h.queue_id))
        return request.make_response(ResponseCode.SUCCESS, None, {"pollingNum": str(n)})
