"""Request-reply round trips against a real broker, with the replier in another process.

    .venv/bin/python -m benchmarks request
    .venv/bin/python benchmarks/bench_request.py [--requests 2000] [--phases sync,aio]

A ``rocketq up`` and a replier (examples/request_reply.py --serve: a push consumer answering
through its own producer) run as processes; this process sends ``--requests`` requests one after
the other and measures each round trip: request sent, stored, pulled by the replier (long poll
wake-up), reply sent, pushed back by the broker (target p50 <= 2 ms). Phases: ``sync`` is the
blocking ``rocketq.Producer.request``; ``aio`` is ``await rocketq.aio.Producer.request``.
Prints p50/p99 and the commit measured; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rocketq
import rocketq.aio
from benchmarks._cluster import BrokerProcess
from benchmarks._record import commit
from rocketq import Message

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "request_reply.py"
TOPIC = "BenchRequest"


def _percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": s[len(s) // 2] * 1000, "p99_ms": s[min(len(s) - 1, int(len(s) * 0.99))] * 1000,
            "max_ms": s[-1] * 1000}


def _start_replier(namesrv: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        args = [sys.executable, str(EXAMPLE), "--serve", "--namesrv", namesrv, "--topic", TOPIC,
                "--group", "BenchReplier"]
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while b"REPLIER READY" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the replier did not start:\n{log.read_text('utf-8', 'replace')[-3000:]}")
        time.sleep(0.05)
    return proc


def _warm_sync(p: rocketq.Producer) -> None:
    deadline = time.monotonic() + 60
    while True:  # the first requests wait for the replier's queue assignment
        try:
            p.request(Message(TOPIC, b"warm"), timeout=3)
            break
        except rocketq.RequestTimeout:
            if time.monotonic() > deadline:
                raise
    for _ in range(200):
        p.request(Message(TOPIC, b"warm"), timeout=10)


def _sync_phase(namesrv: str, n: int) -> list[float]:
    samples = []
    with rocketq.Producer("BenchRequester", namesrv_addr=namesrv) as p:
        _warm_sync(p)
        for i in range(n):
            msg = Message(TOPIC, b"%d" % i)
            t0 = time.perf_counter()
            p.request(msg, timeout=10)
            samples.append(time.perf_counter() - t0)
    return samples


async def _aio_phase(namesrv: str, n: int) -> list[float]:
    samples = []
    async with rocketq.aio.Producer("BenchRequesterAio", namesrv_addr=namesrv) as p:
        for _ in range(200):
            await p.request(Message(TOPIC, b"warm"), timeout=30)
        for i in range(n):
            msg = Message(TOPIC, b"%d" % i)
            t0 = time.perf_counter()
            await p.request(msg, timeout=10)
            samples.append(time.perf_counter() - t0)
    return samples


def run(requests: int = 2000, phases: tuple[str, ...] = ("sync", "aio")) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    print(f"request-reply: {requests} sequential requests per phase, commit={commit()}")
    with BrokerProcess(name="request") as broker:
        replier = _start_replier(broker.namesrv, broker.data_dir / "replier.log")
        try:
            for phase in phases:
                if phase == "sync":
                    samples = _sync_phase(broker.namesrv, requests)
                else:
                    samples = asyncio.run(_aio_phase(broker.namesrv, requests))
                pct = _percentiles(samples)
                print(f"  {phase:>4}: p50 {pct['p50_ms']:.3f} ms  p99 {pct['p99_ms']:.3f} ms  "
                      f"max {pct['max_ms']:.3f} ms  ({len(samples)} round trips)")
                figures.update({f"{phase} {k}": v for k, v in pct.items()})
        finally:
            replier.terminate()
            try:
                replier.wait(30)
            except subprocess.TimeoutExpired:
                replier.kill()
                replier.wait()
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--phases", default="sync,aio")
    args = ap.parse_args(argv)
    run(args.requests, tuple(p for p in args.phases.split(",") if p))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
