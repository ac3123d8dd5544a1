"""Pipelined sends: a run of requests read together is stored in arrival order and answered per
request, exactly as one-at-a-time sends are; the lean V2 header read agrees with the typed one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.wire import (
    BrokerOptions,
    batch_body,
    create_topic,
    decode_pull,
    in_process_cluster,
    message_properties,
    pull,
    send_header,
    send_message,
)

from rocketq.broker.processors.send_wire import v2_fields as _v2_fields
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.codec.headers import SendMessageRequestHeader
from rocketq.codec.message import BatchItem, decode_offset_msg_id, encode_batch_body, tags_code
from rocketq.errors import InvalidParameter, RocketQError
from rocketq.remoting import split_address


class _Collect(asyncio.Protocol):
    def __init__(self, expected: int) -> None:
        self.decoder = FrameDecoder()
        self.responses: list[RemotingCommand] = []
        self.expected = expected
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.responses += self.decoder.feed(data)
        if len(self.responses) >= self.expected and not self.done.done():
            self.done.set_result(None)


async def exchange(addr: str, requests: list[RemotingCommand]) -> list[RemotingCommand]:
    """Every request in ONE write on a fresh connection (one read on the broker side); the
    responses in request order."""
    host, port = split_address(addr)
    transport, proto = await asyncio.get_running_loop().create_connection(
        lambda: _Collect(len(requests)), host, port)
    try:
        transport.write(b"".join(encode_frame_bytes(r) for r in requests))
        await asyncio.wait_for(proto.done, 10)
    finally:
        transport.close()
    by_opaque = {r.opaque: r for r in proto.responses}
    return [by_opaque[r.opaque] for r in requests]


def single(topic: str, i: int, queue_id: int, **props: Any) -> RemotingCommand:
    ext = send_header(topic, queue_id=queue_id, properties=message_properties(tags=f"T{i % 2}", **props))
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"m-%d" % i)


def spy_runs(broker: Any) -> list[int]:
    sizes: list[int] = []
    runs = broker.server._run_processors
    real = runs[RequestCode.SEND_MESSAGE_V2]
    runs[RequestCode.SEND_MESSAGE_V2] = lambda requests, channel: (sizes.append(len(requests)),
                                                                   real(requests, channel))[1]
    return sizes


async def test_a_pipelined_run_is_stored_in_arrival_order(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Run", read=4, write=4)).code == 0
        sizes = spy_runs(broker)
        requests = [single("Run", i, i % 4) for i in range(40)]
        requests[7] = single("Run", 7, 99)  # no such queue: refused alone
        requests[20] = single("Run", 20, 0, extra={"TIMER_DELAY_SEC": "999999999"})  # refused alone
        body, uniqs = batch_body([b"b1", b"b2", b"b3"])  # a V2 request carrying a batch, mid-run
        ext = send_header("Run", queue_id=1, properties=message_properties(), batch=True)
        requests[30] = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)
        responses = await exchange(addr, requests)

        assert max(sizes) > 1
        assert responses[7].code == InvalidParameter.code and "queueId[99]" in (responses[7].remark or "")
        assert responses[20].code == ResponseCode.MESSAGE_ILLEGAL
        stored = [(i, r) for i, r in enumerate(responses) if i not in (7, 20)]
        assert all(r.code == 0 for _, r in stored), [(i, r.code, r.remark) for i, r in stored if r.code]
        # commit-log offsets follow the order the requests arrived in
        offsets = [decode_offset_msg_id(r.ext_fields["msgId"].split(",")[0])[2]  # type: ignore[index]
                   for _, r in stored]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        # queue offsets are consecutive per queue, in arrival order
        per_queue: dict[int, list[int]] = {}
        for i, r in stored:
            ext = r.ext_fields
            assert ext is not None
            if i != 30:
                per_queue.setdefault(int(ext["queueId"]), []).append(int(ext["queueOffset"]))
                assert ext["transactionId"] == requests[i].ext_fields["i"].split("UNIQ_KEY\x01")[1]  # type: ignore[index]
        q1_before = sum(1 for i, _ in stored if i < 30 and i % 4 == 1)
        assert int(responses[30].ext_fields["queueOffset"]) == q1_before  # type: ignore[index]
        for q, offs in per_queue.items():
            expected = list(range(len(offs)))
            if q == 1:  # the batch took three offsets in the middle
                expected = [o if o < q1_before else o + 3 for o in expected]
            assert offs == expected, q
        msgs = decode_pull(await pull(client, addr, "G", "Run", 1, 0, max_nums=64))
        assert [m.body for m in msgs] == [b"m-%d" % i for i in range(1, 30, 4)] + [b"b1", b"b2", b"b3"] + [
            b"m-%d" % i for i in range(33, 40, 4)]
        assert [m.properties["UNIQ_KEY"] for m in msgs[8:11]] == uniqs
        assert [m.queue_offset for m in msgs] == list(range(len(msgs)))


async def test_a_sync_flush_run_is_answered_once_durable(tmp_path: Path) -> None:
    opts = BrokerOptions(store={"flush_disk_type": "SYNC_FLUSH"})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Sync", read=2, write=2)).code == 0
        requests = [single("Sync", i, i % 2) for i in range(30)]
        requests[5] = single("Sync", 5, 0, wait=False)
        responses = await exchange(addr, requests)
        assert [r.code for r in responses] == [0] * 30
        ends = [decode_offset_msg_id(r.ext_fields["msgId"])[2] for r in responses]  # type: ignore[index]
        assert broker.store.commit_log.flushed_offset > max(ends)


async def test_lone_sends_still_answer_as_before(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        props = message_properties(tags="A", uniq_key="not-hex \"quoted\" key")
        r = await send_message(client, addr, "Lone", b"x", properties=props)
        assert r.code == 0 and r.ext_fields is not None
        assert r.ext_fields["transactionId"] == "not-hex \"quoted\" key"
        assert set(r.ext_fields) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON",
                                     "transactionId"}


async def test_batch_properties_are_stored_as_sent(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        items = [
            BatchItem(0, b"dup", "TAGS\x01first\x02UNIQ_KEY\x01U1\x02TAGS\x01last"),
            BatchItem(0, b"utf8", "KEYS\x01ключ κλειδί\x02TAGS\x01\u0442\u0435\u0433\x02UNIQ_KEY\x01U2"),
            BatchItem(0, b"nouniq", "TAGS\x01x"),
            BatchItem(3, b"plain", "UNIQ_KEY\x01U4\x02TAGS\x01p" + "\x02P\x01" + "v" * 300),
        ]
        ext = send_header("BP", properties=message_properties(), batch=True)
        r = await client.invoke(addr, RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(items)), 5)
        assert r.code == 0, r.remark
        msgs = decode_pull(await pull(client, addr, "G", "BP", 0, 0))
        assert [m.body for m in msgs] == [b"dup", b"utf8", b"nouniq", b"plain"]
        assert msgs[0].properties["TAGS"] == "last"  # the last duplicate wins, as in Java
        assert msgs[1].properties["KEYS"] == "ключ κλειδί" and msgs[1].tags == "\u0442\u0435\u0433"
        assert msgs[2].properties["UNIQ_KEY"] and msgs[3].flag == 3
        assert msgs[3].properties["P"] == "v" * 300
        cq = broker.store.consume_queues[("BP", 0)]
        assert [cq.entry(i)[2] for i in range(4)] == [  # type: ignore[index]
            tags_code("last"), tags_code("\u0442\u0435\u0433"), tags_code("x"), tags_code("p")]
        for key in ("ключ", "κλειδί", "U4"):
            assert broker.store.query_message("BP", key, 4, 0, 2**62).phy_offsets

        bad = encode_batch_body([BatchItem(0, b"x", "UNIQ_KEY\x01U5")]).replace(b"U5", b"\xff\xfe")
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, bad), 5)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "corrupt" in (r.remark or "")


_V2_VALUES = st.one_of(st.none(), st.sampled_from(["0", "1", "-1", "7", "true", "TRUE", "false", "x", "",
                                                   " 5", "2147483648", "-2147483649", "9223372036854775808",
                                                   "1700000000000", "TopicA"]))


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({k: _V2_VALUES for k in "abcdefghijklmn"}))
def test_lean_v2_read_agrees_with_the_typed_header(raw: dict[str, str | None]) -> None:
    ext = {k: v for k, v in raw.items() if v is not None}
    fields = _v2_fields(ext)
    try:
        h = SendMessageRequestHeader.from_ext_v2(ext)
    except RocketQError:
        assert fields is None
        return
    if fields is not None:
        assert not h.batch and ext.get("m") != "1"
        assert fields == (h.topic, h.queue_id, h.sys_flag, h.born_timestamp, h.flag, h.properties,
                          h.reconsume_times or 0)


def test_lean_v2_read_takes_a_producer_header() -> None:
    ext = send_header("T", queue_id=3, properties="TAGS\x01a", born_timestamp=int(time.time() * 1000),
                      reconsume_times=2, max_reconsume_times=16)
    assert _v2_fields(ext) == ("T", 3, 0, int(ext["g"]), 0, "TAGS\x01a", 2)
    assert _v2_fields({**ext, "m": "true"}) is None and _v2_fields(None) is None
