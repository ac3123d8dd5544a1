"""--rate: the body stamp the consumer times from, and the pacing of the sends."""

from __future__ import annotations

import asyncio
import time

from rocketq.cli.bench_rate import paced_sender, stamp_age_ms, stamped_body


def test_stamp_round_trip_and_size() -> None:
    body = stamped_body(128)
    assert len(body) == 128
    age = stamp_age_ms(body, time.time_ns() + 1_500_000)
    assert age is not None and 1.5 <= age < 1000
    assert stamp_age_ms(b"rocketq-benchmark-" * 8, time.time_ns()) is None  # a free-running sender's
    assert stamp_age_ms(b"rqbench@not-a-number-at-all", time.time_ns()) is None
    assert len(stamped_body(8)) == 27  # never shorter than the stamp


async def test_paced_sender_calls_on_the_loop_at_its_rate_until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    calls: list[float] = []

    def send() -> None:
        asyncio.get_running_loop()  # on the loop's thread
        calls.append(loop.time())

    began = time.perf_counter()
    task = loop.create_task(paced_sender(1000, stop, send))
    async with asyncio.timeout(30):
        while len(calls) < 50:
            await asyncio.sleep(0.01)
    stop.set()
    elapsed = time.perf_counter() - began
    await task
    n = len(calls)
    await asyncio.sleep(0.05)
    assert len(calls) == n  # nothing after the stop
    # never ahead of its schedule (a late pacer catches up, it does not run early)
    assert n <= elapsed * 1000 + 2
