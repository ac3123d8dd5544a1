"""End-to-end pipeline: order events -> windowed aggregates -> Parquet + a result topic.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo &       # name server 127.0.0.1:9876
    .venv/bin/python examples/order_pipeline.py [--namesrv 127.0.0.1:9876] [--orders 5000]

1. a producer (the rocketq SDK) sends JSON order events to topic ``OrderEvents``;
2. a Structured Streaming query reads them (format "rocketq"), parses the JSON body, and sums
   the amount per product over 1-minute event-time windows with a 2-minute watermark;
3. the totals go to Parquet files (append mode: a window is written once the watermark passes
   it) and, through a second query, to topic ``OrderTotals`` with the product as the queue key;
4. a push consumer prints what arrives on ``OrderTotals``.

Both queries run with trigger(availableNow=True), so the example ends by itself; run it again
and it continues from its checkpoints (only windows closed by the new events are added).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the usual alias

from rocketq import ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from rocketq.spark import register

ORDERS = "OrderEvents"
TOTALS = "OrderTotals"
ORDER_SCHEMA = "order_id string, product string, amount double, ts timestamp"
PRODUCTS = ("apple", "pear", "plum", "fig")


@dataclass(frozen=True, slots=True)
class Outcome:
    parquet_rows: int  # windowed totals written to Parquet by this run
    printed: tuple[str, ...]  # the totals the push consumer received, as printed


def produce(namesrv: str, count: int, *, topic: str = ORDERS, seed: int | None = None) -> None:
    rng = random.Random(seed)
    producer = Producer("order-producers", namesrv_addr=namesrv)
    producer.start()
    try:
        base = time.time() - 600  # ten minutes of event time, so windows close under the watermark
        batch: list[Message] = []
        for i in range(count):
            event = {"order_id": f"o{i}", "product": rng.choice(PRODUCTS),
                     "amount": round(rng.uniform(1, 50), 2),
                     "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base + i * 600 / count))}
            batch.append(Message(topic, json.dumps(event).encode(), tags="order", keys=event["order_id"]))
            if len(batch) == 200:
                producer.send_batch(batch)
                batch = []
        if batch:
            producer.send_batch(batch)
    finally:
        producer.shutdown()


class TotalsPrinter:
    """A push consumer printing every total that arrives; ``wait_quiet`` returns once nothing new
    came for a while (the sink has finished, so the topic is complete)."""

    def __init__(self, namesrv: str, topic: str = TOTALS, group: str = "order-total-printers") -> None:
        self.printed: list[str] = []
        self._lock = threading.Lock()
        self._last = time.monotonic()
        # A new group reads the topic from its first message; a rerun resumes after the last one.
        self.consumer = PushConsumer(group, namesrv_addr=namesrv,
                                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        self.consumer.subscribe(topic, "*")
        self.consumer.register_listener(self._on_messages)

    def _on_messages(self, msgs: list[Any], ctx: Any) -> ConsumeStatus:
        for m in msgs:
            line = f"[{TOTALS}] {m.keys}: {m.body.decode()}"
            with self._lock:  # listener threads run concurrently: one whole line at a time
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
                self.printed.append(line)
                self._last = time.monotonic()
        return ConsumeStatus.CONSUME_SUCCESS

    def start(self) -> None:
        self.consumer.start()

    def wait_quiet(self, expected: int, quiet: float = 3.0, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                done = len(self.printed) >= expected and time.monotonic() - self._last >= quiet
            if done:
                return
            time.sleep(0.2)

    def shutdown(self) -> None:
        self.consumer.shutdown()


def pipeline(spark: SparkSession, namesrv: str, work: str, *, orders_topic: str = ORDERS,
             totals_topic: str = TOTALS) -> int:
    """Run both availableNow queries to the end; returns the Parquet rows this run added."""
    parquet_dir = os.path.join(work, "totals")
    before = _count_parquet(spark, parquet_dir)
    orders = (spark.readStream.format("rocketq").option("namesrv", namesrv).option("topic", orders_topic)
              .option("startingOffsets", "earliest").option("subExpression", "order").load()
              .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*"))
    totals = (orders.withWatermark("ts", "2 minutes")
              .groupBy(F.window("ts", "1 minute"), "product")
              .agg(F.round(F.sum("amount"), 2).alias("total"), F.count("*").alias("orders")))

    to_parquet = (totals.writeStream.format("parquet").outputMode("append")
                  .option("path", parquet_dir)
                  .option("checkpointLocation", os.path.join(work, "chk-parquet"))
                  .trigger(availableNow=True).start())
    to_topic = (totals.select(F.to_json(F.struct("window", "product", "total", "orders")).alias("body"),
                              F.col("product").alias("keys"), F.lit("total").alias("tags"))
                .writeStream.format("rocketq").option("namesrv", namesrv).option("topic", totals_topic)
                .option("queueKeyColumn", "keys").outputMode("append")
                .option("checkpointLocation", os.path.join(work, "chk-topic"))
                .trigger(availableNow=True).start())
    to_parquet.awaitTermination()
    to_topic.awaitTermination()
    for q in (to_parquet, to_topic):
        if q.exception() is not None:
            raise RuntimeError(f"query {q.name or q.id} failed: {q.exception()}")
    return _count_parquet(spark, parquet_dir) - before


def _count_parquet(spark: SparkSession, path: str) -> int:
    if not os.path.isdir(os.path.join(path, "_spark_metadata")):
        return 0
    return spark.read.parquet(path).count()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    ap.add_argument("--orders", type=int, default=5000)
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "rocketq-order-pipeline"))
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    produce(args.namesrv, args.orders)
    print(f"sent {args.orders} order events to {ORDERS}", flush=True)

    spark = (SparkSession.builder.master("local[2]").appName("order-pipeline")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    try:
        added = pipeline(spark, args.namesrv, args.work_dir)
        spark.read.parquet(os.path.join(args.work_dir, "totals")).orderBy("window", "product").show(
            10, truncate=False)
        print(f"{added} new windowed totals in {os.path.join(args.work_dir, 'totals')}", flush=True)
    finally:
        spark.stop()

    # The sink has sent everything: the consumer prints the topic (from where its group left off).
    printer = TotalsPrinter(args.namesrv)
    printer.start()
    try:
        printer.wait_quiet(added)
    finally:
        printer.shutdown()
    print(f"{len(printer.printed)} totals printed from {TOTALS}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
