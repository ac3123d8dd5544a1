"""The broker codes mqadmin's producer, export and clean commands send, on the wire against an
in-process broker: GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), CLEAN_UNUSED_TOPIC (316),
GET_ALL_PRODUCER_INFO (328), DELETE_EXPIRED_COMMITLOG (329), and GET_BROKER_CONFIG's live port."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from tests.wire import create_topic, heartbeat, in_process_cluster, invoke, send_message

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.config import parse_properties

pytestmark = pytest.mark.timeout(60)

# What Java's `mqadmin exportConfigs` copies out of GET_BROKER_CONFIG for each master.
EXPORT_CONFIG_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
    "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)


async def test_broker_config_reports_the_live_port_and_the_export_keys(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await invoke(client, broker.address, RequestCode.GET_BROKER_CONFIG)
        assert r.code == ResponseCode.SUCCESS
        config = {s.key: str(s.value) for s in parse_properties(r.body_bytes().decode(), "test")}
        assert broker.listen_port != 0 and config["listenPort"] == str(broker.listen_port)
        assert [k for k in EXPORT_CONFIG_KEYS if k not in config] == []
        facts = (config["filterServerNums"], config["slaveReadEnable"], config["useTLS"])
        assert facts == ("0", "false", "false")


async def test_system_topic_list_and_producer_info(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        r = await invoke(client, addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        topics = orjson.loads(r.body_bytes())["topicList"]
        assert r.code == 0 and {"TBW102", "SCHEDULE_TOPIC_XXXX", broker.cluster_name} <= set(topics)

        r = await invoke(client, addr, RequestCode.GET_ALL_PRODUCER_INFO)
        assert r.code == 0 and orjson.loads(r.body_bytes()) == {"data": {}}
        assert (await heartbeat(client, addr, "127.0.0.1@p1", producer_groups=["PG1"])).code == 0
        r = await invoke(client, addr, RequestCode.GET_ALL_PRODUCER_INFO)
        (info,) = orjson.loads(r.body_bytes())["data"]["PG1"]
        assert info["clientId"] == "127.0.0.1@p1" and info["remoteIP"].startswith("127.0.0.1:")
        assert info["language"] == "PYTHON" and info["lastUpdateTimestamp"] > 0


async def test_clean_unused_topic_drops_queues_of_topics_no_longer_configured(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        for topic in ("Kept", "Gone"):
            assert (await create_topic(client, addr, topic, read=1, write=1)).code == 0
            assert (await send_message(client, addr, topic, b"x", queue_id=0)).code == 0
        # The topic table forgets "Gone" (as a hand-edited topics.json would) but its queue stays.
        broker.topic_manager.delete_topic_config("Gone")
        assert ("Gone", 0) in broker.store.consume_queues
        r = await invoke(client, addr, RequestCode.CLEAN_UNUSED_TOPIC)
        assert r.code == 0, r.remark
        queues = broker.store.consume_queues
        assert ("Gone", 0) not in queues and ("Kept", 0) in queues


async def test_delete_expired_commit_log_deletes_files_past_reserved_time_now(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Big", read=1, write=1)).code == 0
        big = b"x" * (1100 * 1024)
        store = broker.store
        while len(list(store.commit_log.mfq)) < 2:
            assert (await send_message(client, addr, "Big", big)).code == 0
        first = next(iter(store.commit_log.mfq))
        r = await invoke(client, addr, RequestCode.DELETE_EXPIRED_COMMITLOG)
        assert r.code == 0 and store.min_phy_offset == 0  # younger than fileReservedTime: kept
        first.last_modified_ms = 0  # written in 1970: long past fileReservedTime
        r = await invoke(client, addr, RequestCode.DELETE_EXPIRED_COMMITLOG)
        assert r.code == 0, r.remark
        assert store.min_phy_offset > 0
