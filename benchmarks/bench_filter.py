"""SQL92 filtered pull against unfiltered pull, through a real broker over TCP.

    .venv/bin/python -m benchmarks.bench_filter [--messages N] [--queues Q] [--max-nums M]

The broker (child process, enablePropertyFilter=true) holds a backlog of N messages (128 B bodies) whose
properties look like an order's: TAGS, region (eu/us/apac), amount (0..999), plus UNIQ_KEY and WAIT as a
Java producer sets them. Each queue is drained with PULL_MESSAGE, one pull in flight per queue, M messages
per pull (32: RocketMQ's maxTransferCountOnMessageInMemory), first with the TAG subscription `*`, then with
SQL92 expressions of falling selectivity. "delivered" counts the messages pulls returned, "scanned" the
backlog the broker walked through, both per second of wall time; "per broker CPU s" divides the delivered
messages by the CPU time the broker process used instead, which a shared, loaded machine disturbs far less.
The headline ratios are for the expression that matches every message (same answers as unfiltered, so the
difference is the filter's cost). By default the client only counts records, so the broker is the
bottleneck; --decode makes the client decode every message into MessageExt as a consumer does, which shows
what a consuming application sees. Best of --repeat passes; prints figures and never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from benchmarks._cluster import _CLK_TCK, child_server
from benchmarks.bench_pull import count_records

TOPIC = "BenchFilter"
GROUP = "BenchFilterGroup"
BODY = b"x" * 128
REGIONS = ("eu", "us", "apac")
# (label, expression type, expression): everything, then narrower.
SUBSCRIPTIONS = (
    ("unfiltered (TAG *)", "TAG", "*"),
    ("SQL92, matches all", "SQL92", "amount >= 0 AND region IS NOT NULL"),
    ("SQL92, 1/3 match", "SQL92", "region = 'eu'"),
    ("SQL92, ~1/15 match", "SQL92", "region IN ('eu', 'us') AND amount BETWEEN 100 AND 199"),
)


def _broker_main(data_dir: str, queues: int, messages: int, conn: Connection) -> None:
    import logging

    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    run_loop(_serve(data_dir, queues, messages, conn))


async def _serve(data_dir: str, queues: int, messages: int, conn: Connection) -> None:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.topic_manager import new_topic_config
    from rocketq.codec.message import UniqIdGenerator, encode_properties
    from rocketq.config import BrokerConfig
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig
    from rocketq.store.model import MessageBatchToStore

    ctl = BrokerController(BrokerConfig(broker_name="bench-filter", enable_property_filter=True),
                           MessageStoreConfig(store_path_root_dir=data_dir),
                           RemotingServerConfig(listen_port=0))
    await ctl.start()
    ctl.topic_manager.update_topic_config(new_topic_config(TOPIC, queues, queues))
    ids = UniqIdGenerator()
    per_queue = messages // queues
    chunk = 1000
    i = 0
    for q in range(queues):
        for start in range(0, per_queue, chunk):
            items = []
            for _ in range(min(chunk, per_queue - start)):
                props = {"TAGS": "Order", "region": REGIONS[i % 3], "amount": str(i * 7 % 1000),
                         "UNIQ_KEY": ids.next_id(), "WAIT": "true"}
                items.append((0, BODY, encode_properties(props), 0, ()))
                i += 1
            now = int(time.time() * 1000)
            ctl.store.append_messages(MessageBatchToStore(TOPIC, q, items, born_timestamp=now,
                                                          born_host=("127.0.0.1", 5555)))
    conn.send(ctl.address)
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    await ctl.shutdown()


def _pull_cmd(queue_id: int, offset: int, max_nums: int, expression_type: str, expression: str) -> Any:
    from rocketq.codec.codes import RequestCode
    from rocketq.codec.command import RemotingCommand

    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subVersion": "0", "subscription": expression, "expressionType": expression_type})


def _decoded(body: Any) -> int:
    from rocketq.codec.message import decode_messages

    data = b"".join(body) if isinstance(body, list | tuple) else bytes(body)
    return len(decode_messages(data))


async def _drain_queue(client: Any, addr: str, queue_id: int, per_queue: int, max_nums: int,
                       expression_type: str, expression: str, decode: bool = False) -> int:
    offset = msgs = 0
    while offset < per_queue:
        cmd = _pull_cmd(queue_id, offset, max_nums, expression_type, expression)
        resp = await client.invoke(addr, cmd, 30.0)
        if resp.code not in (0, 12):  # SUCCESS, PULL_RETRY_IMMEDIATELY (nothing matched in the scanned part)
            raise RuntimeError(f"pull failed: {resp.code} {resp.remark}")
        if resp.code == 0:
            msgs += _decoded(resp.body) if decode else count_records(resp.body)
        offset = int(resp.ext_fields["nextBeginOffset"])
    return msgs


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


async def _drain(addr: str, broker_pid: int, queues: int, per_queue: int, max_nums: int, expression_type: str,
                 expression: str, decode: bool) -> tuple[float, float, float]:
    from rocketq.remoting import RemotingClient

    client = RemotingClient()
    try:
        warm = min(per_queue, 20 * max_nums)
        await _drain_queue(client, addr, 0, warm, max_nums, expression_type, expression)
        cpu0 = _cpu_seconds(broker_pid)
        t0 = time.perf_counter()
        counts = await asyncio.gather(*(_drain_queue(client, addr, q, per_queue, max_nums, expression_type,
                                                     expression, decode) for q in range(queues)))
        dt = time.perf_counter() - t0
        cpu = _cpu_seconds(broker_pid) - cpu0
    finally:
        await client.close()
    return sum(counts) / dt, queues * per_queue / dt, sum(counts) / max(cpu, 1e-9)


async def _client_main(addr: str, broker_pid: int, queues: int, messages: int, max_nums: int,
                       repeat: int, decode: bool) -> dict[str, float]:
    per_queue = messages // queues
    figures: dict[str, float] = {}
    for label, expression_type, expression in SUBSCRIPTIONS:
        runs = [await _drain(addr, broker_pid, queues, per_queue, max_nums, expression_type, expression,
                             decode) for _ in range(repeat)]
        delivered, scanned, per_cpu = (max(r[k] for r in runs) for k in range(3))
        figures[f"{label} delivered"] = delivered
        figures[f"{label} scanned"] = scanned
        figures[f"{label} per broker CPU s"] = per_cpu
        print(f"{label:<20} {expression!r:<58} delivered {delivered:>9,.0f}/s  scanned {scanned:>9,.0f}/s  "
              f"delivered per broker CPU s {per_cpu:>9,.0f}")
    base, full = SUBSCRIPTIONS[0][0], SUBSCRIPTIONS[1][0]
    wall = figures[f"{full} delivered"] / figures[f"{base} delivered"]
    cpu = figures[f"{full} per broker CPU s"] / figures[f"{base} per broker CPU s"]
    figures["filtered_over_unfiltered"] = wall
    figures["filtered_over_unfiltered_broker_cpu"] = cpu
    print(f"filtered (matches all) / unfiltered: {wall:.0%} by wall time, {cpu:.0%} by broker CPU "
          f"({max_nums}/pull, {queues} queues, {messages:,} msgs, "
          f"client {'decodes' if decode else 'counts'}; target >= 50%)")
    return figures


def run(messages: int = 400_000, queues: int = 8, max_nums: int = 32, repeat: int = 3,
        decode: bool = False) -> dict[str, float]:
    from rocketq.remoting.loop import run as run_loop

    with child_server(_broker_main, queues, messages, prefix="rocketq-bench-filter-") as (addr, pid):
        return run_loop(_client_main(addr, pid, queues, messages, max_nums, repeat, decode))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--max-nums", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3, help="passes per figure (the best is shown)")
    ap.add_argument("--decode", action="store_true", help="decode every message in the client, as a consumer")
    args = ap.parse_args(argv)
    print(f"bench_filter: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    run(args.messages, args.queues, args.max_nums, args.repeat, args.decode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
