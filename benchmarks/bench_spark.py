"""Spark connector benchmarks: batch read (broker and store directory), sink, micro-batch latency.

    .venv/bin/python benchmarks/bench_spark.py [--messages N] [--skip-stream]

A local[2] SparkSession reads N messages of 128 B bodies (count over all columns, so every
column is built), writes them back through the sink, and times a 1 s-trigger stream. Prints
figures and returns them from `run()`; never asserts times. The broker is started with larger
pull answers (maxTransferCountOnMessageInMemory / Bytes), the knob a Spark-fed cluster sets.

Besides wall-clock rates (best of 3), each figure comes with the CPU it cost: the Spark side
(JVM + Python workers, from /proc) and the broker, per message. On a shared machine the wall
clock moves with everyone else's load; the CPU per message does not, and
``2 cores / (CPU per message)`` is the rate the same work would reach on two idle cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._cluster import BrokerProcess
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import BatchItem, UniqIdGenerator, encode_batch_body, encode_properties
from rocketq.remoting import RemotingClient

BODY = os.urandom(128)
QUEUES = 4
_TCK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int, exclude: int = -1) -> float:
    """User + system CPU of ``root`` and its live descendants, plus what their reaped children
    used (Linux /proc), leaving out the subtree of ``exclude``: the Spark JVM and its Python
    workers when ``root`` is this process and ``exclude`` the broker."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw.rsplit(")", 1)[1].split()
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(x) for x in fields[11:15]) / _TCK
    total, todo = 0.0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid == exclude:
            continue
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def _spark():  # type: ignore[no-untyped-def]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketq.spark import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


async def _create_topic(broker: str, topic: str) -> None:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
           "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG"}
    async with RemotingClient() as client:
        r = await client.invoke(broker, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 10)
        assert r.code == 0, r


async def _seed(broker: str, topic: str, n: int, batch: int = 1000) -> None:
    gen = UniqIdGenerator()
    async with RemotingClient() as client:
        inflight: set[asyncio.Future[RemotingCommand]] = set()
        for i in range(0, n, batch):
            items = [BatchItem(0, BODY, encode_properties({"TAGS": "TagA", "KEYS": f"k{i + j}",
                                                           "UNIQ_KEY": gen.next_id()}))
                     for j in range(min(batch, n - i))]
            ext = {"a": "bench", "b": topic, "c": "TBW102", "d": "4", "e": str((i // batch) % QUEUES),
                   "f": "0", "g": str(int(time.time() * 1000)), "h": "0", "i": "", "m": "true"}
            req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(items))
            inflight.add(asyncio.ensure_future(client.invoke(broker, req, 30)))
            if len(inflight) >= 8:
                done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                for d in done:
                    assert d.result().code == 0
        for d in inflight:
            assert (await d).code == 0


def _wait_route(namesrv: str, topic: str) -> None:
    from rocketq.spark._broker import BrokerSession

    with BrokerSession(namesrv) as s:
        deadline = time.monotonic() + 40
        while not s.queues(topic) and time.monotonic() < deadline:
            time.sleep(0.3)


class _Meter:
    """Wall time and CPU (Spark side, broker) of one run."""

    def __init__(self, proc: BrokerProcess) -> None:
        self.proc = proc

    def __call__(self, fn: Callable[[], int]) -> tuple[int, float, float, float]:
        me, broker = os.getpid(), self.proc.pid
        spark0, broker0, t0 = tree_cpu_seconds(me, broker), self.proc.cpu_seconds(), time.perf_counter()
        n = fn()
        wall = time.perf_counter() - t0
        return n, wall, tree_cpu_seconds(me, broker) - spark0, self.proc.cpu_seconds() - broker0


def _report(results: dict[str, float], label: str, runs: list[tuple[int, float, float, float]]) -> None:
    n, wall, spark_cpu, broker_cpu = min(runs, key=lambda r: r[1])
    per_msg = (spark_cpu + broker_cpu) / n
    results[f"{label}_rows_per_s"] = n / wall
    results[f"{label}_cpu_us_per_row"] = per_msg * 1e6
    results[f"{label}_two_core_rows_per_s"] = 2 / per_msg
    print(f"{label}: {n / wall:,.0f} rows/s ({wall:.2f}s for {n}); CPU per row: Spark "
          f"{spark_cpu / n * 1e6:.2f} us + broker {broker_cpu / n * 1e6:.2f} us -> "
          f"{2 / per_msg:,.0f} rows/s on two idle cores", flush=True)


def run(messages: int = 1_000_000, stream: bool = True) -> dict[str, float]:
    results: dict[str, float] = {}
    with BrokerProcess("maxTransferCountOnMessageInMemory=2048",
                       "maxTransferBytesOnMessageInMemory=4194304",
                       "mappedFileSizeCommitLog=268435456", name="bench-spark") as proc:
        topic = "SparkBench"
        asyncio.run(_create_topic(proc.broker, topic))
        t0 = time.perf_counter()
        asyncio.run(_seed(proc.broker, topic, messages))
        print(f"seeded {messages} messages in {time.perf_counter() - t0:.1f}s", flush=True)
        spark = _spark()
        _wait_route(proc.namesrv, topic)
        meter = _Meter(proc)

        def reader(**opts: str):  # type: ignore[no-untyped-def]
            r = spark.read.format("rocketq").option("topic", topic)
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load()

        for label, opts in (("batch_read_broker", {"namesrv": proc.namesrv}),
                            ("batch_read_store", {"path": str(proc.data_dir / "data")})):
            reader(**opts).count()  # warm the JVM and the Python workers
            runs = [meter(lambda opts=opts: reader(**opts).count()) for _ in range(3)]  # type: ignore[misc]
            assert all(r[0] == messages for r in runs), (label, runs)
            _report(results, label, runs)

        out_topic = "SparkBenchOut"
        asyncio.run(_create_topic(proc.broker, out_topic))
        _wait_route(proc.namesrv, out_topic)
        # The sink's input costs Spark next to nothing (a cached DataFrame would cost the JVM
        # more to read back than the sink itself): 128 B bodies, distinct keys, one tag.
        from pyspark.sql import functions as F  # noqa: N812 - the usual alias

        serial = F.lpad(F.col("id").cast("string"), 8, "0").cast("binary")
        src = spark.range(messages, numPartitions=QUEUES).select(
            F.concat(F.lit(BODY[:120]), serial).alias("body"),
            F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"), F.lit("TagA").alias("tags"))

        def write(df=src, n: int = messages) -> int:  # type: ignore[no-untyped-def]
            (df.write.format("rocketq").option("namesrv", proc.namesrv).option("topic", out_topic)
             .mode("append").save())
            return n

        write(src.limit(20_000), 20_000)  # warm up the writer's Python workers
        _report(results, "sink", [meter(write) for _ in range(2)])
        if stream:
            results.update(_latency(spark, proc))
        spark.stop()
    return results


def _produce_forever(broker: str, topic: str, rate: int) -> None:
    """The stream benchmark's producer (its own process, as producers are): ``rate`` msgs/s in
    ten sends a second, until terminated."""
    async def go() -> None:
        per_tick = rate // 10
        next_tick = time.perf_counter()
        while True:
            await _seed(broker, topic, per_tick, batch=per_tick // 4)
            next_tick += 0.1
            await asyncio.sleep(max(0.0, next_tick - time.perf_counter()))
    asyncio.run(go())


def _latency(spark, proc: BrokerProcess, rate: int = 20_000, warmup: float = 10.0,  # type: ignore[no-untyped-def]
             seconds: float = 20.0) -> dict[str, float]:
    """Produce ``rate`` msgs/s while a 1 s-trigger query runs. Per micro-batch: the time from the
    store time of its oldest / average / newest message to the end of the batch (what a consumer
    of the query's output waits), and Spark's own trigger execution time. Batches that end in
    the first ``warmup`` seconds (JIT, Python workers starting) are left out."""
    import subprocess

    from pyspark.sql import functions as F  # noqa: N812 - the usual alias

    topic = "SparkBenchStream"
    asyncio.run(_create_topic(proc.broker, topic))
    _wait_route(proc.namesrv, topic)
    batches: list[tuple[float, float, float, float, int]] = []  # end, oldest, mean, newest lag; rows

    def sink(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        row = df.agg(F.min("store_timestamp").alias("lo"), F.max("store_timestamp").alias("hi"),
                     F.avg(F.col("store_timestamp").cast("double")).alias("mean"),
                     F.count("*").alias("n")).first()
        now = time.time()
        if row is not None and row.n:
            batches.append((now, now - row.lo.timestamp(), now - row.mean, now - row.hi.timestamp(), row.n))

    q = (spark.readStream.format("rocketq").option("namesrv", proc.namesrv).option("topic", topic).load()
         .writeStream.foreachBatch(sink).trigger(processingTime="1 second").start())
    producer = subprocess.Popen([sys.executable, __file__, "--produce", proc.broker, topic, str(rate)])
    started = time.time()
    try:
        time.sleep(warmup + seconds)
    finally:
        producer.terminate()
        producer.wait(10)
    # Let the query drain, then stop it while it is idle: stopping a foreachBatch query in the
    # middle of a batch makes Spark match a regular expression against the long Python
    # traceback of the interrupted function, and that match overflows the JVM stack
    # (StreamExecution.isInterruptionException, Spark 4.x).
    q.processAllAvailable()
    q.stop()
    window = (started + warmup, started + warmup + seconds)
    steady = [b for b in batches if window[0] <= b[0] <= window[1]]
    durations = sorted(p["durationMs"].get("triggerExecution", 0) / 1000 for p in q.recentProgress
                       if p.get("numInputRows"))
    oldest = sorted(b[1] for b in steady)
    rows = sum(b[4] for b in steady)
    mean = sum(b[2] * b[4] for b in steady) / rows if rows else float("nan")

    def p50(xs: list[float]) -> float:
        return xs[len(xs) // 2] if xs else float("nan")

    out = {
        "stream_batch_seconds_p50": p50(durations),
        "stream_latency_mean_seconds": mean,
        "stream_latency_oldest_p50_seconds": p50(oldest),
        "stream_latency_max_seconds": oldest[-1] if oldest else float("nan"),
        "stream_rows_per_s": rows / seconds,
    }
    print(f"stream @ {rate}/s, 1 s trigger, {len(steady)} batches in {seconds:.0f}s after warm-up "
          f"({rows / seconds:,.0f} rows/s): batch p50 {out['stream_batch_seconds_p50']:.2f}s; store -> "
          f"batch end: mean {mean:.2f}s, oldest message p50 {out['stream_latency_oldest_p50_seconds']:.2f}s, "
          f"max {out['stream_latency_max_seconds']:.2f}s", flush=True)
    return out


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--produce":
        _produce_forever(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        sys.exit(0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--skip-stream", action="store_true")
    a = ap.parse_args()
    run(a.messages, stream=not a.skip_stream)
