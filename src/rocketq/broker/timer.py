"""Timer messages on the broker: the send-path transform and the service that drives the wheel.

A send carrying TIMER_DELIVER_MS (an absolute time), TIMER_DELAY_SEC or TIMER_DELAY_MS (a delay
from now) is stored on ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (the time rounded down
to the slot, one slot less when it falls on a slot boundary), REAL_TOPIC and REAL_QID, as
RocketMQ 5's HookUtils.transformTimerMessage does; its answer carries the recall handle. A delay
level (DELAY) wins over the TIMER_* properties, as in Java. ``TimerService`` files those messages
into the wheel and re-puts them when their slot is over (``store/timer/``), in one task that
sleeps until the next slot with work in it ends, or until a timer message arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from rocketq.broker.processors.send_wire import TIMER_KEYS
from rocketq.codec.properties import MessageConst, append_properties, get_property, needle
from rocketq.codec.recall import RecallHandle
from rocketq.errors import MessageIllegal, SystemError_
from rocketq.store.timer import TIMER_TOPIC, TimerMessageStore

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand
    from rocketq.store.config import MessageStoreConfig
    from rocketq.store.timer import TimerProgress

__all__ = ["TIMER_TOPIC", "TimerService", "add_recall_handle", "recall_handle_for", "transform_timer_message"]

log = logging.getLogger("rocketq.broker.timer")

_P = MessageConst
_DELIVER_MS, _DELAY_SEC, _DELAY_MS = TIMER_KEYS
_DEL_UNIQKEY = needle(_P.PROPERTY_TIMER_DEL_UNIQKEY)
_OUT_MS = needle(_P.PROPERTY_TIMER_OUT_MS)
_REAL_TOPIC = needle(_P.PROPERTY_REAL_TOPIC)
_REAL_QID = needle(_P.PROPERTY_REAL_QUEUE_ID)
CHUNK = 512  # records filed or delivered before the loop gets a turn
RETRY_PAUSE = 1.0  # after a refused re-put (a full disk, say)
CLEAN_INTERVAL = 60.0  # s between looks for timer-log segments nothing points into


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def illegal_remark(config: MessageStoreConfig) -> str:
    return ("timer message illegal, the delay time should not be bigger than the max delay "
            f"{config.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than "
            "the current time")


def transform_timer_message(topic: str, queue_id: int, props: str, config: MessageStoreConfig,
                            now_ms: int | None = None) -> tuple[str, int, str]:
    """(topic, queue, properties) to store a timer message under; the message unchanged when
    its time has passed (it is delivered at once). Raises what Java answers for a bad one."""
    if get_property(props, _OUT_MS) is not None:
        # Delivered once already (a consumed timer message sent again): not a timer (HookUtils).
        return topic, queue_id, props
    if not config.timer_wheel_enable:
        raise SystemError_("accurate timer message is not enabled, timerWheelEnable is false")
    now = _now_ms() if now_ms is None else now_ms
    try:
        sec = get_property(props, _DELAY_SEC)
        ms = get_property(props, _DELAY_MS)
        if sec is not None:
            deliver = now + int(sec) * 1000
        elif ms is not None:
            deliver = now + int(ms)
        else:
            deliver = int(get_property(props, _DELIVER_MS) or "")
    except ValueError:
        raise MessageIllegal(illegal_remark(config)) from None
    if deliver <= now:
        if get_property(props, _DEL_UNIQKEY) is not None:
            raise MessageIllegal(illegal_remark(config))
        return topic, queue_id, props
    if deliver - now > config.timer_max_delay_sec * 1000:
        raise MessageIllegal(illegal_remark(config))
    precision = config.timer_precision_ms
    deliver = deliver - precision if deliver % precision == 0 else deliver // precision * precision
    props = append_properties(props, (_P.PROPERTY_TIMER_OUT_MS, str(deliver)),
                              (_P.PROPERTY_REAL_TOPIC, topic), (_P.PROPERTY_REAL_QUEUE_ID, str(queue_id)))
    return TIMER_TOPIC, 0, props


def real_queue_id(props: str) -> str:
    return get_property(props, _REAL_QID) or "0"


def recall_handle_for(props: str, uniq: str, broker_name: str) -> str | None:
    """SendMessageProcessor.attachRecallHandle: the handle of a stored timer message."""
    out_ms = get_property(props, _OUT_MS)
    real_topic = get_property(props, _REAL_TOPIC)
    if out_ms is None or real_topic is None or real_topic.startswith("%RETRY%"):
        return None
    try:
        stamp = str(int(out_ms) + 1)  # the slot start rounds down: +1 lands a recall in the same slot
    except ValueError:
        return None
    return RecallHandle(real_topic, broker_name, stamp, uniq).encode()


def add_recall_handle(response: RemotingCommand, handle: str, real_queue_id: str) -> RemotingCommand:
    """``response`` (a send answer) with the ``recallHandle`` field of SendMessageResponseHeader,
    and the queue the producer named as its queueId, as Java answers (queueOffset stays the timer
    topic's)."""
    if response.ext_fields is not None:
        response.ext_fields["recallHandle"] = handle
        response.ext_fields["queueId"] = real_queue_id
    elif response.ext_json:
        ext = response.ext_json.replace(b'"queueId":"0"', b'"queueId":"%s"' % real_queue_id.encode(), 1)
        response.ext_json = ext[:-1] + b',"recallHandle":"' + handle.encode() + b'"}'
    else:
        response.ext_fields = {"recallHandle": handle, "queueId": real_queue_id}
    return response


class TimerService:
    """Owns the TimerMessageStore of a broker and the task that drives it."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.store = TimerMessageStore(controller.store, controller.store_config)
        self._task: asyncio.Task[None] | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        # Java's shouldRunningDequeue: a broker in controller mode files timers while it is a
        # slave (so that, promoted, its wheel holds them) and delivers only while it is master.
        self.delivering = True

    def set_delivering(self, on: bool) -> None:
        self.delivering = on
        self._wake.set()

    def follow_master(self, last_read_time_ms: int) -> None:
        """A slave's wheel keeps pace with the master's deliveries (its GET_TIMER_CHECK_POINT),
        so that once promoted it delivers what the master had not, not everything again."""
        if not self.delivering:
            self.store.follow_read_time(last_read_time_ms)

    def load(self) -> None:
        self.store.load()

    async def start(self) -> None:
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            self._task = self._loop.create_task(self._run())
            self._flush_task = self._loop.create_task(self._flush_loop())

    async def shutdown(self) -> None:
        tasks = [t for t in (self._task, self._flush_task) if t is not None]
        self._task = self._flush_task = None
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.store.flush)
        self.store.close()

    def wakeup(self) -> None:
        """A message was put on the timer topic (any thread)."""
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    def progress(self) -> TimerProgress:
        return self.store.progress()

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's timer keys, as Java's broker fills them (timerReadBehind in
        seconds; the TPS keys stay 0.0: rocketq keeps no per-second timer counters)."""
        p = self.store.progress()
        return {"timerReadBehind": str(max(0, _now_ms() - p.read_time_ms) // 1000),
                "timerOffsetBehind": str(p.enqueue_lag), "timerCongestNum": str(p.pending)}

    def gauges(self) -> list[tuple[bool, str, str, float]]:
        """The Prometheus series of broker/metrics.py: (counter?, name, help, value), RocketMQ 5's
        names where it has one."""
        ts = self.store
        now = _now_ms()
        p = ts.progress()
        return [
            (False, "rocketmq_timer_pending_messages", "Timer messages filed and not yet delivered",
             p.pending),
            (False, "rocketmq_timer_enqueue_lag", "Timer messages not yet filed into the wheel",
             p.enqueue_lag),
            (False, "rocketmq_timer_enqueue_latency", "Age in ms of the oldest timer message not yet filed",
             ts.enqueue_behind_ms(now)),
            (False, "rocketmq_timer_dequeue_lag", "Timer messages due but not yet delivered",
             ts.due_behind(now)),
            (False, "rocketmq_timer_dequeue_latency", "How far in ms delivery is behind the clock",
             p.dequeue_lag_ms(now)),
            (True, "rocketmq_timer_dequeue", "Timer messages delivered to their real topic", ts.delivered),
        ]

    async def _run(self) -> None:
        ts = self.store
        while True:
            self._wake.clear()
            now = _now_ms()
            before = (ts.read_time_ms, ts.slot_done)
            try:
                filed = ts.enqueue(CHUNK, now)
                handled = ts.dequeue(CHUNK, now) if self.delivering else 0
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer: a round failed; again in %.0fs", RETRY_PAUSE)
                await asyncio.sleep(RETRY_PAUSE)
                continue
            if filed or handled:
                await asyncio.sleep(0)
                continue
            if ts.is_due(now) and self.delivering:
                # Stepped over a long run of empty slots (go on), or a re-put was refused (wait).
                await asyncio.sleep(0 if (ts.read_time_ms, ts.slot_done) != before else RETRY_PAUSE)
                continue
            due = ts.next_due_ms(now) if self.delivering else None
            pause = 1.0 if due is None else max(0.0, min(1.0, (due - now) / 1000))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._wake.wait()

    async def _flush_loop(self) -> None:
        interval = self._ctl.store_config.timer_flush_interval_ms / 1000
        flushed: tuple[int, int, int] | None = None
        cleaned = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            ts = self.store
            state = (ts.enqueue_offset, ts.read_time_ms, ts.slot_done)
            if state == flushed or (flushed is not None and not ts.progress().pending
                                    and state[0] == flushed[0]):
                continue  # nothing filed or delivered since: an idle broker does no disk work
            flushed = state
            try:
                await asyncio.to_thread(self.store.flush)
                self.store.metrics.persist()
                if time.monotonic() - cleaned >= CLEAN_INTERVAL:
                    cleaned = time.monotonic()
                    self.store.clean_log()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer: flush failed")
