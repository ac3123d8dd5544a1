"""`rocketq admin` group commands against a real `rocketq up` and real clients: updateSubGroup,
deleteSubGroup, consumerProgress (lag per queue, going down while a consumer runs), consumerConnection,
consumerStatus, producerConnection, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset."""

from __future__ import annotations

from typing import Any

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, eventually, module_cluster, unique_name

import rocketq
from rocketq import ConsumeStatus, Message
from rocketq.client._sync import run_sync

pytestmark = [pytest.mark.timeout(90)]

CLUSTER = "DefaultCluster"


cluster = module_cluster("admin-group", *SMALL_STORE, also_as_4_9=True)


def _lag(progress: dict[str, Any]) -> dict[int, int]:
    return {q["queueId"]: q["diff"] for q in progress["queues"]}


def test_subscription_group_update_and_delete(cluster: Cluster, admin: AdminRun) -> None:
    group = unique_name("AdmG")
    out = admin.json("updateSubGroup", "-g", group, "-c", CLUSTER, "-r", "3", "-o", "true", "-q", "2")
    assert out["brokers"] == [cluster.broker]
    cfg = out["config"]
    assert (cfg["groupName"], cfg["retryMaxTimes"], cfg["consumeMessageOrderly"], cfg["retryQueueNums"]) == (
        group,
        3,
        True,
        2,
    )
    with rocketq.admin.SyncAdminClient(cluster.namesrv) as a:  # type: ignore[attr-defined]
        stored = a.examine_subscription_group_config(cluster.broker, group)
        assert stored.retry_max_times == 3 and stored.consume_message_orderly
        deleted = admin.json("deleteSubGroup", "-g", group, "-b", cluster.broker, "-r", "true")
        assert deleted == {"group": group, "brokers": [cluster.broker], "removeOffset": True}
        with pytest.raises(rocketq.ServerError):
            a.examine_subscription_group_config(cluster.broker, group)


def test_offsets_reset_skip_and_clone_for_an_offline_group(cluster: Cluster, admin: AdminRun) -> None:
    topic, group, clone = unique_name("AdmOff"), unique_name("og"), unique_name("og_clone")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    for i in range(6):
        admin.json("sendMessage", "-t", topic, "-p", f"m{i}", "-i", str(i % 2))

    reset = admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    assert {(r["queueId"], r["offset"]) for r in reset["offsets"]} == {(0, 0), (1, 0)}
    progress = admin.json("consumerProgress", "-g", group)
    assert _lag(progress) == {0: 3, 1: 3} and progress["diffTotal"] == 6
    assert {q["brokerOffset"] for q in progress["queues"]} == {3}

    skipped = admin.json("skipAccumulatedMessage", "-g", group, "-t", topic)
    assert {(r["queueId"], r["offset"]) for r in skipped["offsets"]} == {(0, 3), (1, 3)}
    assert _lag(admin.json("consumerProgress", "-g", group, "-t", topic)) == {0: 0, 1: 0}

    # One queue to an exact offset; then a rollback-only reset leaves the other queue alone.
    one = admin.json(
        "resetOffsetByTime", "-g", group, "-t", topic, "-s", "now", "-b", cluster.broker, "-q", "0", "-o", "1"
    )
    assert [(r["queueId"], r["offset"]) for r in one["offsets"]] == [(0, 1)]
    assert _lag(admin.json("consumerProgress", "-g", group)) == {0: 2, 1: 0}

    cloned = admin.json("cloneGroupOffset", "-s", group, "-d", clone, "-t", topic)
    assert cloned["brokers"] == [cluster.broker]
    assert _lag(admin.json("consumerProgress", "-g", clone)) == {0: 2, 1: 0}

    groups = {r["group"]: r for r in admin.json("consumerProgress")}
    assert groups[group]["diffTotal"] == 2 and groups[group]["count"] == 0

    stats = admin.json("brokerConsumeStats", "-b", cluster.broker)
    mine = [q for q in stats["queues"] if q["group"] == group]
    assert sorted((q["queueId"], q["diff"]) for q in mine) == [(0, 2), (1, 0)]
    assert "-q/--queue needs -b" in admin.fails(
        "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", "-q", "0", code=2
    )
    assert "not a time" in admin.fails(
        "resetOffsetByTime", "-g", group, "-t", topic, "-s", "yesterday", code=2
    )


def test_progress_connections_and_status_with_live_clients(cluster: Cluster, admin: AdminRun) -> None:
    topic, group, pgroup = unique_name("AdmLive"), unique_name("cg"), unique_name("pg")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    producer = rocketq.Producer(pgroup, namesrv_addr=cluster.namesrv)
    producer.start()
    consumer = rocketq.PushConsumer(
        group,
        namesrv_addr=cluster.namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        instance_name=unique_name("i"),
    )
    got: list[Any] = []
    try:
        for i in range(20):
            producer.send(Message(topic, b"live-%d" % i))
        # A producer announces itself with its 30 s heartbeat; do not wait for it.
        run_sync(producer.aio.instance.send_heartbeat_to_all_brokers())
        conns = admin.json("producerConnection", "-g", pgroup, "-t", topic)
        assert len(conns["connectionSet"]) == 1 and conns["connectionSet"][0]["language"] == "PYTHON"
        (instance,) = admin.json("producer", "-b", cluster.broker)[pgroup]
        client_id = conns["connectionSet"][0]["clientId"]
        assert (instance["clientId"], instance["language"]) == (client_id, "PYTHON")

        admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
        admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
        assert admin.json("consumerProgress", "-g", group)["diffTotal"] == 20

        consumer.subscribe(topic, "*")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer.register_listener(listener)
        consumer.start()
        eventually(lambda: len(got) >= 20, timeout=20)
        # A consumer's first offset persist comes 10 s after start (RocketMQ's schedule); ask for it now.
        run_sync(consumer.aio.persist_consumer_offset())
        eventually(lambda: admin.json("consumerProgress", "-g", group)["diffTotal"] == 0, timeout=20)

        cc = admin.json("consumerConnection", "-g", group)
        assert len(cc["connectionSet"]) == 1 and topic in cc["subscriptionTable"]
        assert cc["consumeType"] == "CONSUME_PASSIVELY" and cc["messageModel"] == "CLUSTERING"
        client_id = cc["connectionSet"][0]["clientId"]

        status = admin.json("consumerStatus", "-g", group, "-i", client_id)
        assert status["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert any(s["topic"] == topic for s in status["subscriptionSet"])
        everyone = admin.json("consumerStatus", "-g", group)
        assert list(everyone) == [client_id]
        groups = {r["group"]: r for r in admin.json("consumerProgress")}
        assert groups[group]["count"] == 1 and groups[group]["consumeType"] == "CONSUME_PASSIVELY"
    finally:
        consumer.shutdown()
        producer.shutdown()
    assert "not online" in admin.fails("consumerConnection", "-g", unique_name("nobody")).lower()


async def test_config_lookups_use_5x_codes_only_with_a_broker_announcing_5x(cluster: Cluster) -> None:
    from rocketq.admin import AdminClient

    async with AdminClient(cluster.namesrv) as a:
        as_4_9 = (await a.get_broker_config(cluster.broker))["compatibilityMode"] == "4.9"
        codes: list[int] = []
        invoke = a._remoting.invoke  # type: ignore[union-attr]

        async def recording(addr: str, request: Any, timeout: float) -> Any:
            codes.append(request.code)
            return await invoke(addr, request, timeout)

        a._remoting.invoke = recording  # type: ignore[union-attr, method-assign]
        group = unique_name("cfg")
        await a.create_and_update_subscription_group_config(
            cluster.broker, rocketq.codec.bodies.SubscriptionGroupConfig(group_name=group))  # type: ignore[attr-defined]
        as_4x = (await a.examine_topic_config(cluster.broker, "TBW102"),
                 await a.examine_subscription_group_config(cluster.broker, group))
        assert codes[1:] == [21, 201]  # our broker announces V4_9_4: the whole tables, as 4.x's mqadmin
        versions = a.api.broker_versions
        versions[cluster.broker] = 413  # as if the broker had announced V5_0_0 ...
        if as_4_9:
            # ... which a 4.9 broker never does: it refuses the 5.x code, as the mode is meant to
            with pytest.raises(rocketq.errors.RequestCodeNotSupported):  # type: ignore[attr-defined]
                await a.examine_topic_config(cluster.broker, "TBW102")
            return
        topic_5x = await a.examine_topic_config(cluster.broker, "TBW102")
        assert versions[cluster.broker] == 401  # ... until its next answer says otherwise
        versions[cluster.broker] = 413
        group_5x = await a.examine_subscription_group_config(cluster.broker, group)
        assert codes[3:] == [351, 352] and (topic_5x, group_5x) == as_4x
        with pytest.raises(rocketq.errors.TopicNotExist):  # type: ignore[attr-defined]
            await a.examine_topic_config(cluster.broker, unique_name("none"))


def test_get_consumer_config(cluster: Cluster, admin: AdminRun) -> None:
    group = unique_name("cfg")
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER, "-r", "7")
    (row,) = admin.json("getConsumerConfig", "-g", group)
    config = row["config"]
    assert (row["clusterName"], config["groupName"], config["retryMaxTimes"]) == (CLUSTER, group, 7)
    assert "no broker" in admin.fails("getConsumerConfig", "-g", unique_name("none"))
