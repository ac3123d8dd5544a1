"""QUERY_MESSAGE (by key and by UNIQ_KEY) and VIEW_MESSAGE_BY_ID against an in-process broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.harness import wait_until
from tests.wire import (
    decode_pull,
    in_process_cluster,
    invoke,
    message_properties,
    query_message,
    send_batch,
    send_message,
)

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.message import decode_offset_msg_id

pytestmark = pytest.mark.timeout(60)


async def test_query_by_key_and_unique_key(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        uniq = "C0FFEE" * 5 + "AB"
        props = message_properties(keys="order-1 order-2", uniq_key=uniq)
        assert (await send_message(client, addr, "QT", b"first", properties=props)).code == 0
        assert (await send_message(client, addr, "QT", b"second", keys="order-2")).code == 0
        assert (await send_batch(client, addr, "QT", [(b"third", {"keys": "order-1"})])).code == 0

        async def found(key: str, unique: bool = False) -> list[bytes]:
            r = await query_message(client, addr, "QT", key, unique=unique)
            if r.code != ResponseCode.SUCCESS:
                return []
            assert int(r.ext_fields["indexLastUpdateTimestamp"]) > 0  # type: ignore[index]
            return sorted(m.body for m in decode_pull(r))

        assert await wait_until(lambda: found("order-1")) == [b"first", b"third"]
        assert await found("order-2") == [b"first", b"second"]
        assert await found(uniq, unique=True) == [b"first"]
        r = await query_message(client, addr, "QT", "no-such-key")
        assert r.code == ResponseCode.QUERY_NOT_FOUND and r.remark
        # Another topic's keys are not visible.
        r = await query_message(client, addr, "OtherTopic", "order-1")
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        # A time range that excludes the messages finds nothing.
        an_hour_ago = int(time.time() * 1000) - 3_600_000
        r = await query_message(client, addr, "QT", "order-1", begin=0, end=an_hour_ago)
        assert r.code == ResponseCode.QUERY_NOT_FOUND


async def test_query_max_num(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        for i in range(5):
            assert (await send_message(client, addr, "QN", f"{i}".encode(), keys="same")).code == 0
        r = await wait_until(lambda: _query_ok(client, addr, "QN", "same", 2))
        assert len(decode_pull(r)) == 2
        r = await query_message(client, addr, "QN", "same", max_num=0)
        assert r.code == ResponseCode.INVALID_PARAMETER


async def _query_ok(client, addr: str, topic: str, key: str, max_num: int):  # type: ignore[no-untyped-def]
    r = await query_message(client, addr, topic, key, max_num=max_num)
    return r if r.code == ResponseCode.SUCCESS else None


async def test_view_message_by_id(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        r = await send_message(client, addr, "VT", b"look at me", tags="V")
        host, port, offset = decode_offset_msg_id(r.ext_fields["msgId"])  # type: ignore[index]
        assert f"{host}:{port}" == addr  # the client sends VIEW to the address inside the msgId
        v = await invoke(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset, "topic": "VT"})
        assert v.code == ResponseCode.SUCCESS, v.remark
        (m,) = decode_pull(v)
        assert m.body == b"look at me" and m.properties["TAGS"] == "V" and m.commit_log_offset == offset

        v = await invoke(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset + 1_000_000})
        assert v.code == ResponseCode.SYSTEM_ERROR and "offset" in (v.remark or "")
        v = await invoke(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": -1})
        assert v.code == ResponseCode.INVALID_PARAMETER
        v = await invoke(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "abc"})
        assert v.code == ResponseCode.INVALID_PARAMETER and "<offset>" in (v.remark or "")
        v = await invoke(client, addr, RequestCode.VIEW_MESSAGE_BY_ID, {})
        assert v.code == ResponseCode.INVALID_PARAMETER
