"""``rocketq bench producer|e2e --rate N``: one sender at a fixed rate, for end-to-end latency.

Each message's body starts with the wall clock of its send call in nanoseconds (CLOCK_REALTIME,
one clock for every process of a host), so a consumer of the topic, in this process or another
one on the same host, times send call -> listener to the microsecond rather than from the
broker's millisecond born timestamp.

The pacing runs on a thread that sleeps with the kernel's timer and hands each send to the
loop: uvloop rounds timers to whole milliseconds and runs anything under half of one at once,
so pacing with asyncio.sleep at a few thousand a second would spin the loop and send in pairs,
and both would show up as latency.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

__all__ = ["STAMP", "paced_sender", "rate_sender", "stamp_age_ms", "stamped_body"]

STAMP = b"rqbench@"
_DIGITS = 19  # time.time_ns() until the year 2286
_HEAD = len(STAMP) + _DIGITS


def stamped_body(size: int) -> bytes:
    """A body of ``size`` bytes (at least the stamp's 27) carrying the current wall clock."""
    head = b"%s%0*d" % (STAMP, _DIGITS, time.time_ns())
    return head + b"x" * (size - _HEAD) if size > _HEAD else head


def stamp_age_ms(body: bytes, now_ns: int) -> float | None:
    """Milliseconds since a stamped body was sent; None for a body without the stamp."""
    if body[: len(STAMP)] != STAMP:
        return None
    try:
        return (now_ns - int(body[len(STAMP) : _HEAD])) / 1e6
    except ValueError:
        return None


async def paced_sender(rate: int, stop: asyncio.Event, send: Callable[[], Any]) -> None:
    """Call ``send()`` on this loop ``rate`` times a second, evenly spaced, until ``stop``.

    ``send()`` starts one send and handles its outcome itself (a callback)."""
    loop = asyncio.get_running_loop()
    halt = threading.Event()

    def one() -> None:
        if not stop.is_set():
            send()

    def pace() -> None:
        interval = 1.0 / rate
        start = time.perf_counter()
        i = 0
        while not halt.is_set():
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            try:
                loop.call_soon_threadsafe(one)
            except RuntimeError:  # the loop closed under us
                return
            i += 1

    pacer = threading.Thread(target=pace, name="bench-pacer", daemon=True)
    pacer.start()
    try:
        await stop.wait()
    finally:
        halt.set()
        await loop.run_in_executor(None, partial(pacer.join, 5.0))


async def rate_sender(producer: Any, topic: str, size: int, tags: str | None, rate: int, rec: Any,
                      stop: asyncio.Event) -> None:
    """``--rate``: one stamped message every 1/rate s until ``stop``; each send's round trip,
    failures and non-OK answers go to ``rec`` (a bench LatencyRecorder), as the other senders'."""
    from rocketq.client.message import Message, SendStatus

    clock = time.perf_counter
    loop = asyncio.get_running_loop()
    inflight = 0
    drained = loop.create_future()

    def done(t0: float, fut: asyncio.Future[Any]) -> None:
        nonlocal inflight
        inflight -= 1
        if fut.cancelled() or fut.exception() is not None:
            rec.failed += 1
        else:
            rec.rts.append((clock() - t0) * 1000.0)
            rec.count += 1
            if fut.result().status is not SendStatus.SEND_OK:
                rec.response_failed += 1
        if stop.is_set() and not inflight and not drained.done():
            drained.set_result(None)

    def send() -> None:
        nonlocal inflight
        t0 = clock()
        try:
            fut = producer.send_async(Message(topic, stamped_body(size), tags=tags))
        except Exception:
            rec.failed += 1
            return
        inflight += 1
        fut.add_done_callback(partial(done, t0))

    await paced_sender(rate, stop, send)
    if inflight:  # what is still in flight belongs to the run
        await drained
