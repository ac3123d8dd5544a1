"""AsyncTraceDispatcher: trace contexts in, batched trace messages out, never in the user's way.

``append`` only puts a context on a bounded queue (any thread: consume hooks run on worker
threads); a full queue drops the context and counts it. A task on the client's event loop wakes
every 100 ms, encodes what arrived into one segment per trace topic, and sends a segment as one
message when it nears 128 KB or its first record is 500 ms old (Java's pollingTimeMil,
maxMsgSize and waitTimeThresholdMil). Sends go through a producer of its own
(``_INNER_TRACE_PRODUCER-<group>-<type>-<n>``, no namespace, 5 s timeout) with a cap on those in
flight: when the trace topic cannot be written, user sends go on untouched, and the traces are
dropped with one log line per interval saying how many.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from typing import TYPE_CHECKING, Final

from rocketq.client.message import Message
from rocketq.client.trace.codec import TraceContext, encode_trace, trace_keys, unique_keys

if TYPE_CHECKING:
    from rocketq.client.config import ClientConfig
    from rocketq.client.message import SendResult
    from rocketq.client.producer.producer import Producer

__all__ = ["RMQ_SYS_TRACE_TOPIC", "AsyncTraceDispatcher"]

log = logging.getLogger("rocketq.client.trace")

RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
GROUP_NAME_PREFIX: Final = "_INNER_TRACE_PRODUCER"
# Contexts waiting to be encoded. Java's traceContextQueue holds 1024, drained by a thread that
# never sleeps while it has work; here one response frame can complete a thousand sends within a
# single loop iteration, before the early drain runs, so the bound is larger.
QUEUE_SIZE: Final = 4096
MAX_MSG_SIZE: Final = 128_000
SEGMENT_LIMIT: Final = MAX_MSG_SIZE - 10_000
POLL_INTERVAL: Final = 0.1  # s
DRAIN_EARLY: Final = 256
WAIT_THRESHOLD: Final = 0.5  # s: the oldest record of a segment waits no longer
MAX_IN_FLIGHT: Final = 64  # trace messages being sent at once
SEND_TIMEOUT_MS: Final = 5_000
DROP_LOG_INTERVAL: Final = 10.0  # s between two "traces dropped" lines

_COUNTER = itertools.count(1)


class _Segment:
    __slots__ = ("data", "first_at", "keys", "size")

    def __init__(self) -> None:
        self.data: list[str] = []
        self.keys: list[str] = []
        self.size = 0
        self.first_at = 0.0


class AsyncTraceDispatcher:
    """One per traced producer or consumer (Java's AsyncTraceDispatcher)."""

    def __init__(self, group: str, kind: str, trace_topic: str | None, host_config: ClientConfig) -> None:
        self.group = group
        self.kind = kind  # "PRODUCE" / "CONSUME", as Java's TraceDispatcher.Type
        self.trace_topic = trace_topic or RMQ_SYS_TRACE_TOPIC
        self._host_config = host_config
        # Contexts, or records already encoded with their keys (the send hook's Pub records).
        self._queue: collections.deque[TraceContext | tuple[str, list[str]]] = collections.deque()
        self._segments: dict[str, _Segment] = {}
        self._producer: Producer | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_scheduled = False
        self._in_flight = 0
        self._stopped = False
        self.discarded = 0  # contexts and records never written (queue full, send failed)
        self.sent_messages = 0
        self._dropped_since_log = 0
        self._last_drop_log = 0.0

    @property
    def producer_group(self) -> str:
        return self._producer.group if self._producer is not None else ""

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the trace producer on the running loop (the host's instance, another group)."""
        from rocketq.client.producer.producer import Producer

        group = f"{GROUP_NAME_PREFIX}-{self.group}-{self.kind}-{next(_COUNTER)}"
        self._producer = Producer(
            group, config_base=self._host_config.client_config(), namespace=None, enable_trace=False,
            send_msg_timeout=SEND_TIMEOUT_MS, max_message_size=MAX_MSG_SIZE, vip_channel_enabled=False,
        )
        await self._producer.start()
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name=f"trace-{group}")

    async def shutdown(self, flush_timeout: float = 0.5) -> None:
        """Write what is queued (for at most ``flush_timeout`` s), then stop."""
        if self._stopped:
            return
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.flush(flush_timeout)
        if self._producer is not None:
            await self._producer.shutdown()

    async def flush(self, timeout: float = 0.5) -> None:
        """Send every queued context now and wait (at most ``timeout`` s) for the sends."""
        self._drain()
        for topic in list(self._segments):
            self._send_segment(topic)
        deadline = time.monotonic() + timeout
        while self._in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    # -- input -------------------------------------------------------------------------------------

    def append(self, ctx: TraceContext) -> bool:
        """Queue ``ctx``; False (and counted) when the queue is full or the dispatcher stopped."""
        return self._put(ctx)

    def append_record(self, record: str, keys: list[str]) -> bool:
        """Queue one encoded record and the keys its trace message must carry."""
        return self._put((record, keys))

    def _put(self, ctx: TraceContext | tuple[str, list[str]]) -> bool:
        if self._stopped or len(self._queue) >= QUEUE_SIZE:
            self._dropped(1, "trace buffer full")
            return False
        self._queue.append(ctx)  # deque.append is atomic: safe from consume threads
        # Under load the 100 ms tick would let the queue overflow: drain early (Java's worker
        # polls the queue continuously). One wake-up at a time, from any thread.
        if len(self._queue) >= DRAIN_EARLY and not self._drain_scheduled and self._loop is not None:
            self._drain_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain_now)
            except RuntimeError:  # the loop closed under a late consume thread
                self._drain_scheduled = False
        return True

    def _drain_now(self) -> None:
        self._drain_scheduled = False
        try:
            self._drain()
        except Exception:
            log.exception("trace dispatcher step failed")

    # -- the worker --------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            try:
                self._drain()
                now = time.monotonic()
                for topic, seg in list(self._segments.items()):
                    if seg.data and now - seg.first_at >= WAIT_THRESHOLD:
                        self._send_segment(topic)
            except Exception:
                log.exception("trace dispatcher step failed")

    def _drain(self) -> None:
        queue = self._queue
        topic = self.trace_topic
        while queue:
            item = queue.popleft()
            if isinstance(item, tuple):
                text, keys = item
            elif item.beans:
                text, keys = encode_trace(item), trace_keys(item)
            else:
                continue
            seg = self._segments.get(topic)
            if seg is None:
                seg = self._segments[topic] = _Segment()
            if not seg.data:
                seg.first_at = time.monotonic()
            seg.data.append(text)
            seg.keys.extend(keys)
            seg.size += len(text)
            if seg.size >= SEGMENT_LIMIT:
                self._send_segment(topic)

    def _send_segment(self, topic: str) -> None:
        seg = self._segments.pop(topic, None)
        if seg is None or not seg.data:
            return
        producer = self._producer
        if producer is None or self._in_flight >= MAX_IN_FLIGHT:
            self._dropped(len(seg.data), "too many trace sends in flight")
            return
        msg = Message(topic, "".join(seg.data).encode(), keys=unique_keys(seg.keys) or None)
        records = len(seg.data)
        try:
            fut = producer.send_async(msg)
        except Exception as e:
            self._dropped(records, f"send trace data failed: {e}")
            return
        self._in_flight += 1

        def done(f: asyncio.Future[SendResult]) -> None:
            self._in_flight -= 1
            exc = None if f.cancelled() else f.exception()
            if f.cancelled() or exc is not None:
                self._dropped(records, f"send trace data failed: {exc!r}")
            else:
                self.sent_messages += 1

        fut.add_done_callback(done)

    def _dropped(self, count: int, why: str) -> None:
        """Count lost records; say so at most once per DROP_LOG_INTERVAL (an outage is not a flood)."""
        self.discarded += count
        self._dropped_since_log += count
        now = time.monotonic()
        if now - self._last_drop_log >= DROP_LOG_INTERVAL:
            log.warning("%s: %d trace records dropped (topic %s, %d in total)",
                        why, self._dropped_since_log, self.trace_topic, self.discarded)
            self._last_drop_log = now
            self._dropped_since_log = 0
