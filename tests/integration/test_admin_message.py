"""`rocketq admin` message commands against a real `rocketq up`: sendMessage, queryMsgByKey,
queryMsgById (offset id and unique key, with the consume track), queryMsgByUniqueKey,
queryMsgByOffset, printMsg, consumeMessage, checkMsgSendRT."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, eventually, module_cluster, unique_name

from rocketq.admin import SyncAdminClient

pytestmark = [pytest.mark.timeout(60)]

CLUSTER = "DefaultCluster"


cluster = module_cluster("admin-msg", *SMALL_STORE, also_as_4_9=True, slow_as_4_9=True)


@pytest.fixture(scope="module")
def topic(cluster: Cluster) -> str:
    name = unique_name("AdmMsg")
    with SyncAdminClient(cluster.namesrv) as a:
        a.create_topic(name, cluster=CLUSTER, read_queue_nums=2, write_queue_nums=2)
        eventually(lambda: a.examine_topic_route_info(name))
    return name


def _send(admin: AdminRun, topic: str, body: str, *extra: str) -> dict[str, Any]:
    sent: dict[str, Any] = admin.json("sendMessage", "-t", topic, "-p", body, *extra)
    assert sent["sendStatus"] == "SEND_OK"
    return sent


def test_send_and_find_by_key_id_unique_key_and_offset(cluster: Cluster, admin: AdminRun, topic: str) -> None:
    key = unique_name("order")
    sent = _send(admin, topic, "payload-1", "-k", key, "-c", "TagA", "-i", "0")
    _send(admin, topic, "other", "-k", unique_name("k"), "-i", "0")

    found = eventually(lambda: admin.json("queryMsgByKey", "-t", topic, "-k", key))
    assert [(m["body"], m["keys"], m["tags"], m["msgId"]) for m in found] == [
        ("payload-1", key, "TagA", sent["msgId"])
    ]

    by_offset_id = admin.json("queryMsgById", "-i", sent["offsetMsgId"])
    assert by_offset_id["body"] == "payload-1" and by_offset_id["storeHost"] == cluster.broker
    by_unique = admin.json("queryMsgById", "-t", topic, "-i", sent["msgId"])
    assert by_unique["offsetMsgId"] == sent["offsetMsgId"]
    assert admin.json("queryMsgByUniqueKey", "-t", topic, "-i", sent["msgId"])["body"] == "payload-1"
    assert len(admin.json("queryMsgByUniqueKey", "-t", topic, "-i", sent["msgId"], "-a")) == 1

    at = admin.json(
        "queryMsgByOffset",
        "-t",
        topic,
        "-b",
        _broker_name(admin, topic),
        "-i",
        "0",
        "-o",
        str(sent["queueOffset"]),
    )
    assert at["msgId"] == sent["msgId"]

    assert "no message" in admin.fails("queryMsgById", "-t", topic, "-i", "NOT_AN_ID")
    assert "no message" in admin.fails("queryMsgByUniqueKey", "-t", topic, "-i", "00FF")
    assert admin.json("queryMsgByKey", "-t", topic, "-k", "never-used") == []


def _broker_name(admin: AdminRun, topic: str) -> str:
    name: str = admin.json("topicRoute", "-t", topic)["brokerDatas"][0]["brokerName"]
    return name


def test_message_track_shows_consume_status(cluster: Cluster, admin: AdminRun, topic: str) -> None:
    group = unique_name("trk")
    sent = _send(admin, topic, "tracked", "-i", "1")
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    admin.json("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0")
    tracks = {t["consumerGroup"]: t for t in admin.json("queryMsgById", "-i", sent["offsetMsgId"])["tracks"]}
    assert tracks[group]["trackType"] == "NOT_CONSUME_YET" and tracks[group]["online"] is False
    admin.json("skipAccumulatedMessage", "-g", group, "-t", topic)
    tracks = {t["consumerGroup"]: t for t in admin.json("queryMsgById", "-i", sent["offsetMsgId"])["tracks"]}
    assert tracks[group]["trackType"] == "CONSUMED"


def test_print_and_consume_messages(admin: AdminRun) -> None:
    topic = unique_name("AdmPrint")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    before = int(time.time() * 1000) - 1
    for i in range(5):
        _send(admin, topic, f"p{i}", "-i", str(i % 2), "-c", "even" if i % 2 == 0 else "odd")
    printed = admin.json("printMsg", "-t", topic)
    assert sorted(m["body"] for m in printed) == [f"p{i}" for i in range(5)]
    assert sorted(m["body"] for m in admin.json("printMsg", "-t", topic, "-s", "odd")) == ["p1", "p3"]
    assert len(admin.json("printMsg", "-t", topic, "-b", str(before), "-e", "now", "--limit", "2")) == 2
    assert admin.json("printMsg", "-t", topic, "-e", str(before)) == []

    two = admin.json("consumeMessage", "-t", topic, "-c", "2")
    assert len(two) == 2
    name = _broker_name(admin, topic)
    from_q1 = admin.json("consumeMessage", "-t", topic, "-b", name, "-i", "1", "-o", "1")
    assert [m["body"] for m in from_q1] == ["p3"]
    assert "needs -b" in admin.fails("consumeMessage", "-t", topic, "-i", "1", code=2)


def test_check_msg_send_rt(admin: AdminRun, topic: str) -> None:
    rt = admin.json("checkMsgSendRT", "-t", topic, "-a", "12", "-s", "64")
    assert rt["amount"] == 12 and sum(b["sent"] for b in rt["brokers"]) == 12
    assert all(b["failed"] == 0 for b in rt["brokers"]) and rt["avgRT"] > 0


def test_tables_show_message_text_literally(admin: AdminRun, topic: str) -> None:
    """Bodies and keys are shown as text: rich markup and terminal escapes are not interpreted."""
    key = unique_name("mk")
    _send(admin, topic, "[bold red]boom[/] \x1b[31mred", "-k", key)
    eventually(lambda: admin.json("queryMsgByKey", "-t", topic, "-k", key))
    code, out, err = admin.raw("queryMsgByKey", "-t", topic, "-k", key)
    assert code == 0, err
    assert "[bold red]boom[/]" in out
    assert "\x1b" not in out and "\\x1b[31mred" in out


def test_query_cq_allocate_mq_and_decode_message_id(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("AdmCq")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "3", "-w", "3")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    sent = [_send(admin, topic, f"cq{i}", "-c", "TagA", "-i", "1") for i in range(2)]

    cq = admin.json("queryCq", "-t", topic, "-q", "1", "-i", "0", "-c", "5")
    assert (cq["minQueueIndex"], cq["maxQueueIndex"]) == (0, 2) and cq["broker"] == cluster.broker
    assert [e["index"] for e in cq["entries"]] == [0, 1]
    stored = admin.json("queryMsgById", "-i", sent[1]["offsetMsgId"])
    assert cq["entries"][1]["physicOffset"] == stored["commitLogOffset"]

    alloc = admin.json("allocateMQ", "-t", topic, "-i", "c1,c2")["result"]
    assert [[q["queueId"] for q in alloc[c]] for c in ("c1", "c2")] == [[0, 1], [2]]

    before = int(time.time() * 1000)
    for name in ("decodeMessageId", "DecodeMessageId"):
        decoded = admin.json(name, "-i", sent[0]["msgId"])
        assert decoded["pid"] == os.getpid() & 0xFFFF and decoded["ip"].count(".") == 3
        assert before - 120_000 < decoded["timestamp"] <= before + 1000
    assert "expected 32 or 56" in admin.fails("decodeMessageId", "-i", "ABC", code=2)


def test_print_msg_by_queue_counts_tags(admin: AdminRun) -> None:
    topic = unique_name("AdmByQ")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    eventually(lambda: admin.json("topicRoute", "-t", topic))
    broker = admin.json("clusterList")[0]["brokerName"]
    for i, tag in enumerate(("A", "B", "A")):
        _send(admin, topic, f"q{i}", "-c", tag, "-i", "1")
    _send(admin, topic, "elsewhere", "-c", "A", "-i", "0")

    out = admin.json("printMsgByQueue", "-t", topic, "-a", broker, "-i", "1", "-f", "true", "-p", "true")
    assert out["count"] == 3 and out["tags"] == {"A": 2, "B": 1}
    assert [m["queueOffset"] for m in out["messages"]] == [0, 1, 2] and "body" not in out["messages"][0]
    queue = ("-t", topic, "-a", broker, "-i", "1")
    only_b = admin.json("printMsgByQueue", *queue, "-s", "B", "-d", "true", "-p", "true")
    assert [m["body"] for m in only_b["messages"]] == ["q1"]
    assert admin.json("printMsgByQueue", "-t", topic, "-a", broker, "-i", "1") == {"count": 3}


def test_resend_message_stores_a_copy(admin: AdminRun, topic: str) -> None:
    key = unique_name("again")
    sent = _send(admin, topic, "resend-me", "-k", key, "-c", "TagR")
    out = admin.json("resendMessage", "-i", sent["offsetMsgId"])
    assert (out["originalMsgId"], out["topic"], out["sendStatus"]) == (sent["offsetMsgId"], topic, "SEND_OK")
    copy = admin.json("queryMsgById", "-i", out["offsetMsgId"])
    assert (copy["body"], copy["tags"], copy["keys"]) == ("resend-me", "TagR", key)
    assert copy["msgId"] != sent["msgId"]  # a new message with its own unique key
    again = admin.json("queryMsgById", "-i", sent["msgId"], "-t", topic, "-s", "true")
    assert again["sendStatus"] == "SEND_OK"
    assert again["offsetMsgId"] not in (sent["offsetMsgId"], out["offsetMsgId"])
    assert eventually(lambda: len(admin.json("queryMsgByKey", "-t", topic, "-k", key)) == 3 or None)
