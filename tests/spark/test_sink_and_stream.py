"""The sink round-trips keys/tags/properties; streaming reads resume exactly once from a checkpoint
and honour maxOffsetsPerTrigger."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F  # noqa: N812 - the usual alias
from tests.spark.conftest import make_topic, seed

pytestmark = pytest.mark.timeout(180)


def test_sink_round_trips_keys_tags_properties(spark, cluster):
    topic = make_topic(cluster)
    rows = [(f"b{i}".encode(), f"k{i}", "TA" if i % 2 else "TB", {"p": str(i), "q": "x"}, f"user{i % 5}")
            for i in range(3000)]
    df = spark.createDataFrame(rows, "body binary, keys string, tags string, properties map<string,string>, "
                                     "user string")
    (df.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
     .option("queueKeyColumn", "user").mode("append").save())
    back = spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).load()
    got = {bytes(r.body): r for r in back.collect()}
    assert len(got) == len(rows)
    queue_of_user: dict[str, int] = {}
    for body, keys, tags, props, user in rows:
        r = got[body]
        assert (r.keys, r.tags) == (keys, tags)
        assert r.properties["p"] == props["p"] and r.properties["q"] == "x"
        assert len(r.msg_id) == 32 and r.properties["UNIQ_KEY"] == r.msg_id
        # The same key always lands in the same queue.
        assert queue_of_user.setdefault(user, r.queue_id) == r.queue_id
    assert len(set(queue_of_user.values())) > 1


def test_streaming_available_now_exactly_once_across_restart(spark, cluster, tmp_path):
    topic = make_topic(cluster)
    first = seed(cluster, topic, [{"body": f"m{i}".encode(), "tags": "A"} for i in range(400)])
    out, chk = tmp_path / "out", tmp_path / "chk"

    def run(max_per_trigger: int | None = None) -> list:
        reader = (spark.readStream.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
                  .option("startingOffsets", "earliest"))
        if max_per_trigger is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
        q = (reader.load().select("queue_id", "queue_offset", F.col("body").cast("string").alias("b"))
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(chk))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        return q.recentProgress

    progress = run(max_per_trigger=150)
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sizes and max(sizes) <= 150 and sum(sizes) == 400
    second = seed(cluster, topic, [{"body": f"n{i}".encode(), "tags": "A"} for i in range(300)])
    run()
    got = spark.read.parquet(str(out)).collect()
    keys = [(r.queue_id, r.queue_offset) for r in got]
    assert len(keys) == len(set(keys)) == len(first) + len(second)
    assert sorted(r.b for r in got) == sorted(m["body"].decode() for m in first + second)
