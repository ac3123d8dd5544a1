"""`rocketq admin` topic commands against a real `rocketq up`: updateTopic, topicList, topicRoute,
topicClusterList, topicStatus, updateTopicPerm, deleteTopic (parsed from --json)."""

from __future__ import annotations

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, eventually, module_cluster, unique_name

pytestmark = [pytest.mark.timeout(60)]

CLUSTER = "DefaultCluster"


cluster = module_cluster("admin-topic", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)


def test_topic_lifecycle(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("AdmT")
    created = admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "4", "-w", "4")
    assert created["brokers"] == [cluster.broker] and created["writeQueueNums"] == 4

    assert topic in admin.json("topicList")
    route = eventually(lambda: admin.json("topicRoute", "-t", topic))
    broker_name = route["brokerDatas"][0]["brokerName"]
    queues = [
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]
    ]
    assert queues == [(broker_name, 4, 4, 6)]
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == cluster.broker
    assert admin.json("topicClusterList", "-t", topic) == [CLUSTER]

    status = admin.json("topicStatus", "-t", topic)
    assert [(r["queueId"], r["minOffset"], r["maxOffset"]) for r in status] == [(q, 0, 0) for q in range(4)]
    for i in range(3):
        sent = admin.json("sendMessage", "-t", topic, "-p", f"m{i}", "-i", "1")
        assert sent["sendStatus"] == "SEND_OK" and sent["queueId"] == 1
    status = admin.json("topicStatus", "-t", topic)
    assert {r["queueId"]: r["maxOffset"] for r in status} == {0: 0, 1: 3, 2: 0, 3: 0}
    assert status[1]["lastUpdateTimestamp"] > 0

    perm = admin.json("updateTopicPerm", "-t", topic, "-p", "4", "-c", CLUSTER)
    assert perm["brokers"] == [{"broker": cluster.broker, "oldPerm": 6, "newPerm": 4}]
    eventually(lambda: admin.json("topicRoute", "-t", topic)["queueDatas"][0]["perm"] == 4)
    line = admin.fails("sendMessage", "-t", topic, "-p", "x")
    assert "sendMessage" in line

    deleted = admin.json("deleteTopic", "-t", topic, "-c", CLUSTER)
    assert deleted["brokers"] == [cluster.broker]
    assert topic not in admin.json("topicList")
    assert "topicRoute" in admin.fails("topicRoute", "-t", topic)


def test_update_topic_on_one_broker_with_order_and_attributes(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("AdmOrd")
    admin.json(
        "updateTopic",
        "-t",
        topic,
        "-b",
        cluster.broker,
        "-w",
        "2",
        "-r",
        "2",
        "-o",
        "true",
        "-a",
        "+owner=ops",
    )
    route = eventually(lambda: admin.json("topicRoute", "-t", topic))
    assert route["queueDatas"][0]["writeQueueNums"] == 2
    rows = admin.json("topicList", "-c")
    row = next(r for r in rows if r["topic"] == topic)
    assert row["clusters"] == [CLUSTER]
    # Updating the same topic again changes its queues in place.
    admin.json("updateTopic", "-t", topic, "-b", cluster.broker, "-w", "3", "-r", "3")
    eventually(lambda: admin.json("topicRoute", "-t", topic)["queueDatas"][0]["writeQueueNums"] == 3)


def test_topic_commands_refuse_bad_input(admin: AdminRun) -> None:
    assert "-b/--brokerAddr or -c/--clusterName" in admin.fails("updateTopic", "-t", "X", code=2)
    assert "not a permission" in admin.fails("updateTopic", "-t", "X", "-c", CLUSTER, "-p", "5", code=2)
    assert "cluster [Nope] not found" in admin.fails("updateTopic", "-t", "X", "-c", "Nope", code=2)
    assert "required" in admin.fails("topicRoute", code=2)
    # The broker refuses the name (INVALID_PARAMETER): a bad value on the command line, exit 2.
    line = admin.fails("updateTopic", "-t", "bad topic!", "-c", CLUSTER, code=2)
    assert "illegal characters" in line


def test_update_order_conf_put_get_delete(admin: AdminRun) -> None:
    topic = unique_name("AdmOrderConf")
    assert admin.json("updateOrderConf", "-t", topic, "-m", "get")["orderConf"] is None
    admin.json("updateOrderConf", "-t", topic, "-m", "put", "-v", "broker-a:4;broker-b:2")
    assert admin.json("updateOrderConf", "-t", topic, "-m", "get")["orderConf"] == "broker-a:4;broker-b:2"
    admin.json("updateOrderConf", "-t", topic, "-m", "delete")
    assert admin.json("updateOrderConf", "-t", topic, "-m", "get")["orderConf"] is None
    assert "brokerName:num" in admin.fails("updateOrderConf", "-t", topic, "-m", "put", "-v", "x", code=2)
