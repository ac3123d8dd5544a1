"""Transactional messages against a real broker: send + commit throughput, and what the check-back
of pending half messages costs the broker.

    .venv/bin/python -m benchmarks transaction
    .venv/bin/python benchmarks/bench_transaction.py [--messages 20000] [--pending 10000] [--window 512]

``commit``: a ``rocketq.aio.TransactionProducer`` keeps ``--window`` transactions in flight; each
one is a half message sent and stored, a local transaction that returns COMMIT_MESSAGE, and a
one-way END_TRANSACTION that stores the message in its topic and writes the op record (target
>= 20k msgs/s). The figure counts a transaction once its message is visible in the topic.

``plain``: the same number of plain sends (``rocketq.aio.Producer.send_async``, same window) on
the same broker, so the figure above can be read against what the shared machine allows now.

``check``: ``--pending`` half messages whose local transaction answered UNKNOW, then one check
pass (started by lowering transactionCheckInterval over the wire): the broker re-appends each
one, asks the producer, and commits it on the answer. The figure is the broker process's CPU
seconds from the pass's start until every message is visible (target <= 5 s for 10k).

Prints the figures and the commit measured; never asserts times.
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

from benchmarks._cluster import BrokerProcess
from benchmarks._record import commit as _commit
from rocketq.admin import AdminClient
from rocketq.aio import LocalTransactionState, Message, Producer, TransactionProducer
from rocketq.remoting.loop import run as run_loop

QUEUES = 8


class _Listener:
    def __init__(self, execute: LocalTransactionState) -> None:
        self.execute = execute
        self.checks = 0

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return self.execute

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        self.checks += 1
        return LocalTransactionState.COMMIT_MESSAGE


async def _visible(admin: AdminClient, topic: str) -> int:
    stats = await admin.examine_topic_stats(topic)
    return sum(o.max_offset - o.min_offset for o in stats.offset_table.values())


async def _wait_visible(admin: AdminClient, topic: str, n: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        seen = await _visible(admin, topic)
        if seen >= n:
            break
        await asyncio.sleep(0.05)
    return seen


async def _send_all(p: TransactionProducer, topic: str, n: int, window: int) -> None:
    sem = asyncio.Semaphore(window)
    body = b"x" * 128

    async def one() -> None:
        try:
            await p.send_message_in_transaction(Message(topic, body))
        finally:
            sem.release()

    tasks = []
    for _ in range(n):
        await sem.acquire()
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)


async def _commit_phase(broker: BrokerProcess, n: int, window: int) -> dict[str, float]:
    topic = "BenchTxCommit"
    async with AdminClient(broker.namesrv) as admin:
        await admin.create_topic(topic, broker_addr=broker.broker, read_queue_nums=QUEUES,
                                 write_queue_nums=QUEUES)
        async with TransactionProducer("BenchTxCommitPG", namesrv_addr=broker.namesrv,
                                       listener=_Listener(LocalTransactionState.COMMIT_MESSAGE)) as p:
            await _send_all(p, topic, min(2000, n), window)  # warm up: routes, connections, code paths
            base = await _wait_visible(admin, topic, min(2000, n), 60)
            cpu0, pcpu0, t0 = broker.cpu_seconds(), time.process_time(), time.perf_counter()
            await _send_all(p, topic, n, window)
            seen = await _wait_visible(admin, topic, base + n, 120) - base
            elapsed = time.perf_counter() - t0
            cpu, pcpu = broker.cpu_seconds() - cpu0, time.process_time() - pcpu0
    rate = seen / elapsed
    print(f"  commit: {seen:,} of {n:,} transactions committed in {elapsed:.2f} s = {rate:,.0f} msgs/s  "
          f"(broker CPU {cpu:.2f} s, client CPU {pcpu:.2f} s, window {window})")
    return {"send+commit msgs/s": rate, "send+commit broker CPU s": round(cpu, 2),
            "send+commit client CPU s": round(pcpu, 2)}


async def _plain_phase(broker: BrokerProcess, n: int, window: int) -> dict[str, float]:
    """The same messages sent plainly on the same broker: the yardstick on a shared machine."""
    topic = "BenchTxPlain"
    body = b"x" * 128
    async with Producer("BenchTxPlainPG", namesrv_addr=broker.namesrv) as p:
        await p.send(Message(topic, body))
        t0 = time.perf_counter()
        for start in range(0, n, window):
            await asyncio.gather(*(p.send_async(Message(topic, body)) for _ in range(min(window, n - start))))
        elapsed = time.perf_counter() - t0
    print(f"  plain: {n:,} pipelined sends (no transaction) in {elapsed:.2f} s = {n / elapsed:,.0f} msgs/s")
    return {"plain send msgs/s (same run)": n / elapsed}


async def _check_phase(broker: BrokerProcess, n: int, window: int) -> dict[str, float]:
    topic = "BenchTxCheck"
    listener = _Listener(LocalTransactionState.UNKNOW)
    async with AdminClient(broker.namesrv) as admin:
        await admin.create_topic(topic, broker_addr=broker.broker, read_queue_nums=QUEUES,
                                 write_queue_nums=QUEUES)
        async with TransactionProducer("BenchTxCheckPG", namesrv_addr=broker.namesrv, listener=listener) as p:
            await _send_all(p, topic, n, window)
            await asyncio.sleep(1.2)  # older than transactionTimeOut (1 s)
            cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
            # a pass now: a new interval wakes the check service
            await admin.update_broker_config(broker.broker, {"transactionCheckInterval": "600000"})
            seen = await _wait_visible(admin, topic, n, 300)
            elapsed = time.perf_counter() - t0
            cpu = broker.cpu_seconds() - cpu0
    print(f"  check: {listener.checks:,} checks, {seen:,} of {n:,} pending half messages committed in "
          f"{elapsed:.2f} s; broker CPU {cpu:.2f} s")
    return {f"check-back of {n} pending: broker CPU s": round(cpu, 2), "check-back wall s": round(elapsed, 2)}


def run(messages: int = 20_000, pending: int = 10_000, window: int = 512) -> dict[str, Any]:
    print(f"transactions: {messages:,} send+commit, {pending:,} checked back, commit={_commit()}")
    figures: dict[str, Any] = {}
    with BrokerProcess("transactionTimeOut=1000", "transactionCheckInterval=3600000",
                       "mappedFileSizeCommitLog=268435456", name="transaction") as broker:
        figures.update(run_loop(_commit_phase(broker, messages, window)))
        figures.update(run_loop(_plain_phase(broker, messages, window)))
        figures.update(run_loop(_check_phase(broker, pending, window)))
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--window", type=int, default=512)
    args = ap.parse_args(argv)
    run(args.messages, args.pending, args.window)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
