"""The Apache C++ client (PyPI ``rocketmq`` 0.4.4) produces and push-consumes through rocketq.

It sends SEND_MESSAGE (10, long header names) with JSON numbers in extFields, compresses bodies
over 4 KiB (sysFlag bit 0, zlib), and only ever parses JSON response headers (PROTOCOL.md §1.4, §7).
Its msgId is the client UNIQ_KEY; the driver's ``bodySha`` lets a 5 KiB body be compared exactly.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from tests.harness import ClientRunner, Cluster, assert_client_ok, unique_name

# Two client runs of at most ~40 s each (their own timeouts) bound every test here.
pytestmark = [pytest.mark.compat, pytest.mark.timeout(90)]

HEX32 = re.compile(r"^[0-9A-F]{32}$")
BIG_BODY = 5 * 1024


def test_produce_and_push_consume_with_a_5k_body(cpp: ClientRunner, cluster: Cluster) -> None:
    topic, count = unique_name("CppTopic"), 12
    produced = assert_client_ok(
        cpp("produce", topic, unique_name("CppP"), count, "--big-body", str(BIG_BODY)), cluster
    )
    sent = produced.of("sent")
    assert len(sent) == count
    assert {s["status"] for s in sent} == {"OK"}
    assert all(HEX32.match(s["msgId"]) for s in sent), sent
    assert sent[-1]["bodyLen"] == BIG_BODY

    # The consumer group is new: the broker answers QUERY_CONSUMER_OFFSET with 0 for a queue whose
    # first message is still in memory (PROTOCOL.md §7 rule 8), so the default
    # CONSUME_FROM_LAST_OFFSET of this client still delivers what was produced before it started.
    consumed = assert_client_ok(cpp("consume", topic, unique_name("CppC"), count), cluster)
    received = {r["msgId"]: r for r in consumed.of("received")}
    assert set(received) == {s["msgId"] for s in sent}, "C++ reports UNIQ_KEY as msgId on both sides"
    for s in sent:
        r = received[s["msgId"]]
        assert r["uniqKey"] == s["msgId"]
        assert r["topic"] == topic
        assert (r["tags"], r["keys"]) == (s["tags"], s["keys"])
        assert (r["bodyLen"], r["bodySha"]) == (s["bodyLen"], s["bodySha"]), "body must round-trip exactly"
        assert r["reconsumeTimes"] == 0
    per_queue: dict[int, list[int]] = defaultdict(list)
    for r in consumed.of("received"):
        per_queue[r["queueId"]].append(r["queueOffset"])
    for queue_id, offsets in per_queue.items():
        assert sorted(set(offsets)) == list(range(len(set(offsets)))), (queue_id, offsets)


def test_orderly_send_lands_in_the_selected_queue_in_order(cpp: ClientRunner, cluster: Cluster) -> None:
    topic, count, shards = unique_name("CppOrderly"), 15, 3
    produced = assert_client_ok(
        cpp("orderly", topic, unique_name("CppOrderlyP"), count, "--shards", str(shards)), cluster
    )
    sent = produced.of("sent")
    assert len(sent) == count
    expected: dict[int, list[str]] = defaultdict(list)
    for s in sent:
        # The selector saw mqSize queues and picked shard % mqSize; with fewer shards than the
        # 4 queues of an auto-created topic that is the shard itself, whichever route was used.
        assert s["mqSize"] >= shards, s
        assert s["queueId"] == s["shard"], s
        expected[s["queueId"]].append(s["body"])
    # Queue offsets: each selected queue counts up from 0 in send order.
    for queue_id in expected:
        offsets = [s["queueOffset"] for s in sent if s["queueId"] == queue_id]
        assert offsets == list(range(len(offsets))), (queue_id, offsets)

    # An orderly push consumer (LOCK_BATCH_MQ) sees each queue in exactly that order.
    group = unique_name("CppOrderlyC")
    consumed = assert_client_ok(cpp("consume", topic, group, count, "--orderly"), cluster)
    got: dict[int, list[str]] = defaultdict(list)
    for r in consumed.of("received"):
        if r["body"] not in got[r["queueId"]]:
            got[r["queueId"]].append(r["body"])
    assert dict(got) == dict(expected)
