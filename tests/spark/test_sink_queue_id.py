"""The sink's queue_id, delay_level and delivery_time columns (issue 15): each row goes to the queue
it names, delayed or timed rows go alone; a bad value or column type fails with one line naming it."""

from __future__ import annotations

import datetime
import time

import numpy as np
import pyarrow as pa
import pytest
from tests.spark.conftest import make_topic

from rocketq.spark._broker import QueueRef
from rocketq.spark.errors import SparkOptionError
from rocketq.spark.writer import chosen_queues, delay_levels, delivery_times, single_properties

pytestmark = pytest.mark.timeout(180)

ONE = [QueueRef("T", "broker-a", q) for q in range(4)]
TWO = [*ONE, *(QueueRef("T", "broker-b", q) for q in range(2))]


def test_chosen_queues_by_id_and_broker() -> None:
    ids = pa.array([3, None, 0], pa.int32())
    assert chosen_queues("T", ONE, ids, None).tolist() == [3, -1, 0]
    both = chosen_queues("T", TWO, pa.array([1, 1]), pa.array(["broker-b", "broker-a"]))
    assert both.tolist() == [5, 1]


def test_chosen_queues_refuses_what_names_no_queue() -> None:
    with pytest.raises(SparkOptionError, match=r"no writable queue 4 on broker 'broker-a'.*\[0, 1, 2, 3\]"):
        chosen_queues("T", ONE, pa.array([4]), None)
    with pytest.raises(SparkOptionError, match="on brokers broker-a, broker-b: give the row's broker"):
        chosen_queues("T", TWO, pa.array([0]), None)
    with pytest.raises(SparkOptionError, match="no writable queue 0 on broker 'broker-z'"):
        chosen_queues("T", TWO, pa.array([0]), pa.array(["broker-z"]))


def test_sink_sends_each_row_to_its_queue_id(spark, cluster):
    topic = make_topic(cluster, queues=4)
    rows = [(f"q{i}".encode(), i % 3 if i % 5 else None) for i in range(200)]
    df = spark.createDataFrame(rows, "body binary, queue_id int")
    df.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save()
    back = {bytes(r.body): r.queue_id
            for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
            .load().collect()}
    assert len(back) == len(rows)
    assert all(back[body] == qid for body, qid in rows if qid is not None)
    # a read DataFrame written back keeps each message's broker and queue
    copy = make_topic(cluster, queues=4)
    (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).load()
     .select("body", "broker", "queue_id")
     .write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", copy).mode("append").save())
    again = {bytes(r.body): r.queue_id
             for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", copy)
             .load().collect()}
    assert again == back


def test_sink_refuses_a_bad_queue_id_in_one_line(spark, cluster):
    topic = make_topic(cluster, queues=2)

    def write(df) -> None:
        (df.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
         .mode("append").save())

    bad = spark.createDataFrame([(b"x", 7)], "body binary, queue_id int")
    with pytest.raises(Exception, match="no writable queue 7"):
        write(bad)
    text = spark.createDataFrame([(b"x", "1")], "body binary, queue_id string")
    with pytest.raises(Exception, match="the queue_id column must be an integer"):
        write(text)


def test_sink_delays_rows_with_a_delay_level(spark, cluster):
    """A batch cannot carry a delay level: such rows go one by one, through SCHEDULE_TOPIC_XXXX."""
    topic = make_topic(cluster, queues=2)
    rows = [(f"d{i}".encode(), 1 if i % 4 == 0 else None, i % 2) for i in range(40)]
    (spark.createDataFrame(rows, "body binary, delay_level int, queue_id int")
     .write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save())
    deadline = time.monotonic() + 60
    while True:
        back = {bytes(r.body): r for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv)
                .option("topic", topic).load().collect()}
        if len(back) == len(rows) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(back) == {b for b, _, _ in rows}
    for body, level, qid in rows:
        r = back[body]
        assert r.queue_id == qid
        waited = (r.store_timestamp - r.born_timestamp).total_seconds()
        if level:  # level 1 is 1 s: re-put by the schedule service, which keeps REAL_TOPIC
            assert waited >= 0.9 and r.properties.get("REAL_TOPIC") == topic, (body, waited)
        else:
            assert "REAL_TOPIC" not in r.properties
    bad = spark.createDataFrame([(b"x", -1)], "body binary, delay_level int")
    with pytest.raises(Exception, match="a delay level is >= 1"):
        (bad.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
         .mode("append").save())


def test_single_properties_of_delayed_and_timed_rows() -> None:
    batch = pa.record_batch({
        "body": pa.array([b"a", b"b", b"c"]),
        "delivery_time": pa.array([None, 1_700_000_000_123_000, None], pa.timestamp("us", "UTC")),
        "delay_level": pa.array([None, None, 2], pa.int32()),
    })
    levels, times = delay_levels(batch), delivery_times(batch)
    assert times is not None and times.tolist() == [0, 1_700_000_000_123, 0]
    assert single_properties(levels, times, 3) == [None, "TIMER_DELIVER_MS\x011700000000123\x02",
                                                   "DELAY\x012\x02"]
    millis = pa.record_batch({"delivery_time": pa.array([5, None], pa.int64())})
    plain = delivery_times(millis)
    assert plain is not None and plain.tolist() == [5, 0]
    with pytest.raises(SparkOptionError, match="both a delay_level and a delivery_time"):
        single_properties(np.array([1]), np.array([5]), 1)
    with pytest.raises(SparkOptionError, match="after 1970"):
        delivery_times(pa.record_batch({"delivery_time": pa.array([-1], pa.int64())}))


def test_sink_sends_timer_messages_from_a_delivery_time(spark, cluster):
    """Rows with a delivery_time go alone through the timer wheel and reach the topic at that time."""
    topic = make_topic(cluster, queues=2)
    now = datetime.datetime.now(datetime.UTC)
    later = now + datetime.timedelta(seconds=2)
    rows = [(f"t{i}".encode(), later if i % 3 == 0 else None) for i in range(30)]
    (spark.createDataFrame(rows, "body binary, delivery_time timestamp")
     .write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic).mode("append").save())
    deadline = time.monotonic() + 60
    while True:
        back = {bytes(r.body): r for r in spark.read.format("rocketq").option("namesrv", cluster.namesrv)
                .option("topic", topic).load().collect()}
        if len(back) == len(rows) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(back) == {b for b, _ in rows}
    for body, when in rows:
        r = back[body]
        if when is not None:  # re-put by the timer service when due (1 s precision by default)
            waited = (r.store_timestamp - r.born_timestamp).total_seconds()
            assert waited >= 0.9 and "TIMER_DELIVER_MS" in r.properties, (body, waited)
        else:
            assert "TIMER_DELIVER_MS" not in r.properties
    bad = spark.createDataFrame([(b"x", "soon")], "body binary, delivery_time string")
    with pytest.raises(Exception, match="the delivery_time column must be a timestamp"):
        (bad.write.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
         .mode("append").save())
