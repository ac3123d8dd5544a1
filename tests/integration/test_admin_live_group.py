"""`rocketq admin` commands about running consumers, against a real `rocketq up`: resetOffsetByTime
moving a live push consumer back (RESET_CONSUMER_CLIENT_OFFSET), getConsumerStatus
(GET_CONSUMER_STATUS_FROM_CLIENT through the broker), queryMsgById -g -d (CONSUME_MESSAGE_DIRECTLY),
and statsAll row for row as mqadmin's StatsAllSubCommand: every topic but %RETRY%/%DLQ% (system ones
as NO_CONSUMER rows, BenchmarkTest included), OutMsg24Hour counting only what a group got by consuming
(nothing for a group whose offsets were cloned)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, eventually, module_cluster, unique_name

import rocketq
from rocketq import ConsumeOrderlyStatus, ConsumeStatus, Message
from rocketq.client._sync import run_sync

pytestmark = [pytest.mark.timeout(120)]

CLUSTER = "DefaultCluster"
N = 10


cluster = module_cluster("admin-live", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)


def _topic_and_clients(
    cluster: Cluster, admin: AdminRun, prefix: str
) -> tuple[str, str, rocketq.Producer, rocketq.PushConsumer]:
    """A new two-queue topic, a started producer and a (not started) push consumer of a new group."""
    topic, group = unique_name(prefix), unique_name("cg")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    producer = rocketq.Producer(unique_name("pg"), namesrv_addr=cluster.namesrv)
    producer.start()
    consumer = rocketq.PushConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        instance_name=unique_name("i"),
    )
    return topic, group, producer, consumer


def test_reset_by_time_moves_a_live_consumer_back(cluster: Cluster, admin: AdminRun) -> None:
    topic, group, producer, consumer = _topic_and_clients(cluster, admin, "ResetLive")
    first: list[bytes] = []
    again: list[bytes] = []
    replaying = threading.Event()
    release = threading.Event()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        for m in msgs:
            if replaying.is_set():
                again.append(m.body)
                # Hold the replay so the offsets cannot move past the reset while we look at them.
                release.wait(60)
            else:
                first.append(m.body)
        return ConsumeStatus.CONSUME_SUCCESS

    sent = [producer.send(Message(topic, b"reset-%d" % i)) for i in range(N)]
    bodies = sorted(b"reset-%d" % i for i in range(N))
    try:
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        consumer.start()
        eventually(lambda: len(first) >= N, timeout=30)
        run_sync(consumer.aio.persist_consumer_offset())
        eventually(lambda: admin.json("consumerProgress", "-g", group)["diffTotal"] == 0, timeout=30)

        replaying.set()
        reset = admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
        assert {r["offset"] for r in reset["offsets"]} == {0}
        # The running consumer starts over from the reset offsets...
        eventually(lambda: sorted(again) == bodies, timeout=40)
        # ...and does not put its old offsets back: nothing of the replay is committed yet.
        run_sync(consumer.aio.persist_consumer_offset())
        assert admin.json("consumerProgress", "-g", group)["diffTotal"] == N
        assert sorted(first) == bodies

        release.set()
        run_sync(consumer.aio.persist_consumer_offset())
        eventually(lambda: admin.json("consumerProgress", "-g", group)["diffTotal"] == 0, timeout=30)

        client_id = admin.json("consumerConnection", "-g", group)["connectionSet"][0]["clientId"]
        status = eventually(lambda: admin.json("getConsumerStatus", "-g", group, "-t", topic))
        assert list(status) == [client_id]
        assert sum(q["offset"] for q in status[client_id]) == N
        assert admin.json("getConsumerStatus", "-g", group, "-t", topic, "-i", client_id) == status

        msg_id = sent[0].offset_msg_id
        assert msg_id
        out = admin.json("queryMsgById", "-i", msg_id, "-g", group, "-d", client_id)
        assert out["consumeResult"]["consumeResult"] == "CR_SUCCESS"
        assert out["consumeResult"]["order"] is False
        assert again.count(b"reset-0") == 2
    finally:
        release.set()
        consumer.shutdown()
        producer.shutdown()


def test_reset_reaches_an_orderly_consumer(cluster: Cluster, admin: AdminRun) -> None:
    topic, group, producer, consumer = _topic_and_clients(cluster, admin, "ResetOrder")
    seen: list[bytes] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    sent = [producer.send(Message(topic, b"order-%d" % i)) for i in range(N)]
    try:
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener, orderly=True)
        consumer.start()
        eventually(lambda: len(seen) >= N, timeout=30)
        run_sync(consumer.aio.persist_consumer_offset())
        eventually(lambda: admin.json("consumerProgress", "-g", group)["diffTotal"] == 0, timeout=30)

        admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
        eventually(lambda: len(seen) >= 2 * N, timeout=40)
        assert sorted(seen[N:]) == sorted(seen[:N])
        run_sync(consumer.aio.persist_consumer_offset())
        eventually(lambda: admin.json("consumerProgress", "-g", group)["diffTotal"] == 0, timeout=30)

        client_id = admin.json("consumerConnection", "-g", group)["connectionSet"][0]["clientId"]
        msg_id = sent[-1].offset_msg_id
        assert msg_id
        result = admin.json("queryMsgById", "-i", msg_id, "-g", group, "-d", client_id)["consumeResult"]
        assert (result["consumeResult"], result["order"]) == ("CR_SUCCESS", True)
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_stats_all_rows_match_mqadmin(cluster: Cluster, admin: AdminRun) -> None:
    topic, group, producer, consumer = _topic_and_clients(cluster, admin, "StatsAll")
    producer.shutdown()
    clone, idle = unique_name("clone"), unique_name("StatsIdle")
    admin.json("updateTopic", "-t", idle, "-c", CLUSTER)
    eventually(lambda: admin.json("topicRoute", "-t", idle))
    for i in range(4):
        admin.json("sendMessage", "-t", topic, "-p", f"s{i}", "-i", str(i % 2))
    # What `rocketq bench` sends to (auto-created here: rocketq's broker does not pre-create it).
    admin.json("sendMessage", "-t", "BenchmarkTest", "-p", "b")

    got: list[Any] = []
    consumer.subscribe(topic, "*")

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    consumer.start()
    try:
        eventually(lambda: len(got) >= 4, timeout=30)
        run_sync(consumer.aio.persist_consumer_offset())
        eventually(lambda: admin.json("consumerProgress", "-g", group)["diffTotal"] == 0, timeout=30)
    finally:
        consumer.shutdown()
    admin.json("cloneGroupOffset", "-s", group, "-d", clone, "-t", topic, "-o", "true")

    rows = admin.json("statsAll", "-t", topic)
    by_group = {r["consumerGroup"]: r for r in rows}
    assert set(by_group) == {group, clone}
    assert (by_group[group]["inMsg24Hour"], by_group[group]["outMsg24Hour"]) == (4, 4)
    # The clone has the same offsets but never pulled a message.
    assert (by_group[clone]["accumulation"], by_group[clone]["outMsg24Hour"]) == (0, 0)
    assert not by_group[clone]["noConsumer"]

    everything = admin.json("statsAll")
    listed = {r["topic"] for r in everything}
    topics = set(admin.json("topicList"))
    assert listed == {t for t in topics if not t.startswith(("%RETRY%", "%DLQ%"))}
    assert {"TBW102", "BenchmarkTest", idle} <= listed
    no_consumer = {r["topic"]: r for r in everything if r["noConsumer"]}
    assert no_consumer["TBW102"]["outMsg24Hour"] is None and no_consumer[idle]["inMsg24Hour"] == 0

    active = {(r["topic"], r["consumerGroup"]) for r in admin.json("statsAll", "-a")}
    assert (topic, group) in active and (topic, clone) in active  # the topic had puts today
    assert idle not in {t for t, _ in active}

    code, out, _ = admin.raw("statsAll", "-t", idle)
    assert code == 0 and "NO_CONSUMER" in out
