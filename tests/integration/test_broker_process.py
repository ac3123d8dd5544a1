"""The broker as users start it (`rocketq up`, a real process), driven over TCP with raw requests:
send (V1, V2, batch), route in the name server, read back, query, restart and kill -9 recovery."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.harness import start_cluster, wait_until
from tests.wire import (
    create_topic,
    decode_pull,
    get_all_topic_config,
    get_route,
    pull,
    query_message,
    send_batch,
    send_message,
)

from rocketq.codec.codes import ResponseCode
from rocketq.codec.message import decode_offset_msg_id
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(90)]


async def test_rocketq_up_serves_sends_and_survives_restart(tmp_path: Path) -> None:
    cluster = await asyncio.to_thread(start_cluster, tmp_path)
    try:
        async with RemotingClient() as client:
            broker, ns = cluster.broker, cluster.namesrv
            r = await send_message(client, broker, "ProcT", b"v2", tags="A", keys="pk")
            assert r.code == ResponseCode.SUCCESS, cluster.proc.describe()
            host, port, _ = decode_offset_msg_id(r.ext_fields["msgId"])  # type: ignore[index]
            assert f"{host}:{port}" == broker
            assert (await send_message(client, broker, "ProcT", b"v1", v2=False)).code == 0
            assert (await send_batch(client, broker, "ProcT", [b"b1", b"b2"])).code == 0
            route = await wait_until(lambda: get_route(client, ns, "ProcT"))
            assert route.broker_datas[0].broker_addrs[0] == broker
            msgs = decode_pull(await pull(client, broker, "G", "ProcT", 0, 0))
            assert [m.body for m in msgs] == [b"v2", b"v1", b"b1", b"b2"]
            found = await wait_until(lambda: _query(client, broker, "ProcT", "pk"))
            assert [m.body for m in found] == [b"v2"]
            assert (await create_topic(client, broker, "Created", read=2, write=2)).code == 0
        assert await asyncio.to_thread(cluster.proc.stop, 20.0) == 0, cluster.proc.describe()

        cluster = await asyncio.to_thread(start_cluster, tmp_path)
        async with RemotingClient() as client:
            msgs = decode_pull(await pull(client, cluster.broker, "G", "ProcT", 0, 0))
            assert [m.body for m in msgs] == [b"v2", b"v1", b"b1", b"b2"]
            assert "Created" in await get_all_topic_config(client, cluster.broker)
            await wait_until(lambda: get_route(client, cluster.namesrv, "Created"))
    finally:
        await asyncio.to_thread(cluster.proc.stop, 20.0)


async def test_acked_messages_survive_kill_9(tmp_path: Path) -> None:
    cluster = await asyncio.to_thread(start_cluster, tmp_path)
    try:
        async with RemotingClient() as client:
            for i in range(50):
                r = await send_message(client, cluster.broker, "KillT", f"m{i}".encode())
                assert r.code == 0
        cluster.proc.kill()
        cluster = await asyncio.to_thread(start_cluster, tmp_path)
        async with RemotingClient() as client:
            bodies: list[bytes] = []
            while len(bodies) < 50:
                r = await pull(client, cluster.broker, "G", "KillT", 0, len(bodies))
                assert r.code == ResponseCode.SUCCESS, r.remark
                bodies += [m.body for m in decode_pull(r)]
            assert bodies == [f"m{i}".encode() for i in range(50)]
            r = await send_message(client, cluster.broker, "KillT", b"after")
            assert r.code == 0 and r.ext_fields["queueOffset"] == "50"  # type: ignore[index]
    finally:
        await asyncio.to_thread(cluster.proc.stop, 20.0)


async def _query(client: RemotingClient, addr: str, topic: str, key: str) -> list[object] | None:
    r = await query_message(client, addr, topic, key)
    return decode_pull(r) if r.code == ResponseCode.SUCCESS else None  # type: ignore[return-value]
