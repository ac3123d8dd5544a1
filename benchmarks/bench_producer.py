"""Producer SDK benchmarks against a real broker process: acknowledged messages per second.

    .venv/bin/python -m benchmarks producer
    .venv/bin/python benchmarks/bench_producer.py [--duration S] [--repeat N] [--phases async,batch,sync]

Unlike bench_send (raw RemotingCommands), everything here goes through ``rocketq.aio.Producer``
and ``rocketq.Producer`` as a user calls them: message checks, UNIQ_KEY, properties, queue
rotation, retries bookkeeping, SendResult. Phases:

* async: ``send_async`` pipelined, ``--window`` sends in flight on one connection, 128 B bodies
  (target >= 60,000 msgs/s acknowledged);
* batch: ``send_batch_async`` of 100 x 128 B messages, 8 batches in flight (target >= 300,000 msgs/s);
* sync: the blocking facade, one ``send`` at a time from a thread (latency p50/p99, rate).

Each window warms up first; the best of ``--repeat`` windows is kept (the machine is shared). The
broker's CPU (its process) and this process's CPU per message tell which side was the bound.
Prints figures and returns them from ``run()``; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rocketq
from benchmarks._cluster import BrokerProcess
from rocketq.aio import Message, Producer
from rocketq.remoting.loop import new_event_loop

BODY = b"x" * 128
TOPIC = "BenchProducer"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _measure(
    broker: BrokerProcess, duration: float, step: Callable[[], Any], per_step: int
) -> dict[str, float]:
    """Run ``step`` (an awaitable factory acknowledging ``per_step`` messages) for ``duration`` s."""
    deadline = time.perf_counter() + duration * 0.2
    while time.perf_counter() < deadline:  # warm-up: routes, connections, broker caches
        await step()
    n = 0
    c0, b0, t0 = _cpu(), broker.cpu_seconds(), time.perf_counter()
    end = t0 + duration
    while time.perf_counter() < end:
        await step()
        n += per_step
    elapsed = time.perf_counter() - t0
    client, brk = _cpu() - c0, broker.cpu_seconds() - b0
    return {
        "msgs_per_s": n / elapsed,
        "client_cpu_us_per_msg": client / n * 1e6,
        "broker_cpu_us_per_msg": brk / n * 1e6,
        "client_cpu_pct": client / elapsed * 100,
        "broker_cpu_pct": brk / elapsed * 100,
    }


async def _async_phase(broker: BrokerProcess, duration: float, window: int) -> dict[str, float]:
    async with Producer("BenchProducerAsync", namesrv_addr=broker.namesrv) as p:
        msgs = [Message(TOPIC, BODY, tags="A") for _ in range(window)]
        await p.send(msgs[0])

        async def step() -> None:
            futs = [p.send_async(m) for m in msgs]
            for fut in futs:
                if not fut.done():
                    await fut
                elif fut.exception() is not None:
                    raise fut.exception()  # type: ignore[misc]

        return await _measure(broker, duration, step, window)


async def _batch_phase(broker: BrokerProcess, duration: float, size: int, inflight: int) -> dict[str, float]:
    async with Producer("BenchProducerBatch", namesrv_addr=broker.namesrv) as p:
        batch = [Message(TOPIC, BODY, tags="A") for _ in range(size)]
        await p.send_batch(batch)

        async def step() -> None:
            await asyncio.gather(*(p.send_batch_async(batch) for _ in range(inflight)))

        return await _measure(broker, duration, step, size * inflight)


def _sync_phase(broker: BrokerProcess, duration: float) -> dict[str, float]:
    latencies: list[float] = []
    with rocketq.Producer("BenchProducerSync", namesrv_addr=broker.namesrv) as p:
        msg = rocketq.Message(TOPIC, BODY)
        warm = time.perf_counter() + duration * 0.2
        while time.perf_counter() < warm:
            p.send(msg)
        c0, b0, t0 = _cpu(), broker.cpu_seconds(), time.perf_counter()
        end = t0 + duration
        while time.perf_counter() < end:
            s = time.perf_counter()
            p.send(msg)
            latencies.append(time.perf_counter() - s)
        elapsed = time.perf_counter() - t0
        client, brk = _cpu() - c0, broker.cpu_seconds() - b0
    latencies.sort()
    n = len(latencies)
    return {
        "msgs_per_s": n / elapsed,
        "p50_ms": latencies[n // 2] * 1000,
        "p99_ms": latencies[min(n - 1, int(n * 0.99))] * 1000,
        "client_cpu_us_per_msg": client / n * 1e6,
        "broker_cpu_us_per_msg": brk / n * 1e6,
    }


def _best(results: list[dict[str, float]]) -> dict[str, float]:
    return max(results, key=lambda r: r["msgs_per_s"])


def run(
    duration: float = 3.0,
    repeat: int = 2,
    phases: tuple[str, ...] = ("async", "batch", "sync"),
    window: int = 1000,
    batch_size: int = 100,
    batch_inflight: int = 8,
) -> dict[str, float]:
    figures: dict[str, float] = {}
    with BrokerProcess(name="bench-producer") as broker:
        loop = new_event_loop()
        try:
            if "async" in phases:
                best = _best([loop.run_until_complete(_async_phase(broker, duration, window))
                              for _ in range(repeat)])
                print(f"async pipelined (window {window}): {best['msgs_per_s']:,.0f} msgs/s, client "
                      f"{best['client_cpu_us_per_msg']:.1f} us/msg ({best['client_cpu_pct']:.0f} %), broker "
                      f"{best['broker_cpu_us_per_msg']:.1f} us/msg ({best['broker_cpu_pct']:.0f} %)")
                figures.update({f"async_{k}": v for k, v in best.items()})
            if "batch" in phases:
                best = _best([loop.run_until_complete(
                    _batch_phase(broker, duration, batch_size, batch_inflight)) for _ in range(repeat)])
                print(f"batch ({batch_size} x {len(BODY)} B, {batch_inflight} in flight): "
                      f"{best['msgs_per_s']:,.0f} msgs/s, client {best['client_cpu_us_per_msg']:.2f} us/msg, "
                      f"broker {best['broker_cpu_us_per_msg']:.2f} us/msg")
                figures.update({f"batch_{k}": v for k, v in best.items()})
        finally:
            loop.close()
        if "sync" in phases:
            result: list[dict[str, float]] = []
            thread = threading.Thread(target=lambda: result.append(_sync_phase(broker, duration)))
            thread.start()
            thread.join()
            sync = result[0]
            print(f"sync facade, one at a time: {sync['msgs_per_s']:,.0f} msgs/s, "
                  f"p50 {sync['p50_ms']:.3f} ms, "
                  f"p99 {sync['p99_ms']:.3f} ms")
            figures.update({f"sync_{k}": v for k, v in sync.items()})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measured window")
    parser.add_argument("--repeat", type=int, default=2, help="windows per phase (the best is kept)")
    parser.add_argument("--phases", default="async,batch,sync")
    parser.add_argument("--window", type=int, default=1000, help="async sends in flight")
    args = parser.parse_args()
    run(args.duration, args.repeat, tuple(args.phases.split(",")), args.window)


if __name__ == "__main__":
    main()
