"""The npm client ali-ons 3.12.0 produces and push-consumes through a real rocketq cluster.

ali-ons shows users the offset msgId from the send response and, on delivery, computes the same
id from the stored record (store host + commit-log offset): the two must agree (PROTOCOL.md §3.5).
"""

from __future__ import annotations

import ipaddress
import re
import struct
from collections import defaultdict

import pytest
from tests.harness import ClientRunner, Cluster, assert_client_ok, unique_name

# Two client runs of at most ~40 s each (their own timeouts) bound every test here.
pytestmark = [pytest.mark.compat, pytest.mark.timeout(90)]

OFFSET_MSG_ID = re.compile(r"^[0-9A-F]{32}$")


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    raw = bytes.fromhex(msg_id)
    port, offset = struct.unpack(">iq", raw[4:])
    return str(ipaddress.IPv4Address(raw[:4])), port, offset


def test_produce_and_push_consume_20(ali_ons: ClientRunner, cluster: Cluster) -> None:
    topic, group = unique_name("AliOnsTopic"), unique_name("AliOnsGroup")
    run = assert_client_ok(ali_ons("roundtrip", topic, group, 20, "--broker", cluster.broker), cluster)

    sent = run.of("sent")
    assert len(sent) == 20
    assert {s["sendStatus"] for s in sent} == {"SEND_OK"}

    # Send results: offset msgIds naming our broker, distinct commit-log offsets, and per-queue
    # queue offsets that count up from 0 in send order.
    host, port = cluster.broker.rsplit(":", 1)
    physical: set[int] = set()
    per_queue: dict[int, list[int]] = defaultdict(list)
    for s in sent:
        assert OFFSET_MSG_ID.match(s["msgId"]), s
        id_host, id_port, offset = decode_offset_msg_id(s["msgId"])
        assert (id_host, id_port) == (host, int(port)), s
        physical.add(offset)
        per_queue[s["queue"]["queueId"]].append(s["queueOffset"])
    assert len(physical) == 20
    for queue_id, offsets in per_queue.items():
        assert offsets == list(range(len(offsets))), (queue_id, offsets)
    assert len(per_queue) > 1, "the producer round-robins over the topic's queues"

    # Every message delivered, with its body, tags and keys, in the queue it was sent to.
    received = {r["body"]: r for r in run.of("received")}
    by_body = {s["body"]: s for s in sent}
    assert set(received) == set(by_body)
    for body, r in received.items():
        s = by_body[body]
        assert r["topic"] == topic
        assert r["tags"] == s["tags"]
        assert r["keys"] == s["keys"]
        assert r["msgId"] == s["msgId"], "delivered record's store host/offset must match the send response"
        assert r["queue"]["queueId"] == s["queue"]["queueId"]
        assert r["queueOffset"] == s["queueOffset"]
        assert r["reconsumeTimes"] == 0
    assert run.summary["received"] == 20


def test_produce_then_consume_in_separate_processes(ali_ons: ClientRunner, cluster: Cluster) -> None:
    topic = unique_name("AliOnsSplit")
    produced = assert_client_ok(
        ali_ons("produce", topic, unique_name("AliOnsP"), 8, "--broker", cluster.broker, "--tags", "Red"),
        cluster,
    )
    consumed = assert_client_ok(ali_ons("consume", topic, unique_name("AliOnsC"), 8), cluster)
    assert {s["body"] for s in produced.of("sent")} == {r["body"] for r in consumed.of("received")}
    assert {r["tags"] for r in consumed.of("received")} == {"Red"}
