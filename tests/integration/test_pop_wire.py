"""The pop family on the wire against a real `rocketq up`, as a RocketMQ 5 client speaks it:
POP_MESSAGE (headers, body, long polling, POLLING_TIMEOUT/FULL), ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE, NOTIFICATION, POLLING_INFO, orderly pop, and the revive
of what was not acked to the pop retry topic."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, module_cluster, unique_name, wait_until
from tests.wire import (
    ack,
    change_invisible,
    create_routed_topic,
    get_all_topic_config,
    get_route,
    heartbeat,
    invoke,
    pop,
    popped,
    send_message,
    update_config,
)

from rocketq.admin import SyncAdminClient
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.message import decode_messages
from rocketq.codec.pop import BatchAck, encode_batch_ack_body, parse_extra_info, parse_msg_offset_info
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(90)]

cluster = module_cluster("pop-wire", *SMALL_STORE)


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


async def _topic(
    cluster: Cluster, client: RemotingClient, queues: int = 4, *messages: bytes
) -> tuple[str, str]:
    """A fresh topic with `messages` sent round robin over its queues; (topic, broker name)."""
    topic = unique_name("PopT")
    await create_routed_topic(cluster.namesrv, cluster.broker, topic, queues)
    route = await wait_until(lambda: get_route(client, cluster.namesrv, topic), timeout=20)
    for i, body in enumerate(messages):
        r = await send_message(client, cluster.broker, topic, body, queue_id=i % queues)
        assert r.code == ResponseCode.SUCCESS, r.remark
    return topic, route.broker_datas[0].broker_name


async def test_pop_answers_with_the_offsets_and_the_revive_queue(
    cluster: Cluster, client: RemotingClient
) -> None:
    topic, broker = await _topic(cluster, client, 2, b"a", b"b", b"c")
    r = await pop(client, cluster.broker, "PopG", topic, invisible_ms=30_000)
    assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
    ext = r.ext_fields or {}
    assert ext["invisibleTime"] == "30000" and 0 <= int(ext["reviveQid"]) < 8
    assert abs(int(ext["popTime"]) - time.time() * 1000) < 60_000
    assert ext["restNum"] == "0"
    assert parse_msg_offset_info(ext["msgOffsetInfo"]) == {"0@0": [0, 1], "0@1": [0]}
    assert sorted(ext["startOffsetInfo"].split(";")) == ["0 0 0", "0 1 0"]
    msgs = popped(r, broker)
    assert sorted(m.body for m in msgs) == [b"a", b"b", b"c"]
    info = parse_extra_info(msgs[0].properties["POP_CK"])
    assert (info.retry, info.broker_name, info.revive_qid) == ("0", broker, int(ext["reviveQid"]))
    # everything is invisible now: nothing more, at once
    again = await pop(client, cluster.broker, "PopG", topic)
    assert again.code == ResponseCode.POLLING_TIMEOUT and not again.body
    for m in msgs:
        assert (await ack(client, cluster.broker, "PopG", m)).code == ResponseCode.SUCCESS


async def test_the_revive_topic_has_eight_queues(cluster: Cluster, client: RemotingClient) -> None:
    topics = await get_all_topic_config(client, cluster.broker)
    revive = topics["rmq_sys_REVIVE_LOG_DefaultCluster"]
    assert (revive.read_queue_nums, revive.write_queue_nums) == (8, 8)


async def test_a_parked_pop_is_answered_when_a_message_arrives(
    cluster: Cluster, client: RemotingClient
) -> None:
    topic, broker = await _topic(cluster, client, 2)
    parked = asyncio.ensure_future(pop(client, cluster.broker, "PopLp", topic, poll_ms=15_000))
    await asyncio.sleep(0.5)
    assert not parked.done()
    info = await invoke(
        client,
        cluster.broker,
        RequestCode.POLLING_INFO,
        {"consumerGroup": "PopLp", "topic": topic, "queueId": -1},
    )
    assert info.code == ResponseCode.SUCCESS and (info.ext_fields or {})["pollingNum"] == "1"
    await send_message(client, cluster.broker, topic, b"late", queue_id=1)
    r = await asyncio.wait_for(parked, 10)
    assert r.code == ResponseCode.SUCCESS and [m.body for m in popped(r, broker)] == [b"late"]
    # a parked pop that sees nothing ends with POLLING_TIMEOUT after its pollTime
    r = await pop(client, cluster.broker, "PopLp", topic, poll_ms=300)
    assert r.code == ResponseCode.POLLING_TIMEOUT


async def test_polling_full_when_too_many_wait(cluster: Cluster, client: RemotingClient) -> None:
    topic, _ = await _topic(cluster, client, 1)
    await update_config(client, cluster.broker, RequestCode.UPDATE_BROKER_CONFIG, "popPollingSize", 1)
    try:
        first = asyncio.ensure_future(pop(client, cluster.broker, "PopFull", topic, poll_ms=2_000))
        await asyncio.sleep(0.3)
        second = await pop(client, cluster.broker, "PopFull", topic, poll_ms=2_000)
        assert second.code == ResponseCode.POLLING_FULL
        assert (await first).code == ResponseCode.POLLING_TIMEOUT
    finally:
        await update_config(client, cluster.broker, RequestCode.UPDATE_BROKER_CONFIG, "popPollingSize", 1024)


async def test_bad_requests(cluster: Cluster, client: RemotingClient) -> None:
    topic, broker = await _topic(cluster, client, 1, b"x")
    assert (await pop(client, cluster.broker, "PopBad", topic, max_nums=33)).code == ResponseCode.SYSTEM_ERROR
    assert (
        await pop(client, cluster.broker, "PopBad", "NoSuchPopTopic")
    ).code == ResponseCode.TOPIC_NOT_EXIST
    r = await pop(client, cluster.broker, "PopBad", topic)
    m = popped(r, broker)[0]
    bad = await invoke(
        client,
        cluster.broker,
        RequestCode.ACK_MESSAGE,
        {
            "consumerGroup": "PopBad",
            "topic": topic,
            "queueId": 0,
            "extraInfo": m.properties["POP_CK"],
            "offset": 99,
        },
    )
    assert bad.code == ResponseCode.NO_MESSAGE
    assert (await ack(client, cluster.broker, "PopBad", m)).code == ResponseCode.SUCCESS


async def test_unacked_messages_come_back_from_the_retry_topic(
    cluster: Cluster, client: RemotingClient
) -> None:
    topic, broker = await _topic(cluster, client, 1, b"keep", b"drop")
    msgs = popped(await pop(client, cluster.broker, "PopRv", topic, invisible_ms=1_000), broker)
    keep = next(m for m in msgs if m.body == b"keep")
    assert (await ack(client, cluster.broker, "PopRv", keep)).code == ResponseCode.SUCCESS

    async def back() -> list:
        r = await pop(client, cluster.broker, "PopRv", topic, invisible_ms=30_000, poll_ms=1_000)
        return popped(r, broker) if r.code == ResponseCode.SUCCESS else []

    again = await wait_until(back, timeout=20)
    assert [m.body for m in again] == [b"drop"]
    m = again[0]
    assert m.topic == topic and m.reconsume_times == 1
    info = parse_extra_info(m.properties["POP_CK"])
    assert info.retry == "1" and m.properties.get("1ST_POP_TIME")
    topics = await get_all_topic_config(client, cluster.broker)
    assert f"%RETRY%PopRv_{topic}" in topics
    assert (await ack(client, cluster.broker, "PopRv", m)).code == ResponseCode.SUCCESS
    await asyncio.sleep(1.5)
    assert (await pop(client, cluster.broker, "PopRv", topic)).code == ResponseCode.POLLING_TIMEOUT


async def test_batch_ack(cluster: Cluster, client: RemotingClient) -> None:
    topic, broker = await _topic(cluster, client, 1, b"1", b"2", b"3")
    r = await pop(client, cluster.broker, "PopBa", topic, invisible_ms=1_500)
    ext = r.ext_fields or {}
    msgs = popped(r, broker)
    body = encode_batch_ack_body(
        broker,
        [
            BatchAck(
                "PopBa",
                topic,
                "0",
                int(ext["startOffsetInfo"].split()[2]),
                0,
                int(ext["reviveQid"]),
                int(ext["popTime"]),
                1_500,
                tuple(m.queue_offset for m in msgs if m.body != b"2"),
            )
        ],
    )
    assert (await invoke(client, cluster.broker, RequestCode.BATCH_ACK_MESSAGE, None, body)).code == 0
    assert (
        await invoke(client, cluster.broker, RequestCode.BATCH_ACK_MESSAGE)
    ).code == ResponseCode.NO_MESSAGE

    async def back() -> list:
        r = await pop(client, cluster.broker, "PopBa", topic, invisible_ms=30_000, poll_ms=1_000)
        return popped(r, broker) if r.code == ResponseCode.SUCCESS else []

    assert [m.body for m in await wait_until(back, timeout=20)] == [b"2"]


async def test_change_invisible_time_extends_and_gives_a_new_handle(
    cluster: Cluster, client: RemotingClient
) -> None:
    topic, broker = await _topic(cluster, client, 1, b"slow")
    m = popped(await pop(client, cluster.broker, "PopCi", topic, invisible_ms=1_000), broker)[0]
    old = m.properties["POP_CK"]
    r = await change_invisible(client, cluster.broker, "PopCi", m, 4_000)
    assert r.code == ResponseCode.SUCCESS
    e = r.ext_fields or {}
    assert e["invisibleTime"] == "4000" and int(e["reviveQid"]) == parse_extra_info(old).revive_qid
    assert m.properties["POP_CK"] != old
    await asyncio.sleep(2.5)  # past the first invisible time: still hidden
    assert (await pop(client, cluster.broker, "PopCi", topic)).code == ResponseCode.POLLING_TIMEOUT
    assert (await ack(client, cluster.broker, "PopCi", m)).code == ResponseCode.SUCCESS
    await asyncio.sleep(3)
    assert (await pop(client, cluster.broker, "PopCi", topic)).code == ResponseCode.POLLING_TIMEOUT


async def test_peek_and_notification(cluster: Cluster, client: RemotingClient) -> None:
    topic, broker = await _topic(cluster, client, 1, b"p")
    group = "PopPk"

    async def notification(poll_ms: int = 0) -> bool:
        r = await invoke(
            client,
            cluster.broker,
            RequestCode.NOTIFICATION,
            {
                "consumerGroup": group,
                "topic": topic,
                "queueId": -1,
                "pollTime": poll_ms,
                "bornTime": int(time.time() * 1000),
            },
            timeout=5 + poll_ms / 1000,
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        return (r.ext_fields or {})["hasMsg"] == "true"

    peeked = await invoke(
        client,
        cluster.broker,
        RequestCode.PEEK_MESSAGE,
        {"consumerGroup": group, "topic": topic, "queueId": 0, "maxMsgNums": 8},
    )
    assert peeked.code == ResponseCode.SUCCESS and [m.body for m in decode_messages(peeked.body)] == [b"p"]
    assert await notification()
    m = popped(await pop(client, cluster.broker, group, topic), broker)[0]  # peek moved nothing
    assert not await notification()
    waiting = asyncio.ensure_future(notification(10_000))
    await asyncio.sleep(0.3)
    await send_message(client, cluster.broker, topic, b"q")
    assert await asyncio.wait_for(waiting, 8)
    await ack(client, cluster.broker, group, m)


async def test_orderly_pop_locks_the_queue_until_acked(cluster: Cluster, client: RemotingClient) -> None:
    topic, broker = await _topic(cluster, client, 1, b"o1", b"o2", b"o3")
    group = "PopOrd"
    first = await pop(client, cluster.broker, group, topic, max_nums=2, order=True, invisible_ms=1_500)
    assert first.code == ResponseCode.SUCCESS
    assert (first.ext_fields or {})["reviveQid"] == "999" and "orderCountInfo" in (first.ext_fields or {})
    msgs = popped(first, broker)
    assert [m.body for m in msgs] == [b"o1", b"o2"]
    # blocked for everyone else while the batch is out
    assert (await pop(client, cluster.broker, group, topic, order=True)).code == ResponseCode.POLLING_TIMEOUT

    # not acked in time: the same batch again, counted once more
    async def again() -> list:
        r = await pop(client, cluster.broker, group, topic, max_nums=2, order=True, invisible_ms=30_000)
        return popped(r, broker) if r.code == ResponseCode.SUCCESS else []

    second = await wait_until(again, timeout=10)
    assert [m.body for m in second] == [b"o1", b"o2"]
    for m in second:
        assert (await ack(client, cluster.broker, group, m)).code == ResponseCode.SUCCESS
    third = popped(await pop(client, cluster.broker, group, topic, order=True), broker)
    assert [m.body for m in third] == [b"o3"]


async def test_invisible_time_is_honoured(cluster: Cluster, client: RemotingClient) -> None:
    """Never visible again before popTime + invisibleTime; back soon after (a parked pop is woken by
    the revive's put to the retry topic). The lateness is printed: the target is 100 ms + one revive
    scan, which a loaded machine may miss, so only "never early" is asserted."""
    topic, broker = await _topic(cluster, client, 1, b"late")
    first = await pop(client, cluster.broker, "PopInv", topic, invisible_ms=2_000)
    due_ms = int((first.ext_fields or {})["popTime"]) + 2_000
    assert popped(first, broker)
    r = await pop(client, cluster.broker, "PopInv", topic, invisible_ms=30_000, poll_ms=15_000)
    back_ms = time.time() * 1000
    assert r.code == ResponseCode.SUCCESS and [m.body for m in popped(r, broker)] == [b"late"]
    assert back_ms >= due_ms
    print(f"visible again {back_ms - due_ms:.0f} ms after its invisible time")


def test_set_consume_mode(cluster: Cluster, admin: AdminRun) -> None:
    out = admin.json(
        "setConsumeMode", "-b", cluster.broker, "-t", "ModeT", "-g", "ModeG", "-m", "pop", "-q", "2"
    )
    assert (out["mode"], out["popShareQueueNum"], out["brokers"]) == ("POP", 2, [cluster.broker])
    with SyncAdminClient(cluster.namesrv) as a:
        table = a.get_all_message_request_mode(cluster.broker)
    assert table["ModeT"]["ModeG"] == {
        "consumerGroup": "ModeG",
        "mode": "POP",
        "popShareQueueNum": 2,
        "topic": "ModeT",
    }
    saved = json.loads((cluster.data_dir / "store" / "config" / "messageRequestMode.json").read_text())
    assert saved["messageRequestModeMap"]["ModeT"]["ModeG"]["mode"] == "POP"
    refused = admin.fails(
        "setConsumeMode", "-b", cluster.broker, "-t", "%RETRY%ModeG", "-g", "ModeG", "-m", "POP"
    )
    assert "retry topic is not allowed to set mode" in refused


async def test_dead_letter_after_the_group_s_retry_max_times(
    cluster: Cluster, client: RemotingClient
) -> None:
    from rocketq.admin import AdminClient
    from rocketq.codec.bodies import SubscriptionGroupConfig

    topic, broker = await _topic(cluster, client, 1, b"doomed")
    group = unique_name("PopDlq")
    async with AdminClient(cluster.namesrv) as admin:
        await admin.create_and_update_subscription_group_config(
            cluster.broker, SubscriptionGroupConfig(group_name=group, retry_max_times=1)
        )

    async def popped_again() -> list:
        r = await pop(client, cluster.broker, group, topic, invisible_ms=1_000, poll_ms=1_000)
        return popped(r, broker) if r.code == ResponseCode.SUCCESS else []

    first = await wait_until(popped_again, timeout=10)
    assert first[0].reconsume_times == 0
    second = await wait_until(popped_again, timeout=20)  # not acked: back once, from the retry topic
    assert second[0].reconsume_times == 1 and second[0].body == b"doomed"
    # not acked again: reconsumeTimes reached retryMaxTimes, so the next stop is the group's DLQ
    dlq = f"%DLQ%{group}"

    async def dead() -> bool:
        topics = await get_all_topic_config(client, cluster.broker)
        if dlq not in topics:
            return False
        r = await invoke(client, cluster.broker, RequestCode.GET_MAX_OFFSET, {"topic": dlq, "queueId": 0})
        return (r.ext_fields or {}).get("offset") == "1"

    await wait_until(dead, timeout=20)
    assert (
        await pop(client, cluster.broker, group, topic, poll_ms=1_500)
    ).code == ResponseCode.POLLING_TIMEOUT


def test_consumer_progress_shows_what_is_in_flight(cluster: Cluster, admin: AdminRun) -> None:
    async def pop_three_ack_one() -> str:
        async with RemotingClient() as client:
            topic, broker = await _topic(cluster, client, 1, b"1", b"2", b"3", b"4")
            msgs = popped(await pop(client, cluster.broker, "PopProg", topic, max_nums=3), broker)
            assert (await ack(client, cluster.broker, "PopProg", msgs[0])).code == ResponseCode.SUCCESS
            return topic

    topic = asyncio.run(pop_three_ack_one())
    progress = admin.json("consumerProgress", "-g", "PopProg", "-t", topic)
    (row,) = progress["queues"]
    # popped up to 3, acked up to 1: two in flight, three still to consume (4 sent)
    assert (row["brokerOffset"], row["consumerOffset"], row["inflight"], row["diff"]) == (4, 1, 2, 3)
    assert progress["inflightTotal"] == 2
    # invisible for 60 s: nothing is due for revive yet
    assert row["toRevive"] == 0 and progress["toReviveTotal"] == 0


async def test_query_assignment_follows_the_group_s_mode(cluster: Cluster, client: RemotingClient) -> None:
    from rocketq.admin import AdminClient

    topic, broker = await _topic(cluster, client, 4)
    group = unique_name("AsgG")
    other = RemotingClient()
    try:
        for c, cid in ((client, "cid-a"), (other, "cid-b")):
            assert (await heartbeat(c, cluster.broker, cid, consumer_groups={group: [topic]})).code == 0

        async def assignment(cid: str) -> list[tuple[int, str]]:
            body = json.dumps(
                {
                    "topic": topic,
                    "consumerGroup": group,
                    "clientId": cid,
                    "strategyName": "AVG",
                    "messageModel": "CLUSTERING",
                }
            ).encode()
            r = await invoke(client, cluster.broker, RequestCode.QUERY_ASSIGNMENT, None, body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            rows = json.loads(r.body_bytes())["messageQueueAssignments"]
            assert {row["messageQueue"]["brokerName"] for row in rows} == {broker}
            return sorted((row["messageQueue"]["queueId"], row["mode"]) for row in rows)

        assert await assignment("cid-a") == [(0, "PULL"), (1, "PULL")]
        assert await assignment("cid-b") == [(2, "PULL"), (3, "PULL")]
        async with AdminClient(cluster.namesrv) as admin:
            await admin.set_message_request_mode(cluster.broker, topic, group, "POP")
        # POP with popShareQueueNum 0: everyone pops from every queue of the broker
        assert await assignment("cid-a") == await assignment("cid-b") == [(-1, "POP")]
    finally:
        await other.close()
