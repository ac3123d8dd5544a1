"""Scale shape: does a message cost more as the backlog grows, or with 1,000 topics x 8 queues?

    .venv/bin/python benchmarks/bench_scale.py [--sizes 1,2,4] [--topics 1000] [--seconds 10]

Backlog (the store in this process, as the broker drives it): 128 B messages, each with a UNIQ_KEY
(so the index grows too), 8 queues, are appended in batches of 100 until the backlog reaches each
size in ``--sizes`` (millions). At each size it times a fixed slice: appending the next 200k
(commit log + consume queues + index, i.e. produce), and reading 200k back in 32-message pulls
(the broker's read for a PULL) at the head of the backlog (oldest files) and at its tail. A store
whose per-message cost grows with the backlog shows falling rates and rising CPU per message along
the rows. The disk used is printed per row.

Topics (a real `rocketq up`): the broker's idle CPU with its default topics, then after creating
``--topics`` topics of 8 queues, each over ``--seconds``; and the broker CPU per message of 100k
sends (aio producer, 256 in flight) to one topic, then round-robin over all the created topics.

On a shared machine the rates move with the load (printed); CPU per message is the steadier figure.
Prints a table and returns the figures from `run()`; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

try:
    from benchmarks._cluster import BrokerProcess
except ImportError:  # run as benchmarks/<this>.py, whose folder is sys.path[0]
    from _cluster import BrokerProcess  # type: ignore[no-redef]

from rocketq.codec.message import UniqIdGenerator, encode_properties
from rocketq.store import MessageBatchToStore, MessageStore, MessageStoreConfig

BODY = b"s" * 128
QUEUES = 8
SLICE = 200_000  # messages timed at each size (produce and each read)
BATCH = 100
PULL = 32


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _du_mib(path: str) -> float:
    try:
        out = subprocess.run(["du", "-sm", path], capture_output=True, text=True, check=True).stdout
        return float(out.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return float("nan")


class _Filler:
    """Appends batches of 100 keyed messages round-robin over the queues of one topic."""

    def __init__(self, store: MessageStore, topic: str) -> None:
        self.store = store
        self.topic = topic
        self.ids = UniqIdGenerator()
        self.count = 0

    def append(self, n: int) -> None:
        ids, store, topic = self.ids, self.store, self.topic
        for _ in range(n // BATCH):
            items = []
            for _ in range(BATCH):
                uid = ids.next_id()
                items.append((0, BODY, encode_properties({"UNIQ_KEY": uid, "WAIT": "true"}), 0, (uid,)))
            store.append_messages(MessageBatchToStore(topic, self.count // BATCH % QUEUES, items,
                                                      born_timestamp=1, born_host=("127.0.0.1", 5555)))
            self.count += BATCH
        store.drain_index()


def _read(store: MessageStore, topic: str, start_of: str, n: int) -> int:
    """Read about `n` messages in PULL-sized reads, spread over the queues, from each queue's head
    (``start_of='head'``) or from `n / QUEUES` before its end (``'tail'``)."""
    per_queue = n // QUEUES
    got = 0
    for q in range(QUEUES):
        lo = store.get_min_offset_in_queue(topic, q)
        hi = store.get_max_offset_in_queue(topic, q)
        off = lo if start_of == "head" else max(lo, hi - per_queue)
        end = min(hi, off + per_queue)
        while off < end:
            r = store.get_message(topic, q, off, PULL)
            if not r.message_count:
                break
            got += r.message_count
            off = r.next_begin_offset
    return got


def _timed(fn: Any, *args: Any) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, result) of fn(*args)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return time.perf_counter() - w, time.process_time() - c, out


def _row_line(row: dict[str, float]) -> str:
    reads = " | ".join(f"read {w} {row[f'drain_{w}_msgs_per_s']:>9,.0f}/s "
                       f"{row[f'drain_{w}_cpu_us_per_msg']:5.2f} us/msg" for w in ("head", "tail"))
    return (f"backlog {row['backlog_msgs'] / 1e6:5.1f}M | produce {row['produce_msgs_per_s']:>9,.0f}/s "
            f"{row['produce_cpu_us_per_msg']:5.2f} us/msg | {reads} | disk {row['disk_mib']:,.0f} MiB | "
            f"load {_load()}")


def backlog(sizes_m: list[float], root: str) -> list[dict[str, float]]:
    store = MessageStore(MessageStoreConfig(store_path_root_dir=root))
    store.load()
    topic = "BenchScale"
    fill = _Filler(store, topic)
    rows = []
    try:
        for size_m in sizes_m:
            target = int(size_m * 1_000_000)
            if fill.count < target - SLICE:
                fill.append(target - SLICE - fill.count)
            wall, cpu, _ = _timed(fill.append, SLICE)
            row = {"backlog_msgs": float(fill.count), "produce_msgs_per_s": SLICE / wall,
                   "produce_cpu_us_per_msg": cpu / SLICE * 1e6}
            for where in ("head", "tail"):
                wall, cpu, got = _timed(_read, store, topic, where, SLICE)
                row[f"drain_{where}_msgs_per_s"] = got / wall
                row[f"drain_{where}_cpu_us_per_msg"] = cpu / max(1, got) * 1e6
            row["disk_mib"] = _du_mib(root)
            rows.append(row)
            print(_row_line(row), flush=True)
    finally:
        store.close()
    return rows


# -- topics ------------------------------------------------------------------------------------------


async def _create_topics(broker: str, names: list[str]) -> None:
    from rocketq.codec.codes import RequestCode
    from rocketq.codec.command import RemotingCommand
    from rocketq.remoting.client import RemotingClient

    client = RemotingClient()
    try:
        for name in names:
            ext = {"topic": name, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                   "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG",
                   "topicSysFlag": "0", "order": "false"}
            request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
            r = await client.invoke(broker, request, 30)
            if r.code != 0:
                raise RuntimeError(f"create topic {name} failed: {r.code} {r.remark}")
    finally:
        await client.close()


async def _send(namesrv: str, topics: list[str], n: int, window: int = 256) -> None:
    """`n` sends round-robin over `topics` with `window` in flight (n = 0: only the warm-up)."""
    from rocketq.client.message import Message
    from rocketq.client.producer import Producer

    producer = Producer(f"bench_scale_{os.getpid()}", namesrv_addr=namesrv, send_msg_timeout=30_000)
    await producer.start()
    try:
        sem = asyncio.Semaphore(window)
        failed = 0

        def done(fut: asyncio.Future[Any]) -> None:
            nonlocal failed
            sem.release()
            if fut.cancelled() or fut.exception() is not None:
                failed += 1

        async def pump(msgs: list[Any], count: int) -> None:
            for i in range(count):
                await sem.acquire()
                producer.send_async(msgs[i % len(msgs)]).add_done_callback(done)
            for _ in range(window):
                await sem.acquire()
            for _ in range(window):
                sem.release()

        # One send per topic first (its route), then one per queue: routes, connections and each
        # queue's first consume-queue file stay out of the timed sends.
        for t in topics:
            await producer.send(Message(t, BODY))
        msgs = [Message(t, BODY) for t in topics]
        await pump(msgs, len(msgs) * QUEUES)
        if n:
            await pump(msgs, n)
        if failed:
            raise RuntimeError(f"{failed} sends failed")
    finally:
        await producer.shutdown()


def _idle(broker: BrokerProcess, seconds: float) -> float:
    c, t = broker.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (broker.cpu_seconds() - c) / (time.monotonic() - t)


def _send_cost(broker: BrokerProcess, topics: list[str], n: int) -> tuple[float, float, float]:
    """(msgs/s, broker CPU us per message) of `n` sends round-robin over `topics`, and the broker
    CPU seconds per queue of the warm-up that came first (each queue's first message)."""
    c, t = broker.cpu_seconds(), time.perf_counter()
    asyncio.run(_send(broker.namesrv, topics, 0))
    warm = (broker.cpu_seconds() - c) / (len(topics) * QUEUES)
    c, t = broker.cpu_seconds(), time.perf_counter()
    asyncio.run(_send(broker.namesrv, topics, n))
    wall = time.perf_counter() - t
    # the second run's warm-up touches only queues that exist: its cost is in the figure, small
    return n / wall, (broker.cpu_seconds() - c) / n * 1e6, warm


def topics(count: int, seconds: float, sends: int = 100_000) -> dict[str, float]:
    figures: dict[str, float] = {}
    with BrokerProcess(name="bench-scale") as broker:
        time.sleep(3.0)  # start-up work is not idle cost
        figures["idle_cpu_pct_default_topics"] = _idle(broker, seconds)
        one = ["BenchScaleOne"]
        asyncio.run(_create_topics(broker.broker, one))
        rate1, us1, _ = _send_cost(broker, one, sends)
        names = [f"BenchScale{i:04d}" for i in range(count)]
        t = time.perf_counter()
        asyncio.run(_create_topics(broker.broker, names))
        figures["create_topics_s"] = time.perf_counter() - t
        time.sleep(3.0)  # the registration with the name server that the creations triggered
        figures[f"idle_cpu_pct_{count}_topics"] = _idle(broker, seconds)
        rate_n, us_n, warm = _send_cost(broker, names, sends)
        figures["first_message_per_queue_broker_cpu_ms"] = warm * 1e3
        figures.update({"send_1_topic_msgs_per_s": rate1, "send_1_topic_broker_cpu_us_per_msg": us1,
                        f"send_{count}_topics_msgs_per_s": rate_n,
                        f"send_{count}_topics_broker_cpu_us_per_msg": us_n})
    print(f"created {count} topics x {QUEUES} queues in {figures['create_topics_s']:.1f} s; each queue's "
          f"first message cost the broker {figures['first_message_per_queue_broker_cpu_ms']:.2f} ms of CPU")
    idle_n = figures[f"idle_cpu_pct_{count}_topics"]
    print(f"broker idle CPU: {figures['idle_cpu_pct_default_topics']:.2f} % of a core with its default "
          f"topics, {idle_n:.2f} % with {count} topics ({seconds:.0f} s each)")
    print(f"{sends:,} sends, 256 in flight: 1 topic {rate1:,.0f}/s, broker {us1:.2f} us/msg | "
          f"round-robin over {count} topics {rate_n:,.0f}/s, broker {us_n:.2f} us/msg | load {_load()}")
    return figures


def run(
    sizes_m: list[float] | None = None, topic_count: int = 1000, seconds: float = 10.0
) -> dict[str, float]:
    sizes_m = sizes_m or [1, 2, 4]
    print(f"load average {_load()}")
    root = tempfile.mkdtemp(prefix="rocketq-bench-scale-")
    figures: dict[str, float] = {}
    try:
        for row in backlog(sizes_m, root):
            tag = f"{row['backlog_msgs'] / 1e6:g}M"
            figures.update({f"backlog_{tag}_{k}": v for k, v in row.items() if k != "backlog_msgs"})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures.update(topics(topic_count, seconds))
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="1,2,4", help="backlog sizes in millions of messages (default 1,2,4)")
    ap.add_argument("--topics", type=int, default=1000, help="topics of 8 queues to create (default 1000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="each idle CPU window (default 10)")
    args = ap.parse_args(argv)
    print(f"bench_scale: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    run([float(x) for x in args.sizes.split(",")], args.topics, args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
