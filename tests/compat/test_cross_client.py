"""Messages cross clients: what one real client stores, the other reads back intact.

The broker stores what it is sent and serves the V1 record layout (PROTOCOL.md §3.1, §7 rule 6);
the two clients differ in nearly everything else (send code 10 vs 310, extFields typing, property
string endings, compression), so a round trip through both checks the store path end to end.
"""

from __future__ import annotations

import re

import pytest
from tests.harness import ClientRunner, Cluster, assert_client_ok, unique_name

# Two client runs of at most ~40 s each (their own timeouts) bound every test here.
pytestmark = [pytest.mark.compat, pytest.mark.timeout(90)]

HEX32 = re.compile(r"^[0-9A-F]{32}$")
BIG_BODY = 5 * 1024


def test_cpp_produces_ali_ons_consumes(cpp: ClientRunner, ali_ons: ClientRunner, cluster: Cluster) -> None:
    topic, count = unique_name("CrossCppToNode"), 10
    produced = assert_client_ok(
        cpp("produce", topic, unique_name("CrossCppP"), count, "--big-body", str(BIG_BODY),
            "--prefix", "from-cpp"),
        cluster,
    )
    consumed = assert_client_ok(ali_ons("consume", topic, unique_name("CrossNodeC"), count), cluster)

    by_uniq = {r["properties"].get("UNIQ_KEY"): r for r in consumed.of("received")}
    sent = produced.of("sent")
    assert set(by_uniq) == {s["msgId"] for s in sent}, "the C++ UNIQ_KEY property must survive the store"
    for s in sent:
        r = by_uniq[s["msgId"]]
        assert (r["tags"], r["keys"]) == (s["tags"], s["keys"])
        assert HEX32.match(r["msgId"]), r["msgId"]
        if s["body"] is not None:
            assert r["body"] == s["body"]
        else:
            # The C++ client zlib-compressed this body; the stored record keeps sysFlag bit 0 and
            # ali-ons inflates it on delivery.
            assert r["sysFlag"] & 1 == 1, r["sysFlag"]
            assert len(r["body"]) == BIG_BODY
            assert r["body"].startswith("BIG:rocketq-big-body-")


def test_ali_ons_produces_cpp_consumes(cpp: ClientRunner, ali_ons: ClientRunner, cluster: Cluster) -> None:
    topic, count = unique_name("CrossNodeToCpp"), 10
    produced = assert_client_ok(
        ali_ons("produce", topic, unique_name("CrossNodeP"), count, "--broker", cluster.broker,
                "--prefix", "from-node"),
        cluster,
    )
    consumed = assert_client_ok(cpp("consume", topic, unique_name("CrossCppC"), count), cluster)

    received = {r["body"]: r for r in consumed.of("received")}
    sent = {s["body"]: s for s in produced.of("sent")}
    assert set(received) == set(sent)
    for body, s in sent.items():
        r = received[body]
        assert (r["tags"], r["keys"]) == (s["tags"], s["keys"])
        assert (r["queueId"], r["queueOffset"]) == (s["queue"]["queueId"], s["queueOffset"])
        # ali-ons sets no UNIQ_KEY; the broker adds one (PROTOCOL.md §3.3, §3.5) and C++ reports it.
        assert HEX32.match(r["uniqKey"] or ""), r
        assert r["msgId"] == r["uniqKey"]
    assert len({r["uniqKey"] for r in received.values()}) == count
