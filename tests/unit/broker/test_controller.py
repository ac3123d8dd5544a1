"""BrokerController life cycle with a real name server: start order, registration, restart, clusters."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from tests.harness import wait_until
from tests.wire import (
    BrokerOptions,
    broker_configs,
    create_topic,
    decode_pull,
    get_all_topic_config,
    get_route,
    invoke,
    pull,
    send_message,
    start_broker,
    start_namesrv,
)

from rocketq.broker.controller import BrokerController
from rocketq.codec.bodies import ClusterInfo
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.errors import RocketQError
from rocketq.remoting import RemotingClient
from rocketq.store import MessageStore

pytestmark = pytest.mark.timeout(60)


async def test_requests_before_the_store_is_ready_get_service_not_available(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    original = MessageStore.load

    def slow_load(self: MessageStore) -> bool:
        release.wait(10)
        return original(self)

    monkeypatch.setattr(MessageStore, "load", slow_load)
    ctl = BrokerController(*broker_configs(tmp_path, None))
    starting = asyncio.ensure_future(ctl.start())
    client = RemotingClient()
    try:
        await wait_until(lambda: ctl.server.bound_ports)
        addr = f"127.0.0.1:{ctl.server.bound_ports[0]}"
        r = await send_message(client, addr, "Early", b"x")
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "not ready" in (r.remark or "")
        assert not ctl.is_ready
        release.set()
        await starting
        assert ctl.is_ready and ctl.address == addr
        assert (await send_message(client, addr, "Early", b"x")).code == 0
    finally:
        release.set()
        await client.close()
        await ctl.shutdown()


async def test_registration_and_unregistration(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    client = RemotingClient()
    broker = await start_broker(tmp_path, ns.address)
    try:
        # Registered during start: system topics route to this broker right away.
        route = await get_route(client, ns.address, "TBW102")
        assert route is not None and route.broker_datas[0].broker_addrs[0] == broker.address
        assert route.queue_datas[0].perm == 7
        # A topic auto-created by a send is registered at once.
        assert (await send_message(client, broker.address, "AutoReg", b"x")).code == 0
        await wait_until(lambda: get_route(client, ns.address, "AutoReg"))
        r = await invoke(client, ns.address, RequestCode.GET_BROKER_CLUSTER_INFO)
        info = ClusterInfo.from_json(r.body_bytes())
        assert info.cluster_addr_table["DefaultCluster"] == ("broker-a",) or \
            list(info.cluster_addr_table["DefaultCluster"]) == ["broker-a"]
    finally:
        await broker.shutdown()
    try:
        # Shutdown unregisters: the name server forgets the broker at once.
        assert await get_route(client, ns.address, "AutoReg") is None
    finally:
        await client.close()
        await ns.shutdown()


async def test_topics_and_messages_survive_restart(tmp_path: Path) -> None:
    client = RemotingClient()
    broker = await start_broker(tmp_path, None)
    try:
        assert (await create_topic(client, broker.address, "Durable", read=3, write=3, order=True)).code == 0
        assert (await send_message(client, broker.address, "Durable", b"kept", queue_id=2)).code == 0
    finally:
        await broker.shutdown()
    broker = await start_broker(tmp_path, None)
    try:
        cfg = (await get_all_topic_config(client, broker.address))["Durable"]
        assert (cfg.write_queue_nums, cfg.order) == (3, True)
        msgs = decode_pull(await pull(client, broker.address, "G", "Durable", 2, 0))
        assert [m.body for m in msgs] == [b"kept"]
        # New sends continue after the recovered queue offsets.
        r = await send_message(client, broker.address, "Durable", b"next", queue_id=2)
        assert r.ext_fields["queueOffset"] == "1"  # type: ignore[index]
    finally:
        await client.close()
        await broker.shutdown()


async def test_two_brokers_in_one_cluster_serve_one_topic(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    client = RemotingClient()
    a = await start_broker(tmp_path, ns.address, BrokerOptions(name="broker-a"))
    b = await start_broker(tmp_path, ns.address, BrokerOptions(name="broker-b"))
    try:
        for broker in (a, b):
            assert (await create_topic(client, broker.address, "Shared", read=2, write=2)).code == 0

        async def both() -> object:
            route = await get_route(client, ns.address, "Shared")
            return route if route is not None and len(route.queue_datas) == 2 else None

        route = await wait_until(both)
        assert sorted(q.broker_name for q in route.queue_datas) == ["broker-a", "broker-b"]
        addrs = {bd.broker_name: bd.broker_addrs[0] for bd in route.broker_datas}
        assert addrs == {"broker-a": a.address, "broker-b": b.address}
        assert {bd.cluster for bd in route.broker_datas} == {"DefaultCluster"}
        for broker in (a, b):
            r = await send_message(client, broker.address, "Shared", broker.broker_name.encode())
            assert r.code == 0
            msgs = decode_pull(await pull(client, broker.address, "G", "Shared", 0, 0))
            assert [m.body for m in msgs] == [broker.broker_name.encode()]
    finally:
        await client.close()
        await a.shutdown()
        await b.shutdown()
        await ns.shutdown()


async def test_registers_with_every_name_server(tmp_path: Path) -> None:
    ns1 = await start_namesrv(tmp_path / "n1")
    ns2 = await start_namesrv(tmp_path / "n2")
    client = RemotingClient()
    broker = await start_broker(tmp_path, f"{ns1.address};{ns2.address}")
    try:
        for ns in (ns1, ns2):
            assert await get_route(client, ns.address, "TBW102") is not None
    finally:
        await client.close()
        await broker.shutdown()
        await ns1.shutdown()
        await ns2.shutdown()


async def test_unreachable_name_server_does_not_block_start(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    dead = "127.0.0.1:1"
    client = RemotingClient()
    broker = await start_broker(tmp_path, f"{dead};{ns.address}")
    try:
        assert broker.is_ready
        assert await get_route(client, ns.address, "TBW102") is not None
    finally:
        await client.close()
        await broker.shutdown()
        await ns.shutdown()


async def test_vip_port_serves_the_same_requests(tmp_path: Path) -> None:
    client = RemotingClient()
    broker = await start_broker(tmp_path, None)
    try:
        assert broker.vip_port and broker.vip_port != broker.listen_port
        vip = f"127.0.0.1:{broker.vip_port}"
        r = await send_message(client, vip, "Vip", b"fast lane")
        assert r.code == 0
        # The offset msgId names the main port, where VIEW_MESSAGE_BY_ID is sent.
        assert r.ext_fields["msgId"][8:16] == f"{broker.listen_port:08X}"  # type: ignore[index]
    finally:
        await client.close()
        await broker.shutdown()


async def test_second_broker_on_the_same_store_fails_cleanly(tmp_path: Path) -> None:
    first = await start_broker(tmp_path, None)
    second = BrokerController(*broker_configs(tmp_path, None))
    try:
        with pytest.raises(RocketQError, match="Lock failed"):
            await second.start()
        assert not second.server.is_serving
        async with RemotingClient() as client:
            assert (await send_message(client, first.address, "StillUp", b"x")).code == 0
    finally:
        await second.shutdown()
        await first.shutdown()


async def test_fixed_listen_port_and_vip_port(tmp_path: Path) -> None:
    import socket

    # Find a free pair (p, p-2) on loopback.
    for _ in range(20):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 2000:
            continue
        try:
            with socket.socket() as s2:
                s2.bind(("127.0.0.1", port - 2))
        except OSError:
            continue
        break
    broker = await start_broker(tmp_path, None, BrokerOptions(listen_port=port))
    try:
        assert (broker.listen_port, broker.vip_port) == (port, port - 2)
        assert broker.address == f"127.0.0.1:{port}"
    finally:
        await broker.shutdown()


async def test_shutdown_is_idempotent(tmp_path: Path) -> None:
    broker = await start_broker(tmp_path, None)
    await broker.shutdown()
    await broker.shutdown()
    assert (tmp_path / "store-broker-a" / "config" / "topics.json").exists()
    assert not (tmp_path / "store-broker-a" / "abort").exists()
