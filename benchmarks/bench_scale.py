"""Scale shape: does a message cost more as the backlog grows, or with 1,000 topics x 8 queues?

    .venv/bin/python benchmarks/bench_scale.py [--sizes 1,2,4] [--topics 1000] [--seconds 10]
    .venv/bin/python benchmarks/bench_scale.py --sizes 1,10,25,50 --topics 0   # the long backlog run

Backlog (the store in this process, as the broker drives it): 128 B messages, each with a UNIQ_KEY
(so the index grows too), 8 queues, are appended in batches of 100 until the backlog reaches each
size in ``--sizes`` (millions). At each size it times a fixed slice: appending the next 200k
(commit log + consume queues + index, i.e. produce), and reading 200k back in 32-message pulls
(the broker's read for a PULL) at the head of the backlog (oldest files) and at its tail. A store
whose per-message cost grows with the backlog shows falling rates and rising CPU per message along
the rows. The disk used is printed per row. The fill stops by itself before a size whose
estimated disk use would leave less than ``--min-free-gb`` free, or once ``--max-minutes`` have
gone by; the store is removed afterwards.

Topics (a real `rocketq up`): the broker's idle CPU with its default topics, then after creating
``--topics`` topics of 8 queues, each over ``--seconds``; and the broker CPU per message of 100k
sends (aio producer, 256 in flight) to one topic, then round-robin over all the created topics:
once with the producer's automatic batching (its default; round-robin over 8,000 queues leaves
nothing to gather, one topic's 8 queues batch well) and once with it off (plain single sends, the
like-for-like comparison), with the broker's page faults per message (/proc/PID/stat minflt).
``--topics 0`` skips this part.

Store alone (``--store-topics N``; off by default): the CPU per message of 200k single sends in
runs of 32 (`MessageStore.append_many`, as one read of a pipelining producer arrives), index
drained included, to one topic and round-robin over N topics x 8 queues, without and with a
UNIQ_KEY; best and median of 3. No network: what the store adds per message with many topics.

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
    from benchmarks._record import record
except ImportError:  # run as benchmarks/<this>.py, whose folder is sys.path[0]
    from _cluster import BrokerProcess  # type: ignore[no-redef]
    from _record import record  # type: ignore[no-redef]

from rocketq.codec.message import UniqIdGenerator, encode_properties
from rocketq.store import MessageBatchToStore, MessageStore, MessageStoreConfig, SingleEntry

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


def _room_for(root: str, rows: list[dict[str, float]], target: int, min_free_gb: float) -> bool:
    """Whether filling to `target` messages leaves `min_free_gb` free, at the disk use per
    message seen so far (1 KiB a message before the first row)."""
    per_msg = rows[-1]["disk_mib"] * 2**20 / rows[-1]["backlog_msgs"] if rows else 1024.0
    have = rows[-1]["backlog_msgs"] if rows else 0.0
    free = shutil.disk_usage(root).free
    return free - (target - have) * per_msg >= min_free_gb * 2**30


def backlog(sizes_m: list[float], root: str, min_free_gb: float = 10.0,
            max_minutes: float = 60.0) -> list[dict[str, float]]:
    store = MessageStore(MessageStoreConfig(store_path_root_dir=root))
    store.load()
    topic = "BenchScale"
    fill = _Filler(store, topic)
    rows: list[dict[str, float]] = []
    deadline = time.monotonic() + max_minutes * 60
    try:
        for size_m in sizes_m:
            target = int(size_m * 1_000_000)
            if not _room_for(root, rows, target, min_free_gb):
                print(f"stop before {size_m:g}M: it would leave less than {min_free_gb:g} GB free",
                      flush=True)
                break
            if time.monotonic() > deadline:
                print(f"stop before {size_m:g}M: past --max-minutes {max_minutes:g}", flush=True)
                break
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


async def _send(namesrv: str, topics: list[str], n: int, auto_batch: bool, window: int = 256) -> None:
    """`n` sends round-robin over `topics` with `window` in flight (n = 0: only the warm-up)."""
    from rocketq.client.message import Message
    from rocketq.client.producer import Producer

    producer = Producer(f"bench_scale_{os.getpid()}", namesrv_addr=namesrv, send_msg_timeout=30_000,
                        auto_batch=auto_batch)
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


def _minflt(pid: int) -> int:
    """Minor page faults of process `pid` so far (/proc/PID/stat field 10)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])
    except (OSError, ValueError, IndexError):
        return 0


def _send_cost(broker: BrokerProcess, topics: list[str], n: int, auto_batch: bool
               ) -> tuple[float, float, float, float]:
    """(msgs/s, broker CPU us per message, broker minor faults per message) of `n` sends
    round-robin over `topics`, and the broker CPU seconds per queue of the warm-up that came
    first (each queue's first message the first time)."""
    c = broker.cpu_seconds()
    asyncio.run(_send(broker.namesrv, topics, 0, auto_batch))
    warm = (broker.cpu_seconds() - c) / (len(topics) * QUEUES)
    c, f, t = broker.cpu_seconds(), _minflt(broker.pid), time.perf_counter()
    asyncio.run(_send(broker.namesrv, topics, n, auto_batch))
    wall = time.perf_counter() - t
    # the second run's warm-up touches only queues that exist: its cost is in the figure, small
    return n / wall, (broker.cpu_seconds() - c) / n * 1e6, (_minflt(broker.pid) - f) / n, warm


def topics(count: int, seconds: float, sends: int = 100_000) -> dict[str, float]:
    figures: dict[str, float] = {}
    with BrokerProcess(name="bench-scale") as broker:
        time.sleep(3.0)  # start-up work is not idle cost
        figures["idle_cpu_pct_default_topics"] = _idle(broker, seconds)
        one = ["BenchScaleOne"]
        asyncio.run(_create_topics(broker.broker, one))
        names = [f"BenchScale{i:04d}" for i in range(count)]
        t = time.perf_counter()
        asyncio.run(_create_topics(broker.broker, names))
        figures["create_topics_s"] = time.perf_counter() - t
        time.sleep(3.0)  # the registration with the name server that the creations triggered
        figures[f"idle_cpu_pct_{count}_topics"] = _idle(broker, seconds)
        for auto_batch in (True, False):
            mode = "auto_batch" if auto_batch else "single"
            for label, targets in (("1_topic", one), (f"{count}_topics", names)):
                rate, us, flt, warm = _send_cost(broker, targets, sends, auto_batch)
                if auto_batch and targets is names:
                    figures["first_message_per_queue_broker_cpu_ms"] = warm * 1e3
                figures.update({f"send_{mode}_{label}_msgs_per_s": rate,
                                f"send_{mode}_{label}_broker_cpu_us_per_msg": us,
                                f"send_{mode}_{label}_broker_minflt_per_msg": flt})
                print(f"{sends:,} sends ({mode}, 256 in flight) to {label.replace('_', ' ')}: {rate:,.0f}/s, "
                      f"broker {us:.2f} us/msg, {flt:.3f} minor faults/msg | load {_load()}", flush=True)
        figures[f"idle_cpu_pct_{count}_topics_after_sends"] = _idle(broker, seconds)
    print(f"created {count} topics x {QUEUES} queues in {figures['create_topics_s']:.1f} s; each queue's "
          f"first message cost the broker {figures['first_message_per_queue_broker_cpu_ms']:.2f} ms of CPU")
    idle_n = figures[f"idle_cpu_pct_{count}_topics"]
    print(f"broker idle CPU: {figures['idle_cpu_pct_default_topics']:.2f} % of a core with its default "
          f"topics, {idle_n:.2f} % with {count} topics, "
          f"{figures[f'idle_cpu_pct_{count}_topics_after_sends']:.2f} % after the sends "
          f"({seconds:.0f} s each)")
    return figures


RUN = 32  # single sends one read of a pipelining producer delivers
STORE_SENDS = 200_000


def _entries(topic_names: list[str], n: int, keyed: bool, ids: UniqIdGenerator) -> list[SingleEntry]:
    """`n` single sends round-robin over the topics, then over each topic's queues."""
    out: list[SingleEntry] = []
    for i in range(n):
        uid = ids.next_id()
        props = encode_properties({"UNIQ_KEY": uid, "WAIT": "true"} if keyed else {"WAIT": "true"})
        out.append(SingleEntry(topic_names[i % len(topic_names)], i // len(topic_names) % QUEUES, BODY,
                               0, props, 0, (uid,) if keyed else (), 0, 1, ("127.0.0.1", 5555), 0))
    return out


def _store_round(count: int, keyed: bool) -> float:
    """CPU µs per message of STORE_SENDS single sends in runs of RUN, index drained included,
    after every queue has its first message (creating the files is not what is timed)."""
    root = tempfile.mkdtemp(prefix="rocketq-bench-scale-")
    try:
        store = MessageStore(MessageStoreConfig(store_path_root_dir=root))
        store.load()
        names = [f"ScaleStore{i:04d}" for i in range(count)]
        ids = UniqIdGenerator()
        cpu = 0.0
        for batch in (_entries(names, count * QUEUES, keyed, ids), _entries(names, STORE_SENDS, keyed, ids)):
            c = time.process_time()
            for k in range(0, len(batch), RUN):
                store.append_many(batch[k:k + RUN])
            store.drain_index()
            cpu = time.process_time() - c  # the second batch's is the one kept
        store.close()
        return cpu / STORE_SENDS * 1e6
    finally:
        shutil.rmtree(root, ignore_errors=True)


def store_topics(count: int) -> dict[str, float]:
    """The store alone (no network): what a message of one topic and of `count` topics costs,
    without and with a UNIQ_KEY, best and median of 3."""
    figures: dict[str, float] = {}
    for n in (1, count):
        for keyed in (False, True):
            rounds = sorted(_store_round(n, keyed) for _ in range(3))
            name = f"store_{n}_topics_{'keyed' if keyed else 'unkeyed'}_cpu_us_per_msg"
            figures[name], figures[name.replace("_cpu_", "_median_cpu_")] = rounds[0], rounds[1]
            print(f"store alone, runs of {RUN} single sends to {n} topics, "
                  f"{'keyed' if keyed else 'unkeyed'}: best {rounds[0]:.2f} / median {rounds[1]:.2f} "
                  f"us/msg | load {_load()}")
    return figures


def run(
    sizes_m: list[float] | None = None, topic_count: int = 1000, seconds: float = 10.0,
    min_free_gb: float = 10.0, max_minutes: float = 60.0, store_topic_count: int = 0,
) -> dict[str, float]:
    sizes_m = [1, 2, 4] if sizes_m is None else sizes_m
    print(f"load average {_load()}")
    figures: dict[str, float] = {}
    if sizes_m:
        root = tempfile.mkdtemp(prefix="rocketq-bench-scale-")
        try:
            for row in backlog(sizes_m, root, min_free_gb, max_minutes):
                tag = f"{row['backlog_msgs'] / 1e6:g}M"
                figures.update({f"backlog_{tag}_{k}": v for k, v in row.items() if k != "backlog_msgs"})
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if topic_count:
        figures.update(topics(topic_count, seconds))
    if store_topic_count:
        figures.update(store_topics(store_topic_count))
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="1,2,4", help="backlog sizes in millions of messages (default 1,2,4)")
    ap.add_argument("--topics", type=int, default=1000, help="topics of 8 queues to create (default 1000)")
    ap.add_argument("--seconds", type=float, default=10.0, help="each idle CPU window (default 10)")
    ap.add_argument("--min-free-gb", type=float, default=10.0,
                    help="stop filling before a size that would leave less disk free (default 10)")
    ap.add_argument("--max-minutes", type=float, default=60.0,
                    help="stop filling past this many minutes (default 60)")
    ap.add_argument("--store-topics", type=int, default=0,
                    help="also time the store alone over this many topics against one (default 0: skip)")
    args = ap.parse_args(argv)
    print(f"bench_scale: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    sizes = [float(x) for x in args.sizes.split(",") if x]
    figures = run(sizes, args.topics, args.seconds, args.min_free_gb, args.max_minutes, args.store_topics)
    print(f"recorded in {record({'scale': figures})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
