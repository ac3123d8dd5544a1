"""A real NamesrvController on 127.0.0.1 port 0, driven the way brokers and clients drive it:
RemotingClient + RemotingCommand with RocketMQ's wire names (PROTOCOL.md §2.2)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from tests.harness import wait_until

from rocketq.codec.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.config import NamesrvConfig
from rocketq.namesrv.server import NamesrvController
from rocketq.remoting import RemotingClient, RemotingServerConfig

pytestmark = pytest.mark.timeout(30)

CLUSTER = "DefaultCluster"


def make_config(tmp_path: Path, **overrides: Any) -> NamesrvConfig:
    ns_dir = tmp_path / "namesrv"
    return NamesrvConfig(
        listen_port=0,
        kv_config_path=str(ns_dir / "kvConfig.json"),
        config_store_path=str(ns_dir / "namesrv.properties"),
        **overrides,
    )


async def start(tmp_path: Path, **overrides: Any) -> NamesrvController:
    ctl = NamesrvController(make_config(tmp_path, **overrides), RemotingServerConfig(listen_port=0))
    await ctl.start()
    return ctl


@pytest.fixture
async def ns(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    ctl = await start(tmp_path)
    try:
        yield ctl
    finally:
        await ctl.shutdown()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    try:
        yield c
    finally:
        await c.close()


async def call(
    client: RemotingClient, addr: str, code: int, ext: Mapping[str, Any] | None = None, body: bytes = b""
) -> RemotingCommand:
    fields = None if ext is None else {k: str(v) for k, v in ext.items()}
    return await client.invoke(addr, RemotingCommand.request(code, fields, body), 5.0)


def register_body(*topics: TopicConfig, version: DataVersion | None = None) -> RegisterBrokerBody:
    wrapper = TopicConfigSerializeWrapper(
        {t.topic_name: t for t in topics}, version or DataVersion(0, 1_700_000_000_000, 1)
    )
    return RegisterBrokerBody(wrapper)


async def register(
    client: RemotingClient,
    addr: str,
    name: str,
    broker_addr: str,
    *topics: TopicConfig,
    broker_id: int = 0,
    compressed: bool = False,
    crc: bool = True,
    version: DataVersion | None = None,
    **extra: Any,
) -> RemotingCommand:
    body = register_body(*topics, version=version).encode(compressed)
    ext = {
        "brokerName": name,
        "brokerAddr": broker_addr,
        "clusterName": CLUSTER,
        "haServerAddr": broker_addr.replace(":109", ":119"),
        "brokerId": broker_id,
        "compressed": "true" if compressed else "false",
        "bodyCrc32": (zlib.crc32(body) & 0x7FFFFFFF) if crc else 0,
        **extra,
    }
    return await call(client, addr, RequestCode.REGISTER_BROKER, ext, body)


async def route(client: RemotingClient, addr: str, topic: str) -> RemotingCommand:
    return await call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


# -- registration and routes -----------------------------------------------------------------------


async def test_two_brokers_of_one_cluster_serve_one_topic(
    ns: NamesrvController, client: RemotingClient
) -> None:
    for name, addr in (("broker-a", "127.0.0.1:10911"), ("broker-b", "127.0.0.1:10921")):
        resp = await register(client, ns.address, name, addr, TopicConfig("TopicTest", 4, 4))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await route(client, ns.address, "TopicTest")
    assert resp.code == ResponseCode.SUCCESS
    raw = resp.body_bytes()
    assert b" " not in raw and b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in raw
    data = TopicRouteData.from_json(raw)
    assert sorted(q.broker_name for q in data.queue_datas) == ["broker-a", "broker-b"]
    assert {b.broker_name: b.master_addr for b in data.broker_datas} == {
        "broker-a": "127.0.0.1:10911",
        "broker-b": "127.0.0.1:10921",
    }
    info = ClusterInfo.from_json(
        (await call(client, ns.address, RequestCode.GET_BROKER_CLUSTER_INFO)).body_bytes()
    )
    assert info.cluster_addr_table == {CLUSTER: ("broker-a", "broker-b")}
    topics = TopicList.from_json(
        (await call(client, ns.address, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER})).body_bytes()
    )
    assert topics.topic_list == ("TopicTest",)


async def test_unknown_topic_is_topic_not_exist(ns: NamesrvController, client: RemotingClient) -> None:
    resp = await route(client, ns.address, "nope")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == "No topic route info in name server for the topic: nope"


async def test_unregister_removes_the_broker(ns: NamesrvController, client: RemotingClient) -> None:
    await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
    await register(client, ns.address, "broker-b", "127.0.0.1:10921", TopicConfig("T", 4, 4))
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": CLUSTER, "brokerId": 0}
    assert (await call(client, ns.address, RequestCode.UNREGISTER_BROKER, ext)).code == 0
    data = TopicRouteData.from_json((await route(client, ns.address, "T")).body_bytes())
    assert [b.broker_name for b in data.broker_datas] == ["broker-b"]
    ext = {"brokerName": "broker-b", "brokerAddr": "127.0.0.1:10921", "clusterName": CLUSTER, "brokerId": 0}
    assert (await call(client, ns.address, RequestCode.UNREGISTER_BROKER, ext)).code == 0
    assert (await route(client, ns.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_slave_learns_its_master(ns: NamesrvController, client: RemotingClient) -> None:
    await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
    resp = await register(
        client, ns.address, "broker-a", "127.0.0.1:10931", TopicConfig("T", 4, 4), broker_id=1
    )
    assert resp.code == 0
    assert resp.ext("masterAddr") == "127.0.0.1:10911"
    assert resp.ext("haServerAddr") == "127.0.0.1:11911"


async def test_compressed_register_body(ns: NamesrvController, client: RemotingClient) -> None:
    topics = [TopicConfig(f"T{i}", 2, 2) for i in range(50)]
    resp = await register(client, ns.address, "broker-a", "127.0.0.1:10911", *topics, compressed=True)
    assert resp.code == 0, resp.remark
    data = TopicRouteData.from_json((await route(client, ns.address, "T49")).body_bytes())
    assert data.queue_datas == (QueueData("broker-a", 2, 2, 6, 0),)


async def test_crc_mismatch_is_refused(ns: NamesrvController, client: RemotingClient) -> None:
    body = register_body(TopicConfig("T")).encode()
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": CLUSTER,
        "haServerAddr": "127.0.0.1:10912",
        "brokerId": 0,
        "compressed": "false",
        "bodyCrc32": (zlib.crc32(body) & 0x7FFFFFFF) ^ 1,
    }
    resp = await call(client, ns.address, RequestCode.REGISTER_BROKER, ext, body)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert (await route(client, ns.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST
    # bodyCrc32 = 0 means "not computed" and is accepted.
    assert (
        await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"), crc=False)
    ).code == 0


async def test_bad_requests_get_codes_and_remarks(ns: NamesrvController, client: RemotingClient) -> None:
    resp = await call(client, ns.address, 9999)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 9999 not supported"
    resp = await call(client, ns.address, RequestCode.REGISTER_BROKER, {"brokerName": "b"}, b"{}")
    assert resp.code == ResponseCode.INVALID_PARAMETER and "brokerAddr" in (resp.remark or "")
    resp = await call(
        client,
        ns.address,
        RequestCode.REGISTER_BROKER,
        {
            "brokerName": "b",
            "brokerAddr": "1.2.3.4:5",
            "clusterName": "c",
            "haServerAddr": "",
            "brokerId": 0,
            "compressed": "true",
            "bodyCrc32": 0,
        },
        b"definitely not zlib",
    )
    assert resp.code == ResponseCode.INVALID_PARAMETER and resp.remark
    resp = await call(
        client,
        ns.address,
        RequestCode.QUERY_DATA_VERSION,
        {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": 0},
        b"[1,2",
    )
    assert resp.code == ResponseCode.INVALID_PARAMETER
    # The server is still fine.
    assert (await route(client, ns.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_garbage_frame_closes_only_that_connection(
    ns: NamesrvController, client: RemotingClient
) -> None:
    host, port = ns.address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    # A frame whose header length exceeds the frame: undecodable.
    writer.write(b"\x00\x00\x00\x08\x00\xff\xff\xff" + b"garbage!")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5.0) == b""  # the server closed it
    writer.close()
    assert (await route(client, ns.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_query_data_version(ns: NamesrvController, client: RemotingClient) -> None:
    version = DataVersion(0, 1_700_000_000_000, 7)
    await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"), version=version)
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": CLUSTER, "brokerId": 0}
    resp = await call(client, ns.address, RequestCode.QUERY_DATA_VERSION, ext, version.to_json())
    assert resp.code == 0 and resp.ext("changed") == "false"
    assert DataVersion.from_json(resp.body_bytes()) == version
    newer = DataVersion(0, 1_700_000_000_001, 8)
    resp = await call(client, ns.address, RequestCode.QUERY_DATA_VERSION, ext, newer.to_json())
    assert resp.ext("changed") == "true"


async def test_write_perm_wipe_and_add(ns: NamesrvController, client: RemotingClient) -> None:
    await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"), TopicConfig("U"))
    resp = await call(client, ns.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.code == 0 and resp.ext("wipeTopicCount") == "2"
    data = TopicRouteData.from_json((await route(client, ns.address, "T")).body_bytes())
    assert data.queue_datas[0].perm == 4
    resp = await call(client, ns.address, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.code == 0 and resp.ext("addTopicCount") == "2"
    data = TopicRouteData.from_json((await route(client, ns.address, "T")).body_bytes())
    assert data.queue_datas[0].perm == 6


async def test_topic_admin(ns: NamesrvController, client: RemotingClient) -> None:
    await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"), TopicConfig("U"))
    listed = await call(client, ns.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert set(TopicList.from_json(listed.body_bytes()).topic_list) == {"T", "U"}
    assert (await call(client, ns.address, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})).code == 0
    assert (await route(client, ns.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST
    body = TopicRouteData(queue_datas=(QueueData("broker-a", 3, 3, 6, 0),)).to_json()
    resp = await call(client, ns.address, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "X"}, body)
    assert resp.code == 0
    data = TopicRouteData.from_json((await route(client, ns.address, "X")).body_bytes())
    assert data.queue_datas == (QueueData("broker-a", 3, 3, 6, 0),)
    body = TopicRouteData(queue_datas=(QueueData("ghost", 3, 3, 6, 0),)).to_json()
    resp = await call(client, ns.address, RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Y"}, body)
    assert resp.code == ResponseCode.INVALID_PARAMETER and "ghost" in (resp.remark or "")


async def test_all_topic_list_can_be_disabled(tmp_path: Path, client: RemotingClient) -> None:
    ctl = await start(tmp_path, enable_all_topic_list=False)
    try:
        resp = await call(client, ctl.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
    finally:
        await ctl.shutdown()


# -- liveness ----------------------------------------------------------------------------------------


async def test_silent_broker_expires(tmp_path: Path, client: RemotingClient) -> None:
    ctl = await start(tmp_path, broker_channel_expired_time=300, scan_not_active_broker_interval=50)
    # Each broker on its own connection, as real brokers are: expiry closes the expired one's.
    conn_a, conn_b = RemotingClient(), RemotingClient()
    try:
        await register(conn_a, ctl.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"))
        # A broker may ask for its own, shorter timeout.
        await register(
            conn_b, ctl.address, "broker-b", "127.0.0.1:10921", TopicConfig("U"), heartbeatTimeoutMillis=100
        )
        assert (await route(client, ctl.address, "T")).code == 0

        async def u_gone() -> bool:
            return (await route(client, ctl.address, "U")).code == ResponseCode.TOPIC_NOT_EXIST

        await wait_until(u_gone)
        assert (await route(client, ctl.address, "T")).code == 0
        assert not conn_b.channels  # the name server closed the expired broker's connection

        async def t_gone() -> bool:
            return (await route(client, ctl.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST

        await wait_until(t_gone)
    finally:
        await conn_a.close()
        await conn_b.close()
        await ctl.shutdown()


async def test_closed_channel_removes_its_broker_at_once(
    ns: NamesrvController, client: RemotingClient
) -> None:
    broker_conn = RemotingClient()
    await register(broker_conn, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"))
    await register(client, ns.address, "broker-b", "127.0.0.1:10921", TopicConfig("T"))
    await broker_conn.close()

    async def only_b() -> bool:
        data = TopicRouteData.from_json((await route(client, ns.address, "T")).body_bytes())
        return [b.broker_name for b in data.broker_datas] == ["broker-b"]

    await wait_until(only_b, timeout=2.0)


# -- KV config -----------------------------------------------------------------------------------------


async def test_kv_round_trip_survives_restart(tmp_path: Path, client: RemotingClient) -> None:
    ctl = await start(tmp_path)
    ns_key = {"namespace": "ORDER_TOPIC_CONFIG", "key": "OrderTopic"}
    try:
        resp = await call(client, ctl.address, RequestCode.GET_KV_CONFIG, ns_key)
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        resp = await call(client, ctl.address, RequestCode.PUT_KV_CONFIG, {**ns_key, "value": "broker-a:4"})
        assert resp.code == 0
        await call(
            client, ctl.address, RequestCode.PUT_KV_CONFIG, {"namespace": "x", "key": "k", "value": "v"}
        )
        await call(client, ctl.address, RequestCode.DELETE_KV_CONFIG, {"namespace": "x", "key": "k"})
    finally:
        await ctl.shutdown()
    ctl = await start(tmp_path)
    try:
        resp = await call(client, ctl.address, RequestCode.GET_KV_CONFIG, ns_key)
        assert resp.code == 0 and resp.ext("value") == "broker-a:4"
        resp = await call(
            client, ctl.address, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"}
        )
        assert KVTable.from_json(resp.body_bytes()).table == {"OrderTopic": "broker-a:4"}
        resp = await call(client, ctl.address, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "x"})
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
    finally:
        await ctl.shutdown()


async def test_order_topic_conf(tmp_path: Path, client: RemotingClient) -> None:
    ctl = await start(tmp_path, order_message_enable=True)
    try:
        kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
        await call(client, ctl.address, RequestCode.PUT_KV_CONFIG, kv)
        resp = await register(client, ctl.address, "broker-a", "127.0.0.1:10911", TopicConfig("T", 4, 4))
        assert KVTable.from_json(resp.body_bytes()).table == {"T": "broker-a:4"}
        data = TopicRouteData.from_json((await route(client, ctl.address, "T")).body_bytes())
        assert data.order_topic_conf == "broker-a:4"
        # The cached route follows a KV change.
        await call(client, ctl.address, RequestCode.PUT_KV_CONFIG, {**kv, "value": "broker-a:8"})
        data = TopicRouteData.from_json((await route(client, ctl.address, "T")).body_bytes())
        assert data.order_topic_conf == "broker-a:8"
    finally:
        await ctl.shutdown()


# -- config over the wire (CVE-2023-37582) -------------------------------------------------------------


async def test_get_and_update_namesrv_config(
    tmp_path: Path, ns: NamesrvController, client: RemotingClient
) -> None:
    resp = await call(client, ns.address, RequestCode.GET_NAMESRV_CONFIG)
    text = resp.body_bytes().decode()
    assert "orderMessageEnable=false" in text and "kvConfigPath=" in text
    resp = await call(
        client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"
    )
    assert resp.code == 0, resp.remark
    assert ns.namesrv_config.order_message_enable is True
    text = (await call(client, ns.address, RequestCode.GET_NAMESRV_CONFIG)).body_bytes().decode()
    assert "orderMessageEnable=true" in text
    assert "orderMessageEnable=true" in (tmp_path / "namesrv" / "namesrv.properties").read_text()


@pytest.mark.parametrize(
    "key",
    ["kvConfigPath", "configStorePath", "rocketmqHome", "configBlackList", "kv_config_path", "KVCONFIGPATH"],
)
async def test_path_keys_can_never_be_updated(
    tmp_path: Path, ns: NamesrvController, client: RemotingClient, key: str
) -> None:
    target = tmp_path / "pwned"
    before = ns.namesrv_config
    body = f"orderMessageEnable=true\n{key}={target}\n".encode()
    resp = await call(client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
    assert resp.code in (ResponseCode.NO_PERMISSION, ResponseCode.INVALID_PARAMETER)
    assert key in (resp.remark or "")
    assert ns.namesrv_config == before  # all or nothing: orderMessageEnable did not change either
    # The kv store still writes where it did, never to the attacker's path.
    await call(client, ns.address, RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"})
    assert not target.exists()
    assert (tmp_path / "namesrv" / "kvConfig.json").exists()


async def test_blacklisted_keys_answer_no_permission(ns: NamesrvController, client: RemotingClient) -> None:
    resp = await call(client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n")
    assert resp.code == ResponseCode.NO_PERMISSION and "kvConfigPath" in (resp.remark or "")


async def test_unknown_or_bad_config_values(ns: NamesrvController, client: RemotingClient) -> None:
    resp = await call(client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"noSuchKey=1\n")
    assert resp.code == ResponseCode.INVALID_PARAMETER and "noSuchKey" in (resp.remark or "")
    resp = await call(
        client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"scanNotActiveBrokerInterval=soon\n"
    )
    assert resp.code == ResponseCode.INVALID_PARAMETER and "scanNotActiveBrokerInterval" in (
        resp.remark or ""
    )
    resp = await call(client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"\xff\xfe")
    assert resp.code == ResponseCode.INVALID_PARAMETER


async def test_updated_expiry_takes_effect(ns: NamesrvController, client: RemotingClient) -> None:
    body = b"brokerChannelExpiredTime=200\nscanNotActiveBrokerInterval=50\n"
    assert (await call(client, ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)).code == 0
    await register(client, ns.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"))

    async def gone() -> bool:
        return (await route(client, ns.address, "T")).code == ResponseCode.TOPIC_NOT_EXIST

    await wait_until(gone, timeout=10.0)


# -- several name servers --------------------------------------------------------------------------------


async def test_two_name_servers_and_a_real_broker(tmp_path: Path, client: RemotingClient) -> None:
    from tests.wire import BrokerOptions, start_broker

    ns1 = await start(tmp_path / "ns1")
    ns2 = await start(tmp_path / "ns2")
    broker = None
    try:
        broker = await start_broker(tmp_path, f"{ns1.address};{ns2.address}", BrokerOptions(name="broker-a"))
        for ns in (ns1, ns2):
            resp = await call(client, ns.address, RequestCode.GET_BROKER_CLUSTER_INFO)
            info = ClusterInfo.from_json(resp.body_bytes())
            assert info.broker_addr_table["broker-a"].master_addr == broker.address
            # Every broker serves a topic named after itself.
            data = TopicRouteData.from_json((await route(client, ns.address, "broker-a")).body_bytes())
            assert data.broker_datas[0].master_addr == broker.address
        await ns1.shutdown()
        # The other one keeps serving on its own, and the broker keeps talking to it.
        assert (await route(client, ns2.address, "broker-a")).code == 0
        await broker.shutdown()
        broker = None
        # A stopping broker unregisters (or its channel closes): the survivor forgets it at once.
        assert (await route(client, ns2.address, "broker-a")).code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        if broker is not None:
            await broker.shutdown()
        await ns1.shutdown()
        await ns2.shutdown()


async def test_need_wait_for_service_holds_routes_back(tmp_path: Path, client: RemotingClient) -> None:
    ctl = await start(tmp_path, need_wait_for_service=True, wait_seconds_for_service=60)
    try:
        await register(client, ctl.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"))
        resp = await route(client, ctl.address, "T")
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "name remoting_server not ready")
    finally:
        await ctl.shutdown()
    ctl = await start(tmp_path, need_wait_for_service=True, wait_seconds_for_service=0)
    try:
        await register(client, ctl.address, "broker-a", "127.0.0.1:10911", TopicConfig("T"))
        assert (await route(client, ctl.address, "T")).code == 0
    finally:
        await ctl.shutdown()
