"""Send throughput with message trace on and off, against a real broker.

    .venv/bin/python -m benchmarks trace
    .venv/bin/python benchmarks/bench_trace.py [--messages 20000] [--rounds 2] [--body 128]

One ``rocketq up``; an asyncio producer pipelines ``--messages`` sends (``send_async``, 1,000 in
flight) with ``enable_trace`` off, then on (every send also becomes a Pub record, batched into
trace messages by the dispatcher on the same event loop), alternating for ``--rounds``. Prints
msgs/s of each, their ratio, the client process's CPU per send (the steadier figure on a shared
machine), the trace messages written, and the commit measured; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rocketq.aio
from benchmarks._cluster import BrokerProcess, git_commit
from rocketq import Message

TOPIC = "BenchTrace"
IN_FLIGHT = 1_000


async def _phase(namesrv: str, n: int, body: bytes, trace: bool, tag: str) -> tuple[float, float, int, int]:
    """(msgs/s, client CPU µs per message, trace messages sent, trace records dropped)."""
    async with rocketq.aio.Producer(f"BenchTraceP_{tag}", namesrv_addr=namesrv, enable_trace=trace) as p:
        await p.send(Message(TOPIC, body))  # route and connection
        sem = asyncio.Semaphore(IN_FLIGHT)
        futures: list[asyncio.Future[Any]] = []

        def release(_: object) -> None:
            sem.release()

        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            await sem.acquire()
            fut = p.send_async(Message(TOPIC, body, tags="bench", keys="k"))
            fut.add_done_callback(release)
            futures.append(fut)
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
        sent = dropped = 0
        if p.trace is not None:
            await p.trace.dispatcher.flush(5.0)  # the traces' own cost is charged to the phase
            sent, dropped = p.trace.dispatcher.sent_messages, p.trace.dispatcher.discarded
        cpu_us = (time.process_time() - cpu) / n * 1e6
    return n / elapsed, cpu_us, sent, dropped


def run(messages: int = 20_000, rounds: int = 2, body_size: int = 128) -> dict[str, float]:
    body = b"x" * body_size
    off: list[float] = []
    on: list[float] = []
    cpu_off: list[float] = []
    cpu_on: list[float] = []
    trace_msgs = dropped = 0
    with BrokerProcess(name="trace") as broker:
        for r in range(rounds):
            rate, cpu, _, _ = asyncio.run(_phase(broker.namesrv, messages, body, False, f"off{r}"))
            off.append(rate)
            cpu_off.append(cpu)
            rate, cpu, sent, lost = asyncio.run(_phase(broker.namesrv, messages, body, True, f"on{r}"))
            on.append(rate)
            cpu_on.append(cpu)
            trace_msgs += sent
            dropped += lost
    best_off, best_on = max(off), max(on)
    print(f"commit={git_commit()} messages={messages} body={body_size}B rounds={rounds} "
          f"in_flight={IN_FLIGHT}")
    print(f"trace off: {', '.join(f'{x:,.0f}' for x in off)} msgs/s (best {best_off:,.0f})")
    print(f"trace on : {', '.join(f'{x:,.0f}' for x in on)} msgs/s (best {best_on:,.0f})")
    print(f"on/off   : {best_on / best_off:.2f}; trace messages written {trace_msgs:,}, "
          f"records dropped {dropped:,}")
    # CPU per send in this (the client's) process: steadier than rates on a shared machine
    low_off, low_on = min(cpu_off), min(cpu_on)
    print(f"client CPU per send: off {low_off:.1f} µs, on {low_on:.1f} µs (+{low_on - low_off:.1f} µs)")
    return {"send msgs/s, trace off": best_off, "send msgs/s, trace on": best_on,
            "trace on / off": round(best_on / best_off, 2),
            "client CPU µs/send, trace off": round(low_off, 1),
            "client CPU µs/send, trace on": round(low_on, 1)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--body", type=int, default=128)
    args = ap.parse_args(argv)
    run(args.messages, args.rounds, args.body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
