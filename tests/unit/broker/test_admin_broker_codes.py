"""The broker request codes added for the admin tools, on the wire against an in-process broker:
INVOKE_BROKER_TO_RESET_OFFSET (and RESET_CONSUMER_CLIENT_OFFSET to online clients), CLONE_GROUP_OFFSET,
GET_BROKER_CONSUME_STATS, CLEAN_EXPIRED_CONSUMEQUEUE, VIEW_BROKER_STATS_DATA, QUERY_CONSUME_QUEUE,
and GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY relayed to a client."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.wire import create_topic, heartbeat, in_process_cluster, invoke, send_message

from rocketq.broker.processors import admin_group
from rocketq.codec.bodies import MessageQueue, SubscriptionGroupConfig
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.fastjson import loads
from rocketq.codec.message import decode_message
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(60)

T, G = "AdmT", "AdmG"


async def _setup(
    client: RemotingClient, addr: str, sends: dict[int, int], topic: str = T, group: str | None = G
) -> None:
    assert (await create_topic(client, addr, topic, read=2, write=2)).code == 0
    if group is not None:
        body = SubscriptionGroupConfig(group).to_json()
        assert (
            await invoke(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        ).code == 0
    for qid, n in sends.items():
        for i in range(n):
            assert (await send_message(client, addr, topic, b"m%d" % i, queue_id=qid, tags="A")).code == 0


async def _offset(client: RemotingClient, addr: str, qid: int, topic: str = T, group: str = G) -> int:
    r = await invoke(
        client,
        addr,
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": qid, "setZeroIfNotFound": False},
    )
    return int(r.ext_fields["offset"]) if r.code == 0 else -1  # type: ignore[index]


def _reset_ext(**kw: Any) -> dict[str, Any]:
    return {"topic": T, "group": G, "timestamp": 0, "isForce": True, **kw}


async def test_reset_offset_by_time_exact_and_rollback_only(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _setup(client, addr, {0: 3, 1: 2})
        r = await invoke(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(timestamp=-1))
        assert r.code == ResponseCode.SUCCESS, r.remark
        table = mq_table(loads(r.body_bytes())["offsetTable"], "offsetTable")
        assert table == {MessageQueue(T, "broker-a", 0): 3, MessageQueue(T, "broker-a", 1): 2}
        assert (await _offset(client, addr, 0), await _offset(client, addr, 1)) == (3, 2)

        # Back to the beginning (time 0 = the first message), then forward only when forced.
        r = await invoke(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext())
        assert r.code == 0 and (await _offset(client, addr, 0), await _offset(client, addr, 1)) == (0, 0)
        r = await invoke(
            client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(timestamp=-1, isForce=False)
        )
        assert r.code == 0 and await _offset(client, addr, 0) == 0

        r = await invoke(
            client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(queueId=0, offset=2)
        )
        assert r.code == 0 and (await _offset(client, addr, 0), await _offset(client, addr, 1)) == (2, 0)
        r = await invoke(
            client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(queueId=0, offset=9)
        )
        assert r.code == ResponseCode.INVALID_PARAMETER and "not in consume queue range" in (r.remark or "")

        r = await invoke(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(topic="Nope"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        r = await invoke(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(group="NoGroup"))
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        r = await invoke(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": T, "group": G})
        assert r.code == ResponseCode.INVALID_PARAMETER  # timestamp and isForce are required


async def test_reset_offset_is_pushed_to_online_consumers(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _setup(client, addr, {0: 4})
        pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        client.register_processor(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET, lambda req, ch: pushed.put_nowait(req)
        )
        assert (await heartbeat(client, addr, "127.0.0.1@c1", consumer_groups={G: [T]})).code == 0
        r = await invoke(client, addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _reset_ext(timestamp=-1))
        assert r.code == 0
        req = await asyncio.wait_for(pushed.get(), 5)
        assert req.is_oneway and req.ext_fields is not None
        assert (req.ext_fields["group"], req.ext_fields["topic"], req.ext_fields["isForce"]) == (G, T, "true")
        table = mq_table(loads(req.body_bytes())["offsetTable"], "offsetTable")
        assert table[MessageQueue(T, "broker-a", 0)] == 4


async def test_clone_group_offset(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _setup(client, addr, {0: 2, 1: 1})
        await _setup(client, addr, {0: 1}, topic="Other", group=None)
        for topic in (T, "Other"):
            await invoke(
                client,
                addr,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": G, "topic": topic, "queueId": 0, "commitOffset": 1},
            )
        r = await invoke(
            client, addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": G, "destGroup": "D1", "topic": T}
        )
        assert r.code == 0
        assert await _offset(client, addr, 0, group="D1") == 1
        assert await _offset(client, addr, 0, topic="Other", group="D1") == -1
        r = await invoke(client, addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": G, "destGroup": "D2"})
        assert r.code == 0
        assert await _offset(client, addr, 0, topic="Other", group="D2") == 1


async def test_broker_consume_stats(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _setup(client, addr, {0: 3, 1: 1})
        await invoke(
            client,
            addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": 0, "commitOffset": 1},
        )
        r = await invoke(client, addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": False})
        assert r.code == 0
        body = loads(r.body_bytes())
        assert body["brokerAddr"] == addr and body["totalDiff"] == 3
        (stats,) = next(e[G] for e in body["consumeStatsList"] if G in e)
        offsets = {
            mq.queue_id: (v["brokerOffset"], v["consumerOffset"])
            for mq, v in mq_table(stats["offsetTable"], "offsetTable").items()
        }
        assert offsets == {0: (3, 1), 1: (1, 0)}
        r = await invoke(client, addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": True})
        assert all(not e.get(G) for e in loads(r.body_bytes())["consumeStatsList"])  # T is not ordered


async def test_view_broker_stats_data(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _setup(client, addr, {0: 3, 1: 2})
        await invoke(
            client,
            addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": G, "topic": T, "queueId": 0, "commitOffset": 2},
        )

        async def stats(name: str, key: str) -> dict[str, Any]:
            r = await invoke(
                client, addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
            )
            assert r.code == 0, r.remark
            return dict(orjson.loads(r.body_bytes()))

        put = await stats("TOPIC_PUT_NUMS", T)
        assert [put[w]["sum"] for w in ("statsMinute", "statsHour", "statsDay")] == [5, 5, 5]
        assert put["statsMinute"]["tps"] == round(5 / 60, 2)
        assert (await stats("GROUP_GET_NUMS", f"{T}@{G}"))["statsDay"]["sum"] == 2
        # A group whose offsets were cloned got nothing by pulling (RocketMQ counts only pulls).
        await invoke(
            client, addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": G, "destGroup": "G2", "topic": T}
        )
        assert (await stats("GROUP_GET_NUMS", f"{T}@G2"))["statsDay"]["sum"] == 0
        await invoke(
            client,
            addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G2", "topic": T, "queueId": 0, "commitOffset": 3},
        )
        assert (await stats("GROUP_GET_NUMS", f"{T}@G2"))["statsDay"]["sum"] == 1
        assert (await stats("BROKER_PUT_NUMS", "DefaultCluster"))["statsMinute"]["sum"] == 5
        r = await invoke(
            client,
            addr,
            RequestCode.VIEW_BROKER_STATS_DATA,
            {"statsName": "TOPIC_PUT_NUMS", "statsKey": "Nope"},
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "not exist" in (r.remark or "")


async def test_query_consume_queue(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _setup(client, addr, {1: 3})
        r = await invoke(
            client,
            addr,
            RequestCode.QUERY_CONSUME_QUEUE,
            {"topic": T, "queueId": 1, "index": 1, "count": 5, "consumerGroup": G},
        )
        assert r.code == 0
        body = orjson.loads(r.body_bytes())
        assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 3)
        entries = body["queueData"]
        assert len(entries) == 2 and all(e["physicSize"] > 0 for e in entries)
        assert entries[0]["physicOffset"] < entries[1]["physicOffset"]
        assert {e["tagsCode"] for e in entries} == {ord("A")}  # Java's "A".hashCode()
        assert body["filterData"] == f"{G}@{T} is not online!"
        r = await invoke(
            client, addr, RequestCode.QUERY_CONSUME_QUEUE, {"topic": T, "queueId": 7, "index": 0, "count": 1}
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "is not exist" in (r.remark or "")


async def test_clean_expired_consume_queue_drops_queues_whose_messages_are_gone(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        big = b"x" * (1100 * 1024)  # three fill most of one 4 MiB commit-log file
        await _setup(client, addr, {}, topic="Old", group=None)
        await _setup(client, addr, {}, topic="New", group=None)
        for _ in range(3):
            assert (await send_message(client, addr, "Old", big)).code == 0
        for _ in range(2):
            assert (await send_message(client, addr, "New", big)).code == 0
        store = broker.store
        assert store.clean_expired_files(now=int(time.time() * 1000) + 100 * 3_600_000, manual=True) >= 1
        assert ("Old", 0) in store.consume_queues
        r = await invoke(client, addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert r.code == 0, r.remark
        assert ("Old", 0) not in store.consume_queues and ("New", 0) in store.consume_queues
        r = await invoke(client, addr, RequestCode.GET_MAX_OFFSET, {"topic": "New", "queueId": 0})
        assert r.ext_fields["offset"] == "2"  # type: ignore[index]


class FakeConsumer:
    """A client connection that answers the broker's relayed admin requests like a Java consumer."""

    def __init__(self, client: RemotingClient, answer: bool = True) -> None:
        self.seen: list[RemotingCommand] = []
        self.answer = answer
        client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.handle)
        client.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.handle)

    def handle(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        self.seen.append(request)
        if not self.answer:
            return None
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            body = orjson.dumps(
                {"properties": {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"}, "subscriptionSet": []}
            )
        else:
            msg, _ = decode_message(request.body_bytes())
            body = orjson.dumps(
                {
                    "consumeResult": "CR_SUCCESS",
                    "order": False,
                    "autoCommit": True,
                    "remark": msg.body.decode(),
                    "spentTimeMills": 1,
                }
            )
        return request.make_response(ResponseCode.SUCCESS, None, None, body)


async def test_running_info_and_consume_directly_are_relayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, admin_client):
        addr = broker.address
        await _setup(admin_client, addr, {0: 1})
        async with RemotingClient() as consumer_client:
            fake = FakeConsumer(consumer_client)
            assert (
                await heartbeat(consumer_client, addr, "127.0.0.1@fake", consumer_groups={G: [T]})
            ).code == 0
            r = await invoke(
                admin_client,
                addr,
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": G, "clientId": "127.0.0.1@fake", "jstackEnable": False},
            )
            assert r.code == 0 and orjson.loads(r.body_bytes())["properties"]["PROP_CONSUME_TYPE"]
            assert fake.seen[-1].ext_fields["clientId"] == "127.0.0.1@fake"  # type: ignore[index]

            sent = await send_message(admin_client, addr, T, b"direct", queue_id=1)
            msg_id = sent.ext_fields["msgId"]  # type: ignore[index]
            r = await invoke(
                admin_client,
                addr,
                RequestCode.CONSUME_MESSAGE_DIRECTLY,
                {"consumerGroup": G, "clientId": "127.0.0.1@fake", "msgId": msg_id, "topic": T},
            )
            assert r.code == 0 and orjson.loads(r.body_bytes())["remark"] == "direct"
            ext = fake.seen[-1].ext_fields or {}
            assert (ext["brokerName"], ext["topicSysFlag"], ext["groupSysFlag"]) == ("broker-a", "0", "0")

            r = await invoke(
                admin_client,
                addr,
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": G, "clientId": "127.0.0.1@nobody", "jstackEnable": False},
            )
            assert r.code == ResponseCode.SYSTEM_ERROR and "not online" in (r.remark or "")

            fake.answer = False
            monkeypatch.setattr(admin_group, "CALL_CLIENT_TIMEOUT", 0.3)
            r = await invoke(
                admin_client,
                addr,
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": G, "clientId": "127.0.0.1@fake", "jstackEnable": False},
            )
            assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT
