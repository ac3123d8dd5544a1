"""Spark connector benchmarks: batch read (broker and store directory), sink, micro-batch latency.

    .venv/bin/python benchmarks/bench_spark.py [--messages N]

A local[2] SparkSession reads N messages of 128 B bodies (count over all columns, so every
column is built), writes them back through the sink, and times a 1 s-trigger stream. Prints
figures and returns them from `run()`; never asserts times. The broker is started with larger
pull answers (maxTransferCountOnMessageInMemory / Bytes), the knob a Spark-fed cluster sets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
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


def _spark():  # type: ignore[no-untyped-def]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from rocketq.spark import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
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


def _wait_route(spark, namesrv: str, topic: str) -> None:  # type: ignore[no-untyped-def]
    from rocketq.spark._broker import BrokerSession

    with BrokerSession(namesrv) as s:
        deadline = time.monotonic() + 40
        while not s.queues(topic) and time.monotonic() < deadline:
            time.sleep(0.3)


def run(messages: int = 1_000_000) -> dict[str, float]:
    results: dict[str, float] = {}
    with BrokerProcess("maxTransferCountOnMessageInMemory=2048",
                       "maxTransferBytesOnMessageInMemory=4194304",
                       "mappedFileSizeCommitLog=268435456", name="bench-spark") as proc:
        topic = "SparkBench"
        asyncio.run(_create_topic(proc.broker, topic))
        t0 = time.perf_counter()
        asyncio.run(_seed(proc.broker, topic, messages))
        print(f"seeded {messages} messages in {time.perf_counter() - t0:.1f}s")
        spark = _spark()
        _wait_route(spark, proc.namesrv, topic)

        def reader(**opts: str):  # type: ignore[no-untyped-def]
            r = spark.read.format("rocketq").option("topic", topic)
            for k, v in opts.items():
                r = r.option(k, v)
            return r.load()

        for label, opts in (("broker", {"namesrv": proc.namesrv}),
                            ("store", {"path": str(proc.data_dir / "data")})):
            reader(**opts).count()  # warm the Python workers
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                n = reader(**opts).count()
                best = min(best, time.perf_counter() - t)
            assert n == messages, (label, n)
            results[f"batch_read_{label}_rows_per_s"] = messages / best
            print(f"batch read ({label}): {messages / best:,.0f} rows/s ({best:.2f}s for {messages})")

        out_topic = "SparkBenchOut"
        asyncio.run(_create_topic(proc.broker, out_topic))
        _wait_route(spark, proc.namesrv, out_topic)
        src = reader(path=str(proc.data_dir / "data")).select("body", "keys", "tags").cache()
        src.count()
        t = time.perf_counter()
        src.write.format("rocketq").option("namesrv", proc.namesrv).option("topic", out_topic).mode(
            "append").save()
        dt = time.perf_counter() - t
        results["sink_rows_per_s"] = messages / dt
        print(f"sink: {messages / dt:,.0f} rows/s ({dt:.2f}s)")
        src.unpersist()

        results.update(_latency(spark, proc))
        spark.stop()
    return results


def _latency(spark, proc: BrokerProcess, rate: int = 20_000, seconds: float = 12.0) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Produce ``rate`` msgs/s while a 1 s-trigger query runs; per-batch latency from the query
    progress (trigger execution time) and end-to-end from store time to the batch's end."""
    from pyspark.sql import functions as F  # noqa: N812 - the usual alias

    topic = "SparkBenchStream"
    asyncio.run(_create_topic(proc.broker, topic))
    _wait_route(spark, proc.namesrv, topic)
    lags: list[float] = []

    def sink(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        row = df.agg(F.max("store_timestamp").alias("m"), F.count("*").alias("n")).first()
        if row is not None and row.n:
            lags.append(time.time() - row.m.timestamp())

    q = (spark.readStream.format("rocketq").option("namesrv", proc.namesrv).option("topic", topic).load()
         .writeStream.foreachBatch(sink).trigger(processingTime="1 second").start())
    stop = threading.Event()

    def produce() -> None:
        async def go() -> None:
            per_tick = rate // 10
            while not stop.is_set():
                t = time.perf_counter()
                await _seed(proc.broker, topic, per_tick, batch=per_tick // 4)
                await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - t)))
        asyncio.run(go())

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    time.sleep(seconds)
    stop.set()
    th.join()
    q.stop()
    durations = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in q.recentProgress
                 if p.get("numInputRows")]
    steady = sorted(lags[2:]) or sorted(lags)
    out = {
        "stream_batch_seconds_p50": sorted(durations)[len(durations) // 2] if durations else float("nan"),
        "stream_lag_seconds_p50": steady[len(steady) // 2] if steady else float("nan"),
        "stream_lag_seconds_max": steady[-1] if steady else float("nan"),
    }
    print(f"stream @ {rate}/s, 1 s trigger: batch p50 {out['stream_batch_seconds_p50']:.2f}s, "
          f"store->batch-end lag p50 {out['stream_lag_seconds_p50']:.2f}s "
          f"max {out['stream_lag_seconds_max']:.2f}s")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    a = ap.parse_args()
    run(a.messages)
