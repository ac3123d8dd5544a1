"""`rocketq admin statsAll` against a real `rocketq up`, row for row as mqadmin's StatsAllSubCommand:
every topic but %RETRY%/%DLQ% (system ones as NO_CONSUMER rows, BenchmarkTest included), and
OutMsg24Hour counting only what a group got by consuming (nothing for a group whose offsets were
cloned)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.harness import Cluster, start_cluster, unique_name
from tests.unit.admin.support import SMALL_STORE, AdminRun, eventually

import rocketq
from rocketq import ConsumeStatus
from rocketq.client._sync import run_sync

pytestmark = [pytest.mark.timeout(120)]

CLUSTER = "DefaultCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("stats-all"), *SMALL_STORE)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def admin(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> AdminRun:
    return AdminRun(capsys, cluster.namesrv)


def test_stats_all_rows_match_mqadmin(cluster: Cluster, admin: AdminRun) -> None:
    topic, group, clone = unique_name("StatsAll"), unique_name("cg"), unique_name("clone")
    idle = unique_name("StatsIdle")
    for t in (topic, idle):
        admin.json("updateTopic", "-t", t, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic) and admin.json("topicRoute", "-t", idle))
    for i in range(4):
        admin.json("sendMessage", "-t", topic, "-p", f"s{i}", "-i", str(i % 2))
    # What `rocketq bench` sends to (auto-created here: rocketq's broker does not pre-create it).
    admin.json("sendMessage", "-t", "BenchmarkTest", "-p", "b")

    got: list[Any] = []
    consumer = rocketq.PushConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        instance_name=unique_name("i"),
    )
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
