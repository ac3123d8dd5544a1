"""Consume side against a real in-process broker (+ name server) on 127.0.0.1, driven over the wire.

Pull status table, tag filtering, long polling (wake-up latency printed, not asserted), hold timeout,
subscriptions from heartbeats, validation codes, offsets (incl. across a restart).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest
from tests.wire import (
    BrokerOptions,
    count_records,
    create_topic,
    decode_pull,
    heartbeat,
    in_process_cluster,
    invoke,
    pull,
    send_batch,
    send_message,
)

from rocketq.codec.codes import RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(60)

T = "PullTopic"
G = "PullGroup"


def _ext(resp: object, key: str) -> int:
    return int(resp.ext_fields[key])  # type: ignore[attr-defined]


async def _fill(client, addr: str, topic: str, n: int, queue_id: int = 0, tags: str | None = None) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        r = await send_message(client, addr, topic, f"m{i}".encode(), tags=tags, queue_id=queue_id)
        assert r.code == 0, r.remark


async def test_found_no_new_and_offset_moved(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, T)).code == 0
        # Empty queue at offset 0: PULL_NOT_FOUND, offsets all 0.
        r = await pull(client, addr, G, T, 0, 0)
        assert r.code == ResponseCode.PULL_NOT_FOUND
        assert (_ext(r, "nextBeginOffset"), _ext(r, "minOffset"), _ext(r, "maxOffset")) == (0, 0, 0)
        assert r.ext_fields["suggestWhichBrokerId"] == "0"
        # Empty queue at a non-zero offset: PULL_OFFSET_MOVED to 0.
        r = await pull(client, addr, G, T, 0, 5)
        assert r.code == ResponseCode.PULL_OFFSET_MOVED and _ext(r, "nextBeginOffset") == 0

        await _fill(client, addr, T, 10)
        r = await pull(client, addr, G, T, 0, 0, max_nums=4)
        assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
        msgs = decode_pull(r)
        assert [m.body for m in msgs] == [b"m0", b"m1", b"m2", b"m3"]
        assert [m.queue_offset for m in msgs] == [0, 1, 2, 3]
        assert (_ext(r, "nextBeginOffset"), _ext(r, "minOffset"), _ext(r, "maxOffset")) == (4, 0, 10)

        r = await pull(client, addr, G, T, 0, 8, max_nums=32)
        assert [m.body for m in decode_pull(r)] == [b"m8", b"m9"] and _ext(r, "nextBeginOffset") == 10
        # At the end: NO_NEW (OFFSET_OVERFLOW_ONE), next offset unchanged.
        r = await pull(client, addr, G, T, 0, 10)
        assert r.code == ResponseCode.PULL_NOT_FOUND and r.remark == "OFFSET_OVERFLOW_ONE"
        assert _ext(r, "nextBeginOffset") == 10
        # Far beyond the end: OFFSET_MOVED back to the max offset.
        r = await pull(client, addr, G, T, 0, 99)
        assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_OVERFLOW_BADLY"
        assert _ext(r, "nextBeginOffset") == 10
        # A negative offset is "too small": move to the min offset.
        r = await pull(client, addr, G, T, 0, -3)
        assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_TOO_SMALL"
        assert _ext(r, "nextBeginOffset") == 0
        # Lite pull (361) takes the same path.
        r = await pull(client, addr, G, T, 0, 2, max_nums=1, code=RequestCode.LITE_PULL_MESSAGE,
                       sys_flag=0x4 | 0x10)
        assert [m.body for m in decode_pull(r)] == [b"m2"]


async def test_tag_filtering(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T)
        for i, tag in enumerate(["A", "B", "C", "A", None, "B"]):
            r = await send_message(client, addr, T, f"m{i}".encode(), tags=tag)
            assert r.code == 0
        r = await pull(client, addr, G, T, 0, 0, subscription="A || C")
        assert r.code == 0
        assert [(m.body, m.tags) for m in decode_pull(r)] == [(b"m0", "A"), (b"m2", "C"), (b"m3", "A")]
        assert _ext(r, "nextBeginOffset") == 6
        r = await pull(client, addr, G, T, 0, 0, subscription="*")
        assert len(decode_pull(r)) == 6
        # Nothing matches in the whole queue: retry immediately, past the scanned entries.
        r = await pull(client, addr, G, T, 0, 0, subscription="Z")
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.remark == "NO_MATCHED_MESSAGE"
        assert _ext(r, "nextBeginOffset") == 6
        r = await pull(client, addr, G, T, 0, 0, subscription="||")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        r = await invoke(client, addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": G, "topic": T, "queueId": 0, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 4,
            "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": 0, "subscription": "a > 1",
            "expressionType": "SQL92"})
        # enablePropertyFilter is off: RocketMQ's SYSTEM_ERROR and text (see test_sql92_filter.py)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "The broker does not support consumer to filter message by SQL92")


async def test_long_poll_wakeup_on_send(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T, read=1, write=1)
        latencies = []
        for i in range(40):
            waiter = asyncio.ensure_future(pull(client, addr, G, T, 0, i, suspend_ms=5000))
            await asyncio.sleep(0.005)
            assert not waiter.done()
            assert broker.hold_service.held_count() == 1
            t0 = time.perf_counter()
            r = await send_message(client, addr, T, b"x%d" % i)
            assert r.code == 0
            resp = await waiter
            latencies.append(time.perf_counter() - t0)
            assert resp.code == 0 and [m.body for m in decode_pull(resp)] == [b"x%d" % i]
        assert broker.hold_service.held_count() == 0
        latencies.sort()
        p50 = statistics.median(latencies) * 1e3
        p99 = latencies[int(len(latencies) * 0.99)] * 1e3
        print(f"\nlong-poll send->pull answer (incl. the send round trip): p50={p50:.3f} ms p99={p99:.3f} ms")


async def test_long_poll_respects_tags(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T, read=1, write=1)
        waiter = asyncio.ensure_future(pull(client, addr, G, T, 0, 0, subscription="want", suspend_ms=5000))
        await asyncio.sleep(0.01)
        await send_message(client, addr, T, b"skip", tags="other")
        await asyncio.sleep(0.05)
        assert not waiter.done()  # a non-matching arrival leaves the pull parked
        await send_message(client, addr, T, b"take", tags="want")
        resp = await asyncio.wait_for(waiter, 2)
        assert [m.body for m in decode_pull(resp)] == [b"take"]


async def test_batch_wakes_once_with_all_messages(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T, read=1, write=1)
        waiter = asyncio.ensure_future(pull(client, addr, G, T, 0, 0, suspend_ms=5000))
        await asyncio.sleep(0.01)
        r = await send_batch(client, addr, T, [b"b%d" % i for i in range(20)])
        assert r.code == 0, r.remark
        resp = await asyncio.wait_for(waiter, 2)
        assert count_records(resp.body_bytes()) == 20


async def test_hold_timeout_answers_not_found(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T, read=1, write=1)
        t0 = time.monotonic()
        r = await pull(client, addr, G, T, 0, 0, suspend_ms=300)
        waited = time.monotonic() - t0
        assert r.code == ResponseCode.PULL_NOT_FOUND
        assert _ext(r, "nextBeginOffset") == 0
        assert 0.25 <= waited < 2.0
        assert broker.hold_service.held_count() == 0


async def test_short_polling_when_long_polling_off(tmp_path: Path) -> None:
    opts = BrokerOptions(broker={"long_polling_enable": False, "short_polling_time_mills": 200})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T, read=1, write=1)
        t0 = time.monotonic()
        r = await pull(client, addr, G, T, 0, 0, suspend_ms=15000)
        assert r.code == ResponseCode.PULL_NOT_FOUND
        assert time.monotonic() - t0 < 2.0


async def test_validation_codes(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T, read=2, write=2)
        r = await pull(client, addr, G, "NoSuchTopic", 0, 0)
        assert r.code == ResponseCode.TOPIC_NOT_EXIST and "NoSuchTopic" in (r.remark or "")
        r = await pull(client, addr, G, T, 2, 0)
        assert r.code == ResponseCode.INVALID_PARAMETER and "queueId[2] is illegal" in (r.remark or "")
        r = await pull(client, addr, G, T, -1, 0)
        assert r.code == ResponseCode.INVALID_PARAMETER
        r = await invoke(client, addr, RequestCode.PULL_MESSAGE, {"consumerGroup": G, "topic": T})
        assert r.code == ResponseCode.INVALID_PARAMETER and "queueId" in (r.remark or "")
        r = await invoke(client, addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": G, "topic": T, "queueId": "x", "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0,
            "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": 0})
        assert r.code == ResponseCode.INVALID_PARAMETER
        # A disabled group may not consume.
        from rocketq.codec.bodies import SubscriptionGroupConfig

        broker.subscription_manager.update_subscription_group_config(
            SubscriptionGroupConfig(group_name="Disabled", consume_enable=False))
        r = await pull(client, addr, "Disabled", T, 0, 0)
        assert r.code == ResponseCode.NO_PERMISSION and "Disabled" in (r.remark or "")
        # A topic without the read permission.
        await create_topic(client, addr, "WriteOnly", perm=2)
        r = await pull(client, addr, G, "WriteOnly", 0, 0)
        assert r.code == ResponseCode.NO_PERMISSION
        # The broker keeps serving.
        assert (await pull(client, addr, G, T, 0, 0)).code == ResponseCode.PULL_NOT_FOUND


async def test_subscription_from_heartbeat(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T)
        await _fill(client, addr, T, 3)
        # Push-consumer style pull (no SUBSCRIPTION flag) before any heartbeat.
        r = await pull(client, addr, G, T, 0, 0, subscription=None)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        hb = await heartbeat(client, addr, "127.0.0.1@c1", consumer_groups={G: [T]})
        assert hb.code == 0
        assert hb.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}
        r = await pull(client, addr, G, T, 0, 0, subscription=None)
        assert r.code == 0 and len(decode_pull(r)) == 3
        r = await pull(client, addr, G, "Other", 0, 0, subscription=None)
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        await create_topic(client, addr, "Other")
        r = await pull(client, addr, G, "Other", 0, 0, subscription=None)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        # The client knows a newer subscription than the broker: NOT_LATEST.
        r = await invoke(client, addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": G, "topic": T, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0,
            "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": int(time.time() * 1000) + 60_000})
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
        # The heartbeat created the group and its retry topic (1 queue, RW).
        assert broker.subscription_manager.contains(G)
        retry = broker.topic_manager.select_topic_config(f"%RETRY%{G}")
        assert retry is not None and (retry.read_queue_nums, retry.write_queue_nums, retry.perm) == (1, 1, 6)


async def test_cpp_style_heartbeat_with_ordinals(tmp_path: Path) -> None:
    body = (b'{"clientID":"123-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
            b'"groupName":"CppGroup","messageModel":1,"subscriptionDataSet":[{"subString":"*",'
            b'"subVersion":"1700000000000","topic":"CppTopic"}]}]}\n')
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await invoke(client, broker.address, RequestCode.HEART_BEAT, {}, body)
        assert r.code == 0, r.remark
        info = broker.consumer_manager.get_consumer_group_info("CppGroup")
        assert info is not None
        assert (info.consume_type, info.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
        assert info.find_subscription_data("CppTopic").sub_version == 1700000000000
        r = await invoke(client, broker.address, RequestCode.HEART_BEAT, {}, b"{not json")
        assert r.code == ResponseCode.SYSTEM_ERROR


async def test_commit_offset_flag_stores_offset(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T)
        await _fill(client, addr, T, 3)
        r = await pull(client, addr, G, T, 0, 3, commit_offset=2, sys_flag=0x1 | 0x4)
        assert r.code == ResponseCode.PULL_NOT_FOUND
        q = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": G, "topic": T, "queueId": 0})
        assert q.code == 0 and q.ext_fields["offset"] == "2"
