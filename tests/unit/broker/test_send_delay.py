"""Delay levels (DELAY property), the schedule service and CONSUMER_SEND_MSG_BACK, over the wire."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from tests.harness import wait_until
from tests.wire import (
    BrokerOptions,
    decode_pull,
    get_max_offset,
    heartbeat,
    in_process_cluster,
    invoke,
    message_properties,
    pull,
    send_message,
    start_broker,
)

from rocketq.broker.schedule import FIRST_DELAY
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(60)

LEVELS = {"message_delay_level": "1s 2s 3s"}
OPTS = BrokerOptions(store=LEVELS)
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


async def test_delayed_message_is_staged_then_delivered(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, OPTS, with_namesrv=False) as (_, b, client):
        addr = b.address
        props = message_properties(tags="D", keys="dk", extra={"DELAY": "1"})
        sent_at = time.time()
        r = await send_message(client, addr, "DelayT", b"later", properties=props, queue_id=1)
        assert r.code == 0, r.remark
        staged_id = r.ext_fields["msgId"]  # type: ignore[index]
        uniq = r.ext_fields["transactionId"]  # type: ignore[index]
        # Staged in SCHEDULE_TOPIC_XXXX queue level-1, not yet visible on the real topic.
        assert await get_max_offset(client, addr, SCHEDULE, 0) == 1
        assert await get_max_offset(client, addr, "DelayT", 1) == 0
        staged = decode_pull(await pull(client, addr, "G", SCHEDULE, 0, 0))[0]
        assert staged.properties["REAL_TOPIC"] == "DelayT" and staged.properties["REAL_QID"] == "1"

        await wait_until(lambda: b.store.get_max_offset_in_queue("DelayT", 1) == 1, timeout=10)
        assert time.time() - sent_at >= 0.9
        m = decode_pull(await pull(client, addr, "G", "DelayT", 1, 0))[0]
        assert m.body == b"later" and m.properties["UNIQ_KEY"] == uniq
        assert m.offset_msg_id != staged_id
        assert m.properties["TAGS"] == "D"
        # Delivered on the real topic's tag code: a tag subscription matches.
        assert decode_pull(await pull(client, addr, "G", "DelayT", 1, 0, subscription="D"))
        # And it is found through the index by key.
        from tests.wire import query_message

        await wait_until(lambda: query_message(client, addr, "DelayT", "dk"), timeout=5)


async def test_the_delay_service_sleeps_until_a_delayed_message_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No polling while nothing is staged (issue 9: an idle broker woke 10 times a second per level);
    a put on the schedule topic wakes the service, which then sleeps until the head is due."""
    async with in_process_cluster(tmp_path, OPTS, with_namesrv=False) as (_, b, client):
        svc = b.schedule_service
        looked_at: list[int] = []
        deliver_due = svc.deliver_due

        async def counting(level: int, now: int | None = None) -> int:
            looked_at.append(level)
            return await deliver_due(level, now)

        monkeypatch.setattr(svc, "deliver_due", counting)
        await asyncio.sleep(FIRST_DELAY + 1.0)
        # one pass over the levels at start-up; polling every 100 ms would have made about ten
        assert len(looked_at) <= 2 * svc.max_delay_level, looked_at
        assert svc.next_due_in() is None

        props = message_properties(extra={"DELAY": "2"})
        sent_at = time.time()
        assert (await send_message(client, b.address, "SleepT", b"x", properties=props)).code == 0
        # woken by the put, it read the head: due 2 s after it was stored (on a 100 ms grid)
        await wait_until(lambda: (svc.next_due_in() or 0) > 0.5, timeout=5)
        assert svc.next_due_in() <= 2.1
        await wait_until(lambda: b.store.get_max_offset_in_queue("SleepT", 0) == 1, timeout=10)
        assert time.time() - sent_at >= 1.9
        assert svc.next_due_in() is None


async def test_delay_level_above_max_is_clamped(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, OPTS, with_namesrv=False) as (_, b, client):
        props = message_properties(extra={"DELAY": "99"})
        assert (await send_message(client, b.address, "Clamp", b"x", properties=props)).code == 0
        assert await get_max_offset(client, b.address, SCHEDULE, 2) == 1


async def test_delay_progress_survives_restart(tmp_path: Path) -> None:
    opts = BrokerOptions(store=LEVELS)
    broker = await start_broker(tmp_path, None, opts)
    client = RemotingClient()
    try:
        props = message_properties(extra={"DELAY": "1"})
        assert (await send_message(client, broker.address, "Restart", b"first", properties=props)).code == 0
        await wait_until(lambda: broker.store.get_max_offset_in_queue("Restart", 0) == 1, timeout=10)
        props = message_properties(extra={"DELAY": "3"})
        assert (await send_message(client, broker.address, "Restart", b"second", properties=props)).code == 0
    finally:
        await broker.shutdown()
    saved = orjson.loads((tmp_path / "store-broker-a" / "config" / "delayOffset.json").read_bytes())
    assert saved["offsetTable"]["1"] == 1

    broker = await start_broker(tmp_path, None, opts)
    try:
        await wait_until(lambda: broker.store.get_max_offset_in_queue("Restart", 0) == 2, timeout=10)
        bodies = [m.body for m in decode_pull(await pull(client, broker.address, "G", "Restart", 0, 0))]
        assert bodies == [b"first", b"second"]  # nothing delivered twice
    finally:
        await client.close()
        await broker.shutdown()


async def test_get_all_delay_offset(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, OPTS, with_namesrv=False) as (_, b, client):
        r = await invoke(client, b.address, RequestCode.GET_ALL_DELAY_OFFSET)
        assert r.code == 0 and "offsetTable" in orjson.loads(r.body_bytes())


async def test_consumer_send_msg_back_to_retry_then_dlq(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, OPTS, with_namesrv=False) as (_, b, client):
        addr = b.address
        assert (await heartbeat(client, addr, "cid", consumer_groups={"GB": ["BackT"]})).code == 0
        r = await send_message(client, addr, "BackT", b"fail me", tags="T")
        offset = int(r.ext_fields["msgId"][-16:], 16)  # type: ignore[index]

        origin = r.ext_fields["transactionId"]  # type: ignore[index]
        back = {"offset": offset, "group": "GB", "delayLevel": 1, "originMsgId": origin,
                "originTopic": "BackT", "unitMode": False, "maxReconsumeTimes": 16}
        resp = await invoke(client, addr, RequestCode.CONSUMER_SEND_MSG_BACK, back)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        await wait_until(lambda: b.store.get_max_offset_in_queue("%RETRY%GB", 0) == 1, timeout=10)
        m = decode_pull(await pull(client, addr, "G", "%RETRY%GB", 0, 0))[0]
        assert m.body == b"fail me" and m.reconsume_times == 1
        assert m.properties["RETRY_TOPIC"] == "BackT"
        assert m.properties["ORIGIN_MESSAGE_ID"] == r.ext_fields["msgId"]  # type: ignore[index]

        resp = await invoke(client, addr, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "delayLevel": -1})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        dlq = decode_pull(await pull(client, addr, "G", "%DLQ%GB", 0, 0))
        assert [x.body for x in dlq] == [b"fail me"]

        bad = await invoke(client, addr, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": -5})
        assert bad.code == ResponseCode.INVALID_PARAMETER
        missing = await invoke(client, addr, RequestCode.CONSUMER_SEND_MSG_BACK, {**back, "offset": 1 << 40})
        assert missing.code == ResponseCode.SYSTEM_ERROR
