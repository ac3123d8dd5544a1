"""A timer send's answer over the wire, under both flush modes: the recall handle (5.x's
SendMessageResponseHeader.recallHandle) and the queue the producer named; a pipelined run
mixing timer and plain sends keeps every answer right."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.wire import BrokerOptions, create_topic, in_process_cluster, message_properties, send_message

from rocketq.codec.codes import ResponseCode
from rocketq.codec.recall import RecallHandle
from rocketq.store.timer import TIMER_TOPIC


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_a_timer_send_answers_its_recall_handle_and_queue(tmp_path: Path, flush: str) -> None:
    opts = BrokerOptions(store={"flush_disk_type": flush})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "TS", read=4, write=4)).code == 0
        sends = []
        for i in range(8):
            extra = {"TIMER_DELAY_MS": "60000"} if i % 2 else {}
            props = message_properties(uniq_key=f"U{i:031d}", extra=extra)
            sends.append(send_message(client, addr, "TS", b"m", queue_id=i % 4, properties=props))
        answers = await asyncio.gather(*sends)
        for i, r in enumerate(answers):
            assert r.code == ResponseCode.SUCCESS, r.remark
            ext = r.ext_fields or {}
            assert ext["queueId"] == str(i % 4)
            if i % 2:
                handle = RecallHandle.decode(ext["recallHandle"])
                assert (handle.topic, handle.message_id) == ("TS", f"U{i:031d}")
                assert handle.broker_name == broker.broker_name
            else:
                assert "recallHandle" not in ext
        assert broker.store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 4
