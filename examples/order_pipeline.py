"""End-to-end pipeline: order events -> windowed aggregates -> Parquet + a result topic.

    rocketq up &                                   # name server 127.0.0.1:9876, broker 10911
    .venv/bin/python examples/order_pipeline.py [--namesrv 127.0.0.1:9876] [--orders 5000]

1. a producer (the rocketq SDK) sends JSON order events to topic ``OrderEvents``;
2. a Structured Streaming query reads them (format "rocketq"), parses the JSON body, and sums
   the amount per product over 1-minute event-time windows with a 2-minute watermark;
3. the totals go to Parquet files (append mode: a window is written once the watermark passes
   it) and, through a second query, to topic ``OrderTotals`` with the product as the queue key;
4. a push consumer prints what arrives on ``OrderTotals``.

Both queries run with trigger(availableNow=True), so the example ends by itself; run it again
and it continues from its checkpoints.
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

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the usual alias

from rocketq import ConsumeStatus, Message, Producer, PushConsumer
from rocketq.spark import register

ORDERS = "OrderEvents"
TOTALS = "OrderTotals"
ORDER_SCHEMA = "order_id string, product string, amount double, ts timestamp"


def produce(namesrv: str, count: int) -> None:
    producer = Producer("order-producers", namesrv_addr=namesrv)
    producer.start()
    try:
        base = time.time() - 600  # ten minutes of event time, so windows close under the watermark
        for i in range(count):
            event = {"order_id": f"o{i}", "product": random.choice(["apple", "pear", "plum", "fig"]),
                     "amount": round(random.uniform(1, 50), 2),
                     "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base + i * 600 / count))}
            producer.send(Message(ORDERS, json.dumps(event).encode(), tags="order", keys=event["order_id"]))
    finally:
        producer.shutdown()


def print_totals(namesrv: str, stop: threading.Event) -> None:
    consumer = PushConsumer("order-total-printers", namesrv_addr=namesrv)
    consumer.subscribe(TOTALS, "*")

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        for m in msgs:
            print(f"[{TOTALS}] {m.keys}: {m.body.decode()}")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    consumer.start()
    stop.wait()
    consumer.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"))
    ap.add_argument("--orders", type=int, default=5000)
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "rocketq-order-pipeline"))
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    produce(args.namesrv, args.orders)

    spark = (SparkSession.builder.master("local[2]").appName("order-pipeline")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)

    orders = (spark.readStream.format("rocketq").option("namesrv", args.namesrv).option("topic", ORDERS)
              .option("startingOffsets", "earliest").option("subExpression", "order").load()
              .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*"))
    totals = (orders.withWatermark("ts", "2 minutes")
              .groupBy(F.window("ts", "1 minute"), "product")
              .agg(F.sum("amount").alias("total"), F.count("*").alias("orders")))

    work = args.work_dir
    to_parquet = (totals.writeStream.format("parquet").outputMode("append")
                  .option("path", os.path.join(work, "totals"))
                  .option("checkpointLocation", os.path.join(work, "chk-parquet"))
                  .trigger(availableNow=True).start())
    to_topic = (totals.select(F.to_json(F.struct("window", "product", "total", "orders")).alias("body"),
                              F.col("product").alias("keys"), F.lit("total").alias("tags"))
                .writeStream.format("rocketq").option("namesrv", args.namesrv).option("topic", TOTALS)
                .option("queueKeyColumn", "keys").outputMode("append")
                .option("checkpointLocation", os.path.join(work, "chk-topic"))
                .trigger(availableNow=True).start())

    stop = threading.Event()
    printer = threading.Thread(target=print_totals, args=(args.namesrv, stop), daemon=True)
    printer.start()
    to_parquet.awaitTermination()
    to_topic.awaitTermination()
    spark.read.parquet(os.path.join(work, "totals")).orderBy("window", "product").show(truncate=False)
    time.sleep(5)  # let the consumer print what the sink sent
    stop.set()
    printer.join(10)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
