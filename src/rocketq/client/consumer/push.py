"""PushConsumer (asyncio): RocketMQ's DefaultMQPushConsumer.

    consumer = PushConsumer("cg", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("T", "A || B")
    consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)  # orderly=True for order
    await consumer.start(); ...; await consumer.shutdown()

Owned queues (decided by the rebalance) are long-polled by one pull loop each; pulled messages are
cached in the queue's ProcessQueue and handed to the consume service (concurrent or orderly), whose
answers move the committed offsets. Listeners are plain callables: sync ones run on the consume
threads, async ones on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from rocketq.client.api import PULL_SYS_FLAG_COMMIT_OFFSET, PULL_SYS_FLAG_SUBSCRIPTION, PULL_SYS_FLAG_SUSPEND
from rocketq.client.config import ClientConfig, ServiceState
from rocketq.client.consumer.consume_concurrently import ConsumeMessageConcurrentlyService
from rocketq.client.consumer.consume_directly import consume_message_directly
from rocketq.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from rocketq.client.consumer.inner import ConsumerInner
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.pull_service import PullMessageService, PullRequest
from rocketq.client.consumer.push_pop import PopDriver
from rocketq.client.consumer.reset import reset_offset
from rocketq.client.consumer.running_info import consumer_running_info
from rocketq.client.consumer.send_back import MessageBackSender
from rocketq.client.consumer.stats import ConsumeRuntimeStats
from rocketq.client.consumer.subscription import (
    MessageSelector,
    build_subscription,
    check_subscribe_topic,
    reset_retry_topic,
)
from rocketq.client.consumer.types import ConsumeMessageHook, MessageRequestMode, PushConsumerConfig
from rocketq.client.message import PullStatus
from rocketq.client.rebalance.allocate import allocate_strategy
from rocketq.client.rebalance.impl import HAND_OVER_WAIT, RETRY_GROUP_TOPIC_PREFIX, RebalancePushImpl
from rocketq.client.trace.attach import start_consumer_trace
from rocketq.client.trace.hooks import ConsumeMessageTraceHook
from rocketq.codec.bodies import ConsumerData, ConsumeType, MessageModel, MessageQueue
from rocketq.codec.codes import ResponseCode
from rocketq.codec.message import MessageExt
from rocketq.errors import InvalidArgument, ServiceStateError

__all__ = ["PushConsumer"]

log = logging.getLogger("rocketq.client")

FLOW_CONTROL_DELAY = 0.05  # s, after client-side flow control (cache full or span too wide)
BROKER_FLOW_CONTROL_DELAY = 0.02
SUSPEND_DELAY = 1.0  # s, while the consumer is suspended
OFFSET_ILLEGAL_FIX_DELAY = 10.0
FORCED_HEARTBEAT_INTERVAL = 1.0  # s between heartbeats forced by "subscription not exist" answers
_FLOW_LOG_EVERY = 1000
_SUBSCRIPTION_UNKNOWN = frozenset({ResponseCode.SUBSCRIPTION_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_LATEST})
_SUSPEND_FLAGS = PULL_SYS_FLAG_SUSPEND


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class PushConsumer(ConsumerInner):
    """``PushConsumer(group, namesrv_addr=..., **fields)`` takes any PushConsumerConfig or
    ClientConfig field (``message_model``, ``consume_from_where``, ``consume_message_batch_max_size``,
    ``pull_batch_size``, ``instance_name``, ...), or a whole ``config=PushConsumerConfig(...)``."""

    CONSUME_TYPE = ConsumeType.CONSUME_PASSIVELY
    config: PushConsumerConfig

    def __init__(
        self,
        consumer_group: str | None = None,
        namesrv_addr: str | None = None,
        *,
        config: PushConsumerConfig | None = None,
        config_base: ClientConfig | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(PushConsumerConfig, consumer_group, namesrv_addr, config, config_base, fields)
        cfg = self.config
        self.hooks: list[ConsumeMessageHook] = []
        self._trace_hook: ConsumeMessageTraceHook | None = None
        self.listener: Any = None
        self.consume_orderly = False
        self.consume_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self._subscriptions: dict[str, str] = {}  # user topic -> expression
        self.rebalance_impl = RebalancePushImpl(
            self, self._group_wire, cfg.message_model, allocate_strategy(cfg.allocate_message_queue_strategy)
        )
        self.pull_service = PullMessageService(self._pull_once, self._group_wire)
        self._paused = False
        self._threshold_count = cfg.pull_threshold_for_queue
        self._threshold_size = cfg.pull_threshold_size_for_queue
        self._flow_count = 0
        self._last_forced_heartbeat = 0.0
        self._sender = MessageBackSender(self)
        self._pop_driver: PopDriver | None = None
        if isinstance(cfg.consume_mode, str):  # "POP" as a plain option
            mode = MessageRequestMode(cfg.consume_mode.upper())
            self.config = cfg = dataclasses.replace(cfg, consume_mode=mode)

    # -- configuration -----------------------------------------------------------------------------

    @property
    def message_model(self) -> MessageModel:
        return self.config.message_model

    @property
    def process_queue_table(self) -> dict[MessageQueue, ProcessQueue]:
        return self.rebalance_impl.process_queue_table

    def subscribe(self, topic: str, sub_expression: str | MessageSelector | None = "*") -> None:
        """Consume ``topic`` messages whose tag matches ``"A || B"`` (or ``"*"`` for all), or that a
        ``MessageSelector`` selects (``by_sql``: by properties, filtered by the broker).

        ``InvalidArgument`` / ``InvalidMessage`` for a bad topic name or expression
        (``FilterExpressionError``, with the position, for SQL92).
        """
        check_subscribe_topic(topic)
        wire = self.config.with_namespace(topic)
        sub = build_subscription(wire, sub_expression)
        self._subscriptions[topic] = sub.sub_string
        self._install(sub)
        if self.service_state is ServiceState.RUNNING:
            self._spawn(self._after_subscription_change(wire))

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        self._uninstall(self.config.with_namespace(topic))

    def register_listener(self, listener: Any, *, orderly: bool = False) -> None:
        """``listener(msgs, context) -> ConsumeStatus`` (or ConsumeOrderlyStatus with ``orderly``);
        sync or ``async def``. Also accepts an object with a ``consume_message`` method."""
        if self.service_state is not ServiceState.CREATE_JUST:
            raise ServiceStateError("register the listener before start()")
        if not callable(listener):
            method = getattr(listener, "consume_message", None)
            if method is None:
                raise InvalidArgument(f"not a listener: {listener!r}")
            listener = method
        self.listener = listener
        self.consume_orderly = orderly

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        self.hooks.append(hook)
        log.info("register consumeMessageHook Hook, %s", getattr(hook, "hook_name", lambda: hook)())

    def suspend(self) -> None:
        """Stop pulling (messages already cached are still consumed) until ``resume()``."""
        self._paused = True
        log.info("suspend this consumer, %s", self.consumer_group)

    def resume(self) -> None:
        self._paused = False
        log.info("resume this consumer, %s", self.consumer_group)
        if self._client is not None:
            self._client.rebalance_immediately()

    # -- lifecycle ---------------------------------------------------------------------------------

    def _check_config(self) -> None:
        cfg = self.config
        self._check_group()
        if self.listener is None:
            raise InvalidArgument("messageListener is null: call register_listener() before start()")
        checks = (
            (1 <= cfg.consume_thread_min <= 1000, "consumeThreadMin Out of range [1, 1000]"),
            (1 <= cfg.consume_thread_max <= 1000, "consumeThreadMax Out of range [1, 1000]"),
            (
                cfg.consume_thread_min <= cfg.consume_thread_max,
                "consumeThreadMin can't be larger than consumeThreadMax",
            ),
            (
                1 <= cfg.consume_concurrently_max_span <= 65535,
                "consumeConcurrentlyMaxSpan Out of range [1, 65535]",
            ),
            (1 <= cfg.pull_threshold_for_queue <= 65535, "pullThresholdForQueue Out of range [1, 65535]"),
            (
                1 <= cfg.pull_threshold_size_for_queue <= 1024,
                "pullThresholdSizeForQueue Out of range [1, 1024]",
            ),
            (0 <= cfg.pull_interval <= 65535, "pullInterval Out of range [0, 65535]"),
            (
                1 <= cfg.consume_message_batch_max_size <= 1024,
                "consumeMessageBatchMaxSize Out of range [1, 1024]",
            ),
            (1 <= cfg.pull_batch_size <= 1024, "pullBatchSize Out of range [1, 1024]"),
        )
        for ok, text in checks:
            if not ok:
                raise InvalidArgument(text)

    async def start(self) -> None:
        """Join the group and start consuming. ``ServiceStateError`` when started before,
        ``GroupAlreadyRegistered`` when this client instance already has a consumer of the group."""
        if self.service_state is not ServiceState.CREATE_JUST:
            raise ServiceStateError(
                f"The PushConsumer service state not OK, maybe started once, {self.service_state.name}"
            )
        self._check_config()
        self.service_state = ServiceState.START_FAILED
        cfg = self.config
        try:
            if cfg.message_model is MessageModel.CLUSTERING:
                self._install(build_subscription(self._retry_topic, "*"))
            client = await self._bind_client()
            service_cls = (
                ConsumeMessageOrderlyService if self.consume_orderly else ConsumeMessageConcurrentlyService
            )
            self.consume_service = service_cls(self, self.listener)
            self.consume_service.start()
            try:
                self._register(client)
            except BaseException:
                await self.consume_service.shutdown()
                raise
            await client.start()
        except BaseException:
            await self._undo_start()
            raise
        self.service_state = ServiceState.RUNNING
        log.info(
            "the consumer [%s] start OK. messageModel=%s, isUnitMode=%s",
            self.consumer_group,
            cfg.message_model.name,
            cfg.unit_mode,
        )
        if cfg.enable_trace:
            self._trace_hook = await start_consumer_trace(self.consumer_group, cfg)
            if self._trace_hook is not None:
                self.register_consume_message_hook(self._trace_hook)
        await self._join()
        if self.config.consume_mode is MessageRequestMode.POP:
            self._pop_driver = PopDriver(self)
            self._pop_driver.start()
            return
        client.rebalance_immediately()

    async def shutdown(self) -> None:
        """Leave the group: stop pulling, let the listener calls in flight finish (up to
        ``await_termination_millis_when_shutdown``), persist offsets, release orderly locks, unregister."""
        if self.service_state is not ServiceState.RUNNING:
            if self.service_state is ServiceState.CREATE_JUST:
                self.service_state = ServiceState.SHUTDOWN_ALREADY
            return
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        if self._pop_driver is not None:
            await self._pop_driver.shutdown()
        await self.pull_service.shutdown()
        for timer in list(self._tasks):
            timer.cancel()
        table = self.process_queue_table
        for pq in table.values():
            self.begin_hand_over(pq)
        await_termination = self.config.await_termination_millis_when_shutdown / 1000.0
        try:
            # Commit what the listener finished and the consume jobs already started (before the
            # pool shutdown abandons queued ones), so the offsets persisted below are past them
            # and the members taking these queues over do not consume them again.
            await self.hand_over(list(table.values()), max(HAND_OVER_WAIT, await_termination))
            if self.consume_service is not None:
                await self.consume_service.shutdown(await_termination)
            await self._persist_at_shutdown(table)
        finally:
            for pq in table.values():
                pq.handing_over = False
        if self.consume_orderly and self.config.message_model is MessageModel.CLUSTERING:
            await self.rebalance_impl.unlock_all(oneway=False)
        if self._trace_hook is not None:
            await self._trace_hook.dispatcher.shutdown()
        await self._leave()
        self.rebalance_impl.destroy()
        log.info("the consumer [%s] shutdown OK", self.consumer_group)

    # -- what the MQClientInstance drives ----------------------------------------------------------

    async def do_rebalance(self) -> bool:
        if self._paused or self.service_state is not ServiceState.RUNNING or self._pop_driver is not None:
            return True
        return await self.rebalance_impl.do_rebalance(self.consume_orderly)

    def consumer_data(self) -> ConsumerData:
        data = super().consumer_data()
        if self.config.consume_mode is MessageRequestMode.POP:  # what heartbeats say of the group
            return dataclasses.replace(data, consume_type=ConsumeType.CONSUME_POP)
        return data

    def _owned_queues(self) -> Collection[MessageQueue]:
        return self.process_queue_table

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        queues = await self.client.fetch_subscribe_message_queues(self.config.with_namespace(topic))
        return [MessageQueue(topic, mq.broker_name, mq.queue_id) for mq in queues]

    def consumer_running_info(self) -> bytes:
        """The GET_CONSUMER_RUNNING_INFO body (config, subscriptions, queues, consume stats)."""
        return consumer_running_info(self, ConsumeType.CONSUME_PASSIVELY.name, self.consume_orderly)

    def consume_status(self, topic: str) -> ConsumeRuntimeStats:
        return self.stats.consume_status(self._group_wire, self.config.with_namespace(topic))

    # -- what brokers ask on an admin's behalf -----------------------------------------------------

    async def reset_offset(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: restart the owned queues of ``topic`` (wire name) at ``offsets``."""
        await reset_offset(self, topic, offsets)

    async def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> bytes:
        """CONSUME_MESSAGE_DIRECTLY: the listener's verdict on ``msg`` (ConsumeMessageDirectlyResult)."""
        msgs: Sequence[MessageExt] = reset_retry_topic([msg], self._retry_topic)
        if self.config.namespace:
            msgs = self._strip_namespace(msgs)
        mq = MessageQueue(msgs[0].topic, broker_name or "", msgs[0].queue_id)
        return await consume_message_directly(self.listener, self.consume_orderly, msgs[0], mq)

    # -- rebalance callbacks -----------------------------------------------------------------------

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        for mq, pq, offset in requests:
            self.pull_service.execute_pull_request_immediately(PullRequest(self._group_wire, mq, pq, offset))

    def begin_hand_over(self, pq: ProcessQueue) -> None:
        """Drop ``pq`` ahead of persisting its offset for the next owner (see hand_over)."""
        if self.consume_service is not None:
            self.consume_service.begin_hand_over(pq)
        else:
            pq.dropped = True

    async def hand_over(self, pqs: Sequence[ProcessQueue], timeout: float) -> None:
        """Commit what the listener finished of these dropped queues, waiting up to ``timeout``
        for their consume jobs already started."""
        if self.consume_service is not None:
            await self.consume_service.hand_over(pqs, timeout)

    def on_message_queue_changed(
        self, topic: str, mq_all: Collection[MessageQueue], mq_divided: Collection[MessageQueue]
    ) -> None:
        cfg = self.config
        n = len(mq_divided)
        if n and cfg.pull_threshold_for_topic != -1:
            self._threshold_count = max(1, cfg.pull_threshold_for_topic // n)
        if n and cfg.pull_threshold_size_for_topic != -1:
            self._threshold_size = max(1, cfg.pull_threshold_size_for_topic // n)

    # -- one pull round (PullMessageService calls this per queue) ----------------------------------

    def _flow_control(self, reason: str, request: PullRequest) -> None:
        self._flow_count += 1
        if self._flow_count % _FLOW_LOG_EVERY == 0:
            pq = request.process_queue
            log.warning(
                "the %s flow control, so do flow control, minOffset=%d, maxOffset=%d, count=%d, "
                "size=%d MiB, pullRequest=%s, flowControlTimes=%d",
                reason,
                pq.min_offset(),
                pq.max_offset(),
                pq.msg_count,
                pq.cached_msg_size_in_mib,
                request,
                self._flow_count,
            )

    async def _wait_for_space(self, pq: ProcessQueue) -> None:
        fut = pq.wait_for_space(FLOW_CONTROL_DELAY)
        handle = asyncio.get_running_loop().call_later(FLOW_CONTROL_DELAY, _wake, fut)
        try:
            await fut
        finally:
            handle.cancel()

    async def _pull_once(self, request: PullRequest) -> float | None:
        pq = request.process_queue
        if pq.dropped:
            log.info("the pull request[%s] is dropped.", request)
            return None
        pq.last_pull_timestamp = time.monotonic()
        client = self._client
        if client is None or self.service_state is not ServiceState.RUNNING:
            return None if self.service_state is ServiceState.SHUTDOWN_ALREADY else self._exception_delay()
        if self._paused:
            return SUSPEND_DELAY
        cfg = self.config
        if pq.msg_count > self._threshold_count:
            self._flow_control("cached message count", request)
            await self._wait_for_space(pq)
            return 0.0
        if pq.cached_msg_size_in_mib > self._threshold_size:
            self._flow_control("cached message size", request)
            await self._wait_for_space(pq)
            return 0.0
        mq = request.message_queue
        if not self.consume_orderly:
            if pq.max_span() > cfg.consume_concurrently_max_span:
                self._flow_control("message span", request)
                await self._wait_for_space(pq)
                return 0.0
        elif pq.locked:
            if not request.previously_locked:
                # The previous owner may have committed more since this queue was added: re-read.
                offset = await self.rebalance_impl.compute_pull_from_where(mq)
                if offset < 0:
                    return self._exception_delay()
                if offset < request.next_offset:
                    log.info(
                        "the first time to pull message, so fix offset from broker. pullRequest: %s "
                        "NewOffset: %d brokerBusy: true",
                        request,
                        offset,
                    )
                request.previously_locked = True
                request.next_offset = offset
        else:
            return self._exception_delay()
        sub = self.rebalance_impl.subscription_inner.get(mq.topic)
        if sub is None:
            log.warning("find the consumer's subscription failed, %s", request)
            return self._exception_delay()
        commit_offset = 0
        sys_flag = _SUSPEND_FLAGS
        if cfg.message_model is MessageModel.CLUSTERING:
            committed = self.offset_store.read_offset_in_memory(mq)
            if committed > 0:
                commit_offset = committed
                sys_flag |= PULL_SYS_FLAG_COMMIT_OFFSET
        if cfg.post_subscription_when_pull and not sub.class_filter_mode:
            sys_flag |= PULL_SYS_FLAG_SUBSCRIPTION
        pull_api = self.pull_api
        begin = time.monotonic()
        try:
            addr, raw = await pull_api.pull_kernel(
                mq,
                sub,
                request.next_offset,
                cfg.pull_batch_size,
                sys_flag,
                cfg.consumer_timeout_millis_when_suspend / 1000.0,
                commit_offset=commit_offset,
                suspend_timeout_millis=cfg.broker_suspend_max_time_millis,
                max_msg_bytes=cfg.pull_batch_size_in_bytes,
            )
            result = pull_api.process_pull_result(mq, raw, addr, self._tags.get(mq.topic))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = getattr(e, "code", None)
            if code in _SUBSCRIPTION_UNKNOWN:
                # The broker has not got our heartbeat yet (we just started, it restarted, or it
                # expired us): expected, so said once; send one now rather than fail every pull
                # until the next 30 s heartbeat.
                self._conditions.report(
                    mq.topic, code, "the broker does not know the subscription of %s to %s yet (%s); "
                    "sending a heartbeat", self.consumer_group, mq.topic, getattr(e, "remark", e),
                )
                self._heartbeat_soon()
                return self._exception_delay()
            if not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("execute the pull request exception, %s: %r", request, e)
            self._check_reachable(mq.topic, e)
            if code == ResponseCode.FLOW_CONTROL:
                return BROKER_FLOW_CONTROL_DELAY
            return self._exception_delay()
        self._conditions.clear(mq.topic)
        if pq.dropped:
            return None
        status = result.status
        if status is PullStatus.FOUND:
            prev = request.next_offset
            request.next_offset = result.next_begin_offset
            topic = mq.topic
            msgs: Sequence[MessageExt] = result.messages
            self._count_pull(topic, begin, len(msgs))
            if not msgs:
                return 0.0
            if topic == self._retry_topic:
                msgs = reset_retry_topic(msgs, self._retry_topic)
            if self.config.namespace:
                msgs = self._strip_namespace(msgs)
            if result.next_begin_offset < prev or msgs[0].queue_offset < prev:
                log.warning(
                    "[BUG] pull message result maybe data wrong, nextBeginOffset: %d firstMsgOffset: %d "
                    "prevRequestOffset: %d",
                    result.next_begin_offset,
                    msgs[0].queue_offset,
                    prev,
                )
            dispatch = pq.put_messages(msgs, result.max_offset)
            service = self.consume_service
            if service is not None:
                service.submit_consume_request(msgs, pq, mq, dispatch)
                if service.__class__ is ConsumeMessageConcurrentlyService and service.listener_waking:
                    # Let the woken listener run before the next pull is built and sent: the
                    # pull is for later messages, the listener call is this message's latency.
                    await asyncio.sleep(0)
            return cfg.pull_interval / 1000.0
        if status is PullStatus.NO_NEW_MSG or status is PullStatus.NO_MATCHED_MSG:
            request.next_offset = result.next_begin_offset
            if pq.msg_count == 0:
                # Nothing cached: the filtered-out range counts as consumed (correctTagsOffset).
                self.offset_store.update_offset(mq, request.next_offset, True)
            return 0.0
        # OFFSET_ILLEGAL: the offset fell out of the queue's range; restart it from where the broker says.
        log.warning("the pull request offset illegal, %s %s", request, result)
        request.next_offset = result.next_begin_offset
        pq.dropped = True
        self._spawn(self._fix_illegal_offset(mq, result.next_begin_offset))
        return None

    def _heartbeat_soon(self) -> None:
        now = time.monotonic()
        if now - self._last_forced_heartbeat >= FORCED_HEARTBEAT_INTERVAL and self._client is not None:
            self._last_forced_heartbeat = now
            self._spawn(self._client.send_heartbeat_to_all_brokers())

    async def _fix_illegal_offset(self, mq: MessageQueue, offset: int) -> None:
        await asyncio.sleep(OFFSET_ILLEGAL_FIX_DELAY)
        try:
            self.offset_store.update_offset(mq, offset, False)
            await self.offset_store.persist(mq)
            await self.rebalance_impl.remove_process_queue(mq)
            log.warning("fix the pull request offset, %s %d", mq, offset)
        except Exception as e:
            log.error("executeTaskLater Exception: %s", e)
        if self._client is not None:
            self._client.rebalance_immediately()

    def _strip_namespace(self, msgs: Sequence[MessageExt]) -> list[MessageExt]:
        strip = self.config.without_namespace
        return [dataclasses.replace(m, topic=strip(m.topic)) for m in msgs]

    # -- sending failed messages back --------------------------------------------------------------

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> bool:
        """CONSUMER_SEND_MSG_BACK; if the broker will not take it, re-send a copy to %RETRY%<group>."""
        return bool(await self._sender.send_back(msg, delay_level, broker_name))

    async def send_message_back_to_dlq(
        self, msg: MessageExt, max_times: int, broker_name: str | None = None
    ) -> bool:
        """Orderly: a message past its retries goes to %DLQ%<group>."""
        return bool(await self._sender.send_to_dlq(msg, max_times, broker_name))
