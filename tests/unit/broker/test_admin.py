"""Admin requests against an in-process broker + name server: topics, offsets, runtime info, config."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import orjson
import pytest
from tests.harness import wait_until
from tests.wire import (
    create_topic,
    get_all_topic_config,
    get_max_offset,
    get_route,
    heartbeat,
    in_process_cluster,
    invoke,
    send_message,
)

from rocketq.codec.bodies import KVTable, SubscriptionGroupConfig, TopicConfig
from rocketq.codec.codes import RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(60)


async def test_create_topic_appears_in_name_server(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as (ns, broker, client):
        r = await create_topic(client, broker.address, "AdminT", read=6, write=6)
        assert r.code == ResponseCode.SUCCESS, r.remark
        route = await wait_until(lambda: get_route(client, ns.address, "AdminT"))
        queues = [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas]
        assert queues == [("broker-a", 6, 6, 6)]
        assert route.broker_datas[0].broker_addrs[0] == broker.address
        # Updating the topic re-registers at once.
        assert (await create_topic(client, broker.address, "AdminT", read=2, write=2)).code == 0

        async def updated() -> bool:
            rt = await get_route(client, ns.address, "AdminT")
            return rt is not None and rt.queue_datas[0].write_queue_nums == 2

        await wait_until(updated)


@pytest.mark.parametrize(
    ("ext", "remark"),
    [
        ({"topic": "TBW102"}, "system topic"),
        ({"topic": "bad name"}, "illegal"),
        ({"readQueueNums": 0}, "readQueueNums"),
        ({"writeQueueNums": 100000}, "writeQueueNums"),
        ({"topicFilterType": "NOPE"}, "topicFilterType"),
        ({"perm": "x"}, "<perm>"),
        ({"attributes": "k=v"}, "attribute"),
    ],
)
async def test_bad_create_topic(tmp_path: Path, ext: dict[str, object], remark: str) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        base = {"topic": "T1", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                "topicFilterType": "SINGLE_TAG"}
        r = await invoke(client, broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, {**base, **ext})
        assert r.code == ResponseCode.INVALID_PARAMETER, r.remark
        assert remark in (r.remark or "")


async def test_topic_attributes_and_get_topic_config(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Attr", attributes="+a=1,+b=2", order=True)).code == 0
        assert (await create_topic(client, addr, "Attr", attributes="-a,+c=3", order=True)).code == 0
        r = await invoke(client, addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Attr"})
        assert r.code == 0
        cfg = TopicConfig.from_json(r.body_bytes())
        assert cfg.attributes == {"b": "2", "c": "3"} and cfg.order
        r = await invoke(client, addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Nope"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_delete_topic_removes_queues_and_offsets(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "DelT")).code == 0
        for _ in range(3):
            assert (await send_message(client, addr, "DelT", b"x")).code == 0
        r = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                         {"consumerGroup": "G", "topic": "DelT", "queueId": 0, "commitOffset": 2})
        assert r.code == 0
        assert broker.offset_manager.query_offset("G", "DelT", 0) == 2

        r = await invoke(client, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "DelT"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert "DelT" not in await get_all_topic_config(client, addr)
        assert await get_max_offset(client, addr, "DelT", 0) == 0
        assert broker.offset_manager.query_offset("G", "DelT", 0) < 0
        assert not (tmp_path / "store-broker-a" / "consumequeue" / "DelT").exists()

        r = await invoke(client, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
        assert r.code == ResponseCode.INVALID_PARAMETER
        r = await invoke(client, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {})
        assert r.code == ResponseCode.INVALID_PARAMETER


async def test_offsets_by_queue_and_time(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "OffT")).code == 0
        stamps = []
        for i in range(4):
            stamps.append(int(time.time() * 1000))
            assert (await send_message(client, addr, "OffT", f"{i}".encode())).code == 0
            await asyncio.sleep(0.02)
        q = {"topic": "OffT", "queueId": 0}
        r = await invoke(client, addr, RequestCode.GET_MAX_OFFSET, q)
        assert r.ext_fields["offset"] == "4"  # type: ignore[index]
        r = await invoke(client, addr, RequestCode.GET_MIN_OFFSET, q)
        assert r.ext_fields["offset"] == "0"  # type: ignore[index]
        r = await invoke(client, addr, RequestCode.GET_EARLIEST_MSG_STORETIME, q)
        assert abs(int(r.ext_fields["timestamp"]) - stamps[0]) < 1000  # type: ignore[index]

        async def search(ts: int, boundary: str | None = None) -> int:
            ext = {**q, "timestamp": ts}
            if boundary:
                ext["boundaryType"] = boundary
            resp = await invoke(client, addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)
            assert resp.code == 0, resp.remark
            return int(resp.ext_fields["offset"])  # type: ignore[index]

        assert await search(0) == 0
        assert await search(stamps[2] + 5) in (2, 3)
        assert await search(int(time.time() * 1000) + 60_000) == 4
        assert await search(int(time.time() * 1000) + 60_000, "upper") == 3

        r = await invoke(client, addr, RequestCode.GET_MAX_OFFSET, {"topic": "OffT", "queueId": "x"})
        assert r.code == ResponseCode.INVALID_PARAMETER


async def test_topic_stats(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "StatT", read=2, write=2)).code == 0
        assert (await send_message(client, addr, "StatT", b"x", queue_id=1)).code == 0
        r = await invoke(client, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "StatT"})
        assert r.code == 0
        text = r.body_bytes().decode()
        rows = re.findall(r'\{"brokerName":"broker-a","queueId":(\d),"topic":"StatT"\}:'
                          r'\{"lastUpdateTimestamp":(\d+),"maxOffset":(\d+),"minOffset":(\d+)\}', text)
        assert sorted((int(q), int(mx)) for q, _, mx, _ in rows) == [(0, 0), (1, 1)]
        assert all((int(ts) > 0) == (q == "1") for q, ts, _, _ in rows)
        r = await invoke(client, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
        assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_runtime_info(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        for _ in range(5):
            assert (await send_message(client, broker.address, "RtT", b"x")).code == 0
        r = await invoke(client, broker.address, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert r.code == 0
        table = KVTable.from_json(r.body_bytes()).table
        for key in ("brokerVersionDesc", "putTps", "getTransferredTps", "msgPutTotalTodayNow",
                    "msgGetTotalTodayNow", "msgPutTotalTodayMorning", "msgGetTotalTodayMorning",
                    "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "commitLogDiskRatio",
                    "earliestMessageTimeStamp", "pageCacheLockTimeMills", "sendThreadPoolQueueSize",
                    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueSize",
                    "pullThreadPoolQueueHeadWaitTimeMills", "brokerActive", "timerEnqueueTps"):
            assert key in table, key
        assert table["msgPutTotalTodayNow"] == "5"
        assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", table["putTps"])
        assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
        assert int(table["earliestMessageTimeStamp"]) > 0


async def test_broker_config_get_and_update(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        r = await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)
        assert r.code == 0
        text = r.body_bytes().decode()
        assert "brokerName=broker-a" in text and "brokerClusterName=DefaultCluster" in text
        assert "listenPort=" in text and "flushDiskType=ASYNC_FLUSH" in text
        version = orjson.loads(r.ext_fields["version"])  # type: ignore[index]

        body = b"traceOn=false\nregionId=Mars\n"
        r = await invoke(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        assert r.code == 0, r.remark
        resp = await send_message(client, addr, "CfgT", b"x")
        assert resp.ext_fields["TRACE_ON"] == "false" and resp.ext_fields["MSG_REGION"] == "Mars"  # type: ignore[index]
        r = await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)
        assert "traceOn=false" in r.body_bytes().decode()
        assert orjson.loads(r.ext_fields["version"])["counter"] == version["counter"] + 1  # type: ignore[index]

        r = await invoke(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"defaultQueryMaxNum=abc\n")
        assert r.code == ResponseCode.INVALID_PARAMETER
        r = await invoke(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"noSuchKey=1\n")
        assert r.code == ResponseCode.NO_PERMISSION


FORBIDDEN = ["rocketmqHome", "filterServerNums", "storePathRootDir", "storePathCommitLog", "kvConfigPath",
             "configStorePath", "brokerConfigPath", "store.storePathRootDir"]


@pytest.mark.parametrize("key", FORBIDDEN)
async def test_update_broker_config_refuses_path_and_command_keys(tmp_path: Path, key: str) -> None:
    """CVE-2023-33246: no key that names a path or command can change over the wire."""
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        before = (await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)).body_bytes()
        body = f"traceOn=false\n{key}=-c $@|sh . echo touch /tmp/pwned\n".encode()
        r = await invoke(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        assert r.code == ResponseCode.NO_PERMISSION, r.remark
        assert key.rpartition(".")[2] in (r.remark or "")
        # All or nothing: the harmless key in the same request was not applied either.
        assert (await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)).body_bytes() == before
        assert broker.store_config.store_path_root_dir.endswith("store-broker-a")
        assert broker.broker_config.trace_on



async def test_subscription_group_admin(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        cfg = SubscriptionGroupConfig("AdminGroup", retry_max_times=3, consume_message_orderly=True)
        r = await invoke(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=cfg.to_json())
        assert r.code == 0, r.remark
        r = await invoke(client, addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "AdminGroup"})
        got = SubscriptionGroupConfig.from_json(r.body_bytes())
        assert (got.retry_max_times, got.consume_message_orderly) == (3, True)
        r = await invoke(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert "AdminGroup" in orjson.loads(r.body_bytes())["subscriptionGroupTable"]

        r = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                         {"consumerGroup": "AdminGroup", "topic": "T", "queueId": 0, "commitOffset": 5})
        r = await invoke(client, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        assert orjson.loads(r.body_bytes())["offsetTable"]["T@AdminGroup"] in ({"0": 5}, {0: 5})

        r = await invoke(client, addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                         {"groupName": "AdminGroup", "cleanOffset": True})
        assert r.code == 0
        r = await invoke(client, addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "AdminGroup"})
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert broker.offset_manager.query_offset("AdminGroup", "T", 0) < 0
        r = await invoke(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"[]")
        assert r.code == ResponseCode.INVALID_PARAMETER


async def test_consume_stats_and_connections(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "CsT", read=2, write=2)).code == 0
        for _ in range(3):
            assert (await send_message(client, addr, "CsT", b"x", queue_id=1)).code == 0
        r = await heartbeat(client, addr, "10.0.0.1@c1", producer_groups=["PG1"],
                            consumer_groups={"CG1": ["CsT"]})
        assert r.code == 0
        r = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                         {"consumerGroup": "CG1", "topic": "CsT", "queueId": 1, "commitOffset": 2})

        stats_req = {"consumerGroup": "CG1", "topic": "CsT"}
        r = await invoke(client, addr, RequestCode.GET_CONSUME_STATS, stats_req)
        assert r.code == 0
        rows = re.findall(r'"queueId":(\d),"topic":"CsT"\}:\{"brokerOffset":(\d+),"consumerOffset":(\d+),'
                          r'"lastTimestamp":(\d+)', r.body_bytes().decode())
        assert sorted((int(q), int(b), int(c)) for q, b, c, _ in rows) == [(0, 0, 0), (1, 3, 2)]
        assert all((int(ts) > 0) == (q == "1") for q, _, _, ts in rows)

        r = await invoke(client, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG1"})
        conn = orjson.loads(r.body_bytes())
        assert [c["clientId"] for c in conn["connectionSet"]] == ["10.0.0.1@c1"]
        assert conn["messageModel"] == "CLUSTERING" and "CsT" in conn["subscriptionTable"]
        r = await invoke(client, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "Nobody"})
        assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
        r = await invoke(client, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG1"})
        assert [c["clientId"] for c in orjson.loads(r.body_bytes())["connectionSet"]] == ["10.0.0.1@c1"]
        r = await invoke(client, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "Nobody"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        r = await invoke(client, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "CsT"})
        assert orjson.loads(r.body_bytes())["groupList"] == ["CG1"]
