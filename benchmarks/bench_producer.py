"""Producer SDK benchmarks against a real broker process: the produce rows of issue 10's targets.

    .venv/bin/python -m benchmarks producer
    .venv/bin/python benchmarks/bench_producer.py [--duration S] [--repeat N] [--window N]
                                                  [--phases autobatch,plain,syncflush,batch,1k,sync]
                                                  [--profile DIR]

Everything goes through ``rocketq.aio.Producer`` and ``rocketq.Producer`` as a user calls them:
message checks, UNIQ_KEY, properties, queue rotation, retry bookkeeping, SendResult. Phases:

* autobatch: ``send_async`` of one 128 B message per call, ``--window`` sends in flight (a
  sliding window: each completed send starts the next), automatic batching on (the default),
  ASYNC_FLUSH;
* plain: the same with ``auto_batch=False`` (plain pipelining, one SEND_MESSAGE_V2 per message);
* syncflush: as autobatch, against a SYNC_FLUSH broker (acked after fsync, group commit);
* batch: ``send_batch_async`` of 100 x 128 B messages, 8 batches in flight;
* 1k: as autobatch with 1 KiB bodies;
* sync: the blocking facade, one ``send`` at a time from a thread (latency p50/p99, rate).

Each phase runs ``--repeat`` windows after a warm-up; the best and the median are printed with
the load average before and after, and this process's and the broker's CPU per message (which
side was the bound). ``--profile DIR`` runs ``py-spy record`` on this process and on the broker
during each phase's last window (raw stacks there) and prints where each spent its time.
Prints figures and returns them from ``run()``; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rocketq
from benchmarks._cluster import BrokerProcess
from benchmarks._record import record
from benchmarks.bench_send import _report_py_spy, _start_py_spy
from rocketq.aio import Message, Producer
from rocketq.remoting.loop import new_event_loop

BODY = b"x" * 128
BODY_1K = b"k" * 1024
TOPIC = "BenchProducer"
PHASES = ("autobatch", "plain", "syncflush", "batch", "1k", "sync")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


class _Profiler:
    """py-spy on this process and the broker for one window (raw stacks in a directory), then the
    functions with the most samples of each (bench_send's report)."""

    def __init__(self, out_dir: Path, name: str, broker: BrokerProcess, duration: float) -> None:
        self.spies = [(f"{name}_{who}", _start_py_spy(pid, f"{name}_{who}", duration, out_dir))
                      for who, pid in (("client", os.getpid()), ("broker", broker.pid))]

    def stop(self) -> None:
        for label, spy in self.spies:
            if spy is not None:
                print(f"  profile of {label}:")
                _report_py_spy(spy, label)


def _figures(n: int, elapsed: float, client: float, brk: float) -> dict[str, float]:
    return {
        "msgs_per_s": n / elapsed,
        "client_cpu_us_per_msg": client / n * 1e6,
        "broker_cpu_us_per_msg": brk / n * 1e6,
        "client_cpu_pct": client / elapsed * 100,
        "broker_cpu_pct": brk / elapsed * 100,
    }


async def _sliding(p: Producer, broker: BrokerProcess, body: bytes, duration: float, window: int,
                   profile: _Profiler | None = None) -> dict[str, float]:
    """``window`` send_async calls kept in flight for ``duration`` s (after a warm-up)."""
    loop = asyncio.get_running_loop()
    msg = Message(TOPIC, body, tags="A")
    state = {"n": 0, "open": True, "inflight": 0}
    drained = loop.create_future()
    errors: list[BaseException] = []

    def on_done(fut: asyncio.Future[Any]) -> None:
        state["n"] += 1
        state["inflight"] -= 1
        exc = fut.exception()
        if exc is not None and not errors:
            errors.append(exc)
        if state["open"]:
            state["inflight"] += 1
            p.send_async(msg).add_done_callback(on_done)
        elif not state["inflight"] and not drained.done():
            drained.set_result(None)

    for _ in range(window):
        state["inflight"] += 1
        p.send_async(msg).add_done_callback(on_done)
    await asyncio.sleep(duration * 0.2)  # warm-up: routes, connections, broker caches
    n0, c0, b0, t0 = state["n"], _cpu(), broker.cpu_seconds(), time.perf_counter()
    await asyncio.sleep(duration)
    n, elapsed = state["n"] - n0, time.perf_counter() - t0
    client, brk = _cpu() - c0, broker.cpu_seconds() - b0
    state["open"] = False
    await drained
    if profile is not None:
        profile.stop()
    if errors:
        raise errors[0]
    return _figures(n, elapsed, client, brk)


async def _window_phase(broker: BrokerProcess, body: bytes, duration: float, window: int, group: str,
                        profile: _Profiler | None, **options: Any) -> dict[str, float]:
    async with Producer(group, namesrv_addr=broker.namesrv, **options) as p:
        await p.send(Message(TOPIC, body))
        return await _sliding(p, broker, body, duration, window, profile)


async def _batch_phase(broker: BrokerProcess, duration: float, size: int, inflight: int,
                       profile: _Profiler | None) -> dict[str, float]:
    async with Producer("BenchProducerBatch", namesrv_addr=broker.namesrv) as p:
        batch = [Message(TOPIC, BODY, tags="A") for _ in range(size)]
        await p.send_batch(batch)
        deadline = time.perf_counter() + duration * 0.2
        while time.perf_counter() < deadline:
            await asyncio.gather(*(p.send_batch_async(batch) for _ in range(inflight)))
        n = 0
        c0, b0, t0 = _cpu(), broker.cpu_seconds(), time.perf_counter()
        while time.perf_counter() < t0 + duration:
            await asyncio.gather(*(p.send_batch_async(batch) for _ in range(inflight)))
            n += size * inflight
        elapsed = time.perf_counter() - t0
        client, brk = _cpu() - c0, broker.cpu_seconds() - b0
        if profile is not None:
            profile.stop()
        return _figures(n, elapsed, client, brk)


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
    out = _figures(n, elapsed, client, brk)
    out.update(p50_ms=latencies[n // 2] * 1000, p99_ms=latencies[min(n - 1, int(n * 0.99))] * 1000)
    return out


def _repeat(name: str, label: str, repeat: int, one: Callable[[bool], dict[str, float]]) -> dict[str, float]:
    """Best and median of ``repeat`` windows, with the load average around them."""
    load0 = os.getloadavg()[0]
    runs = [one(i == repeat - 1) for i in range(repeat)]
    load1 = os.getloadavg()[0]
    best = max(runs, key=lambda r: r["msgs_per_s"])
    median = statistics.median(r["msgs_per_s"] for r in runs)
    print(f"{label}: best {best['msgs_per_s']:,.0f} msgs/s, median {median:,.0f} msgs/s; "
          f"client {best['client_cpu_us_per_msg']:.2f} us/msg ({best['client_cpu_pct']:.0f} %), "
          f"broker {best['broker_cpu_us_per_msg']:.2f} us/msg ({best['broker_cpu_pct']:.0f} %); "
          f"load {load0:.2f} -> {load1:.2f}", flush=True)
    out = {f"{name}_{k}": v for k, v in best.items()}
    out[f"{name}_median_msgs_per_s"] = median
    out[f"{name}_median_client_cpu_us_per_msg"] = statistics.median(r["client_cpu_us_per_msg"] for r in runs)
    out[f"{name}_median_broker_cpu_us_per_msg"] = statistics.median(r["broker_cpu_us_per_msg"] for r in runs)
    out[f"{name}_load1"] = max(load0, load1)
    return out


def run(
    duration: float = 3.0,
    repeat: int = 3,
    phases: tuple[str, ...] = PHASES,
    window: int = 500,
    batch_size: int = 100,
    batch_inflight: int = 8,
    profile_dir: Path | None = None,
) -> dict[str, float]:
    figures: dict[str, float] = {}
    loop = new_event_loop()

    def window_runner(broker: BrokerProcess, name: str, body: bytes, **options: Any
                      ) -> Callable[[bool], dict[str, float]]:
        def one(last: bool) -> dict[str, float]:
            prof = _Profiler(profile_dir, name, broker, duration) if last and profile_dir else None
            coro: Coroutine[Any, Any, dict[str, float]] = _window_phase(
                broker, body, duration, window, f"BenchProducer_{name}", prof, **options)
            return loop.run_until_complete(coro)
        return one

    try:
        with BrokerProcess(name="bench-producer") as broker:
            if "autobatch" in phases:
                figures |= _repeat("autobatch", f"send_async auto-batch on, window {window}", repeat,
                                   window_runner(broker, "autobatch", BODY))
            if "plain" in phases:
                figures |= _repeat("plain", f"send_async auto-batch off, window {window}", repeat,
                                   window_runner(broker, "plain", BODY, auto_batch=False))
            if "1k" in phases:
                figures |= _repeat("1k", f"send_async auto-batch on, 1 KiB, window {window}", repeat,
                                   window_runner(broker, "1k", BODY_1K))
            if "batch" in phases:
                def batch_one(last: bool) -> dict[str, float]:
                    prof = _Profiler(profile_dir, "batch", broker, duration) if last and profile_dir else None
                    return loop.run_until_complete(
                        _batch_phase(broker, duration, batch_size, batch_inflight, prof))
                figures |= _repeat("batch", f"send_batch of {batch_size}, {batch_inflight} in flight",
                                   repeat, batch_one)
            if "sync" in phases:
                def sync_one(last: bool) -> dict[str, float]:
                    result: list[dict[str, float]] = []
                    thread = threading.Thread(target=lambda: result.append(_sync_phase(broker, duration)))
                    thread.start()
                    thread.join()
                    return result[0]
                figures |= _repeat("sync", "sync facade, one send at a time", repeat, sync_one)
                print(f"  sync p50 {figures['sync_p50_ms']:.3f} ms, p99 {figures['sync_p99_ms']:.3f} ms")
        if "syncflush" in phases:
            with BrokerProcess("flushDiskType=SYNC_FLUSH", name="bench-producer-sync") as broker:
                figures |= _repeat("syncflush", f"SYNC_FLUSH, send_async auto-batch on, window {window}",
                                   repeat, window_runner(broker, "syncflush", BODY))
    finally:
        loop.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measured window")
    parser.add_argument("--repeat", type=int, default=3, help="windows per phase (best and median shown)")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--window", type=int, default=500, help="async sends in flight")
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy both sides in each phase's last window, raw stacks to DIR")
    parser.add_argument("--json", type=Path, default=None, help="append the figures here (default .bench/)")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    figures = run(args.duration, args.repeat, tuple(args.phases.split(",")), args.window,
                  profile_dir=args.profile)
    print(f"recorded in {record({'producer': figures}, args.json)}")


if __name__ == "__main__":
    main()
