"""Consumer membership and offsets against a real in-process broker: heartbeats, consumer lists,
NOTIFY_CONSUMER_IDS_CHANGED, channel close, unregister, offsets across a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.harness import wait_until
from tests.wire import (
    create_topic,
    heartbeat,
    in_process_cluster,
    invoke,
    pull,
    send_message,
    start_broker,
)

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(60)

T = "MemberTopic"
G = "MemberGroup"


class Notifications:
    """A consumer-side handler for the broker's NOTIFY_CONSUMER_IDS_CHANGED requests."""

    def __init__(self, client: RemotingClient) -> None:
        self.groups: list[str] = []
        client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self.handle)

    def handle(self, request: RemotingCommand, channel: Any) -> None:
        assert request.is_oneway
        self.groups.append(request.ext_fields["consumerGroup"])  # type: ignore[index]


async def _consumer_list(client: RemotingClient, addr: str, group: str) -> list[str] | None:
    r = await invoke(client, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if r.code != 0:
        assert r.code == ResponseCode.SYSTEM_ERROR and group in (r.remark or "")
        return None
    return sorted(orjson.loads(r.body_bytes())["consumerIdList"])


async def test_membership_and_notifications(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, c1):
        addr = broker.address
        await create_topic(c1, addr, T)
        n1 = Notifications(c1)
        assert await _consumer_list(c1, addr, G) is None
        assert (await heartbeat(c1, addr, "127.0.0.1@one", consumer_groups={G: [T]})).code == 0
        assert await _consumer_list(c1, addr, G) == ["127.0.0.1@one"]
        await wait_until(lambda: n1.groups == [G])
        # A second client joins: the first is told to rebalance.
        c2 = RemotingClient()
        n2 = Notifications(c2)
        try:
            assert (await heartbeat(c2, addr, "127.0.0.1@two", consumer_groups={G: [T]})).code == 0
            await wait_until(lambda: len(n1.groups) == 2)
            await wait_until(lambda: n2.groups == [G])
            assert await _consumer_list(c1, addr, G) == ["127.0.0.1@one", "127.0.0.1@two"]
            # A repeated heartbeat changes nothing and notifies nobody.
            await heartbeat(c2, addr, "127.0.0.1@two", consumer_groups={G: [T]})
            await asyncio.sleep(0.05)
            assert len(n1.groups) == 2
            # A parked pull of the second client...
            waiter = asyncio.ensure_future(pull(c2, addr, G, T, 0, 0, suspend_ms=10_000))
            await wait_until(lambda: broker.hold_service.held_count() == 1)
        finally:
            await c2.close()
        # ...goes with its connection, and so does its membership; the first client is notified.
        await wait_until(lambda: broker.hold_service.held_count() == 0)
        await wait_until(lambda: len(n1.groups) == 3)
        assert await _consumer_list(c1, addr, G) == ["127.0.0.1@one"]
        with pytest.raises(Exception):  # noqa: B017 - the closed client's own request fails locally
            await waiter


async def test_unregister_client(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await heartbeat(client, addr, "127.0.0.1@u", producer_groups=["PG"], consumer_groups={G: [T]})
        assert broker.producer_manager.group_size() == 1
        r = await invoke(client, addr, RequestCode.UNREGISTER_CLIENT,
                         {"clientID": "127.0.0.1@u", "producerGroup": "PG", "consumerGroup": G})
        assert r.code == 0
        assert broker.producer_manager.group_size() == 0
        assert await _consumer_list(client, addr, G) is None
        # An unknown client (a producer that never sent a heartbeat) and C++'s empty groups are fine too.
        r = await invoke(client, addr, RequestCode.UNREGISTER_CLIENT,
                         {"clientID": "x@y", "producerGroup": "", "consumerGroup": ""})
        assert r.code == 0


async def test_query_offset_rules(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T)
        base = {"consumerGroup": G, "topic": T, "queueId": 0}
        # A new group on a fresh queue starts at 0 (PROTOCOL.md §7 rule 8)...
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, base)
        assert r.code == 0 and r.ext_fields == {"offset": "0"}
        await send_message(client, addr, T, b"x")
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, base)
        assert r.code == 0 and r.ext_fields["offset"] == "0"
        # ...unless the client says not to.
        no_zero = {**base, "setZeroIfNotFound": "false"}
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, no_zero)
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        r = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, {**base, "commitOffset": 1})
        assert r.code == 0
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, no_zero)
        assert r.code == 0 and r.ext_fields["offset"] == "1"
        # One-way commits (the Java push consumer's way) land too.
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                      {"consumerGroup": G, "topic": T, "queueId": "1", "commitOffset": "7"},
                                      oneway=True)
        await client.invoke_oneway(addr, cmd)
        await wait_until(lambda: broker.offset_manager.query_offset(G, T, 1) == 7)
        r = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": G, "topic": T})
        assert r.code == ResponseCode.INVALID_PARAMETER


async def test_offsets_survive_restart(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T)
        for q in range(4):
            r = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                             {"consumerGroup": G, "topic": T, "queueId": q, "commitOffset": 100 + q})
            assert r.code == 0
    # The context shut the broker down (which persisted); a new broker on the same data dir reads them back.
    broker2 = await start_broker(tmp_path, None)
    client = RemotingClient()
    try:
        for q in range(4):
            r = await invoke(client, broker2.address, RequestCode.QUERY_CONSUMER_OFFSET,
                             {"consumerGroup": G, "topic": T, "queueId": q, "setZeroIfNotFound": "false"})
            assert r.code == 0 and r.ext_fields["offset"] == str(100 + q)
    finally:
        await client.close()
        await broker2.shutdown()


async def test_check_client_config(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address

        def body(expr_type: str, expr: str) -> bytes:
            return orjson.dumps({"clientId": "c", "group": G, "subscriptionData": {
                "topic": T, "subString": expr, "expressionType": expr_type, "subVersion": 1,
                "classFilterMode": False, "tagsSet": [], "codeSet": []}})

        r = await invoke(client, addr, RequestCode.CHECK_CLIENT_CONFIG, {}, body("TAG", "a || b"))
        assert r.code == 0
        r = await invoke(client, addr, RequestCode.CHECK_CLIENT_CONFIG, {}, body("SQL92", "a > 1"))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "The broker does not support consumer to filter message by SQL92")
        r = await invoke(client, addr, RequestCode.CHECK_CLIENT_CONFIG, {}, b"{bad")
        assert r.code == ResponseCode.SYSTEM_ERROR


async def test_channel_expiry_scan(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, c1):
        addr = broker.address
        n1 = Notifications(c1)
        c2 = RemotingClient()
        try:
            await heartbeat(c1, addr, "127.0.0.1@one", consumer_groups={G: [T]})
            await heartbeat(c2, addr, "127.0.0.1@two", consumer_groups={G: [T]})
            await wait_until(lambda: len(n1.groups) == 2)
            info = broker.consumer_manager.get_consumer_group_info(G)
            for member in info.channel_info_table.values():
                if member.client_id == "127.0.0.1@two":
                    member.last_update_timestamp -= 10 * 60 * 1000
            assert broker.consumer_manager.scan_not_active_channel() == 1
            await wait_until(lambda: len(n1.groups) == 3)
            assert await _consumer_list(c1, addr, G) == ["127.0.0.1@one"]
        finally:
            await c2.close()


async def test_query_offset_backlog_on_disk_is_not_found(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Java answers 0 only while the queue's first message is still in memory; a new group on an old,
    # large backlog falls back to its ConsumeFromWhere instead.
    import rocketq.broker.processors.consumer_manage as cm

    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await create_topic(client, addr, T)
        for _ in range(3):
            await send_message(client, addr, T, b"old")
        monkeypatch.setattr(cm, "_MEMORY_WINDOW", 1)
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": G, "topic": T, "queueId": 0})
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        # An empty queue is always "in memory".
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": G, "topic": T, "queueId": 1})
        assert r.code == 0 and r.ext_fields["offset"] == "0"


async def test_lock_and_unlock_batch_mq(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address

        def mqs(*ids: int) -> list[dict[str, Any]]:
            return [{"topic": T, "brokerName": broker.broker_name, "queueId": i} for i in ids]

        def locked(resp: RemotingCommand) -> list[int]:
            assert resp.code == 0, resp.remark
            return sorted(mq["queueId"] for mq in orjson.loads(resp.body_bytes())["lockOKMQSet"])

        body_a = orjson.dumps({"consumerGroup": G, "clientId": "a", "onlyThisBroker": False,
                               "mqSet": mqs(0, 1)})
        assert locked(await invoke(client, addr, RequestCode.LOCK_BATCH_MQ, {}, body_a)) == [0, 1]
        # The C++ client's shape: no onlyThisBroker, a trailing newline.
        body_b = orjson.dumps({"clientId": "b", "consumerGroup": G, "mqSet": mqs(1, 2)}) + b"\n"
        assert locked(await invoke(client, addr, RequestCode.LOCK_BATCH_MQ, {}, body_b)) == [2]
        unlock_a = orjson.dumps({"consumerGroup": G, "clientId": "a", "mqSet": mqs(1)})
        assert (await invoke(client, addr, RequestCode.UNLOCK_BATCH_MQ, {}, unlock_a)).code == 0
        assert locked(await invoke(client, addr, RequestCode.LOCK_BATCH_MQ, {}, body_b)) == [1, 2]
        # the controller's one lock table, which the send path also reads
        assert broker.rebalance_lock_manager.has_live_locks(G)
        r = await invoke(client, addr, RequestCode.LOCK_BATCH_MQ, {}, b"{bad")
        assert r.code == ResponseCode.SYSTEM_ERROR
        r = await invoke(client, addr, RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps({"mqSet": []}))
        assert r.code == ResponseCode.INVALID_PARAMETER
