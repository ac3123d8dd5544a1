"""A PushConsumer that consumes by pop (``consume_mode=ConsumeMode.POP``), as RocketMQ 5's push
consumer does for a group set to POP (ConsumeMessagePopConcurrentlyService).

No queue is owned and nothing is rebalanced: one long-polling pop loop per (subscribed topic, broker)
hands each batch to the listener in chunks of ``consume_message_batch_max_size`` (sync listeners on
a thread pool of ``consume_thread_max``, async ones on the loop). A chunk the listener consumed is
acked in one BATCH_ACK_MESSAGE; one it answered RECONSUME_LATER (or raised on) stays with the broker
and comes back after the delay of its next level (``3 + reconsumeTimes``: 10 s, 30 s, 1 min, ...),
by CHANGE_MESSAGE_INVISIBLETIME; the broker moves it to the DLQ after the group's retryMaxTimes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from rocketq.client.consumer.consume_concurrently import is_async_listener, listener_status
from rocketq.client.consumer.pop_api import (
    PopStatus,
    batch_ack_messages,
    change_invisible_time,
    pop_header,
    pop_message,
)
from rocketq.client.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeMessageContext,
    ConsumeMode,
    ConsumeStatus,
    MessageRequestMode,
)
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import MessageExt

if TYPE_CHECKING:
    from rocketq.client.consumer.push import PushConsumer

__all__ = ["ConsumeMode", "MessageRequestMode", "PopDriver"]

log = logging.getLogger("rocketq.client")

POP_INVISIBLE_MS = 60_000  # DefaultMQPushConsumer.popInvisibleTime
POP_BATCH_NUMS = 32  # DefaultMQPushConsumer.popBatchNums (the broker's most)
# RocketMQ's messageDelayLevel, seconds: the wait before a message that failed comes back
DELAY_LEVELS = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


def retry_delay_ms(reconsume_times: int, delay_level: int = 0) -> int:
    """The invisible time of a message the listener failed: its next delay level's wait."""
    level = delay_level if delay_level > 0 else 3 + reconsume_times
    return DELAY_LEVELS[min(level, len(DELAY_LEVELS)) - 1] * 1000


class PopDriver:
    def __init__(self, consumer: PushConsumer) -> None:
        self._c = consumer
        self._tasks: list[asyncio.Task[None]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._running = False

    def start(self) -> None:
        c = self._c
        self._running = True
        if not is_async_listener(c.listener):
            self._pool = ThreadPoolExecutor(c.config.consume_thread_max, thread_name_prefix="pop-consume")
        for topic in list(c.rebalance_impl.subscription_inner):
            if topic != c.retry_topic_wire:
                self._tasks.append(asyncio.get_running_loop().create_task(self._topic_loop(topic)))

    async def shutdown(self) -> None:
        self._running = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    async def _topic_loop(self, topic: str) -> None:
        c = self._c
        turn = 0
        while self._running:
            client = c.client
            brokers = sorted({mq.broker_name for mq in client.get_subscribe_queues(topic)})
            if not brokers:
                await client.update_topic_route_info_from_name_server(topic)
                await asyncio.sleep(1)
                continue
            name = brokers[turn % len(brokers)]
            turn += 1
            addr = client.find_broker_address_in_subscribe(name)
            if addr is None:
                await asyncio.sleep(1)
                continue
            try:
                await self._pop_once(topic, name, addr)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("pop from %s for %s failed: %s", addr, topic, exc)
                await asyncio.sleep(c.config.pull_time_delay_mills_when_exception / 1000)

    async def _pop_once(self, topic: str, broker_name: str, addr: str) -> None:
        c = self._c
        cfg = c.config
        sub = c.rebalance_impl.subscription_inner[topic]
        exp = None if sub.sub_string in ("*", "") and sub.expression_type == "TAG" else sub.sub_string
        poll_ms = cfg.broker_suspend_max_time_millis
        header = pop_header(c.group_wire, topic, min(POP_BATCH_NUMS, cfg.pull_batch_size), POP_INVISIBLE_MS,
                            poll_ms, exp_type=sub.expression_type if exp else None, exp=exp)
        timeout = poll_ms / 1000 + cfg.mq_client_api_timeout / 1000
        result = await pop_message(c.client.remoting_client, addr, broker_name, header, timeout)
        if result.status is not PopStatus.FOUND:
            return
        size = cfg.consume_message_batch_max_size
        msgs, handles = result.messages, result.handles
        await asyncio.gather(*(
            self._consume(topic, broker_name, addr, msgs[i:i + size], handles[i:i + size])
            for i in range(0, len(msgs), size)))

    def _hooks(self, method: str, hook_ctx: ConsumeMessageContext | None) -> None:
        """The consumer's consume hooks (message trace among them), as the pull mode calls them."""
        if hook_ctx is None:
            return
        for hook in self._c.hooks:
            try:
                getattr(hook, method)(hook_ctx)
            except Exception as e:
                log.warning("consumeMessageHook %s failed: %s", method, e)

    async def _consume(self, topic: str, broker_name: str, addr: str, msgs: Sequence[MessageExt],
                       handles: Sequence[str]) -> None:
        c = self._c
        mq = MessageQueue(c.config.without_namespace(topic), broker_name, msgs[0].queue_id)
        ctx = ConsumeConcurrentlyContext(mq)
        shown = list(msgs)
        hook_ctx = ConsumeMessageContext(c.consumer_group, mq, shown) if c.hooks else None
        self._hooks("consume_message_before", hook_ctx)
        try:
            if self._pool is None:
                value = await c.listener(shown, ctx)
            else:
                value = await asyncio.get_running_loop().run_in_executor(self._pool, c.listener, shown, ctx)
        except Exception:
            log.warning("consumeMessage exception, group %s", c.consumer_group, exc_info=True)
            value, returned = ConsumeStatus.RECONSUME_LATER, "EXCEPTION"
        else:
            returned = ""
        status, hook_type = listener_status(value, ConsumeStatus, ConsumeStatus.RECONSUME_LATER)
        if hook_ctx is not None:
            hook_ctx.status = status.name
            hook_ctx.success = status is ConsumeStatus.CONSUME_SUCCESS
            hook_ctx.props["ConsumeContextType"] = returned or hook_type
            self._hooks("consume_message_after", hook_ctx)
        ok = len(msgs) if status is ConsumeStatus.CONSUME_SUCCESS else 0
        if status is ConsumeStatus.CONSUME_SUCCESS and ctx.ack_index < len(msgs):
            ok = max(0, ctx.ack_index + 1)
        client = c.client.remoting_client
        timeout = c.config.mq_client_api_timeout / 1000
        if ok:
            await batch_ack_messages(client, addr, broker_name, c.group_wire, topic, handles[:ok], timeout)
        for m, handle in zip(msgs[ok:], handles[ok:], strict=True):
            delay = retry_delay_ms(m.reconsume_times, ctx.delay_level_when_next_consume)
            try:
                await change_invisible_time(client, addr, c.group_wire, topic, handle, delay, timeout)
            except Exception as exc:  # it comes back after its pop's invisible time anyway
                log.info("changing the invisible time of a failed message failed: %s", exc)
