"""Bad input across a real broker process (DESIGN.md principle 6: errors are values on the wire).

A request the broker can parse but not accept gets a RocketMQ response code and remark; a frame
it cannot parse closes that one connection. Meanwhile a bystander client on its own connection
keeps sending and reading back, and everything it had acknowledged stays readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from faultlib import SMALL_STORE, read_queue
from tests.harness import Cluster, start_cluster
from tests.wire import (
    batch_body,
    create_topic,
    decode_pull,
    get_max_offset,
    invoke,
    message_properties,
    pull,
    send_header,
    send_message,
)

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(60)

TOPIC = "BadInputT"
BYSTANDER_TOPIC = "BystanderT"
MAX_BODY = 4 * 1024 * 1024
RC = ResponseCode
# The small store of the fault tests, but with segments that can hold a maximum-size message.
STORE = (*SMALL_STORE, "--set", "mappedFileSizeCommitLog=8388608")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One broker process for the module: each test also proves it survived the previous ones."""
    c = start_cluster(tmp_path_factory.mktemp("bad_input"), *STORE)
    try:
        yield c
        assert c.alive(), c.describe()
    finally:
        assert c.stop() == 0, c.describe()


# -- the bystander ---------------------------------------------------------------------------------

@dataclass
class Bystander:
    """A well-behaved client sending and reading back on its own connection the whole time."""

    acked: list[bytes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rounds: int = 0


async def _bystand(client: RemotingClient, addr: str, state: Bystander, stop: asyncio.Event) -> None:
    while not stop.is_set():
        body = f"bystander-{state.rounds}".encode()
        try:
            r = await send_message(client, addr, BYSTANDER_TOPIC, body, queue_id=0)
            if r.code != RC.SUCCESS:
                state.errors.append(f"send: {r.code} {r.remark}")
                return
            offset = int(r.ext("queueOffset") or -1)
            state.acked.append(body)
            p = await pull(client, addr, "BystanderGroup", BYSTANDER_TOPIC, 0, offset, max_nums=1)
            got = [m.body for m in decode_pull(p)] if p.code == RC.SUCCESS else []
            if got != [body]:
                state.errors.append(f"pull @{offset}: {p.code} {p.remark} {got!r}")
                return
        except Exception as exc:
            state.errors.append(repr(exc))
            return
        state.rounds += 1
        await asyncio.sleep(0.005)


# Bodies every bystander of a broker (by data dir) had acknowledged, oldest first.
_HISTORY: dict[Path, list[bytes]] = {}


@contextlib.asynccontextmanager
async def bystander(cluster: Cluster) -> AsyncIterator[Bystander]:
    state = Bystander()
    stop = asyncio.Event()
    async with RemotingClient() as client:
        r = await create_topic(client, cluster.broker, BYSTANDER_TOPIC, read=1, write=1)
        assert r.code == RC.SUCCESS, r.remark
        # Everything earlier bystanders had acknowledged (in this module's broker) is still there.
        history = _HISTORY.setdefault(cluster.data_dir, [])
        assert [m.body for m in await read_queue(client, cluster.broker, BYSTANDER_TOPIC, 0)] == history
        task = asyncio.create_task(_bystand(client, cluster.broker, state, stop))
        await _rounds(state, 1)
        yield state
        at_end = state.rounds
        await _rounds(state, at_end + 2)  # still served after the last bad input
        stop.set()
        await task
        assert not state.errors, state.errors
        stored = await read_queue(client, cluster.broker, BYSTANDER_TOPIC, 0)
        assert [m.body for m in stored] == history + state.acked
        history.extend(state.acked)
    assert cluster.alive(), cluster.describe()


async def _rounds(state: Bystander, n: int) -> None:
    for _ in range(500):
        if state.rounds >= n or state.errors:
            break
        await asyncio.sleep(0.01)
    assert not state.errors, state.errors
    assert state.rounds >= n, "the bystander was not served"


# -- raw connections -------------------------------------------------------------------------------

def _host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    cmd: RemotingCommand) -> RemotingCommand:
    writer.write(encode_frame_bytes(cmd))
    await writer.drain()
    return await _read_one(reader)


async def _read_one(reader: asyncio.StreamReader) -> RemotingCommand:
    head = await asyncio.wait_for(reader.readexactly(4), 5)
    rest = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), 5)
    (resp,) = FrameDecoder().feed(head + rest)
    return resp


async def _closed_after(addr: str, garbage: bytes) -> None:
    """A live connection (it answers a request) that the broker closes once `garbage` arrives."""
    reader, writer = await asyncio.open_connection(*_host_port(addr))
    try:
        # GET_BROKER_CLUSTER_INFO: served by the name server, not by the broker; answered by both.
        ok = await _exchange(reader, writer, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert ok.code in (RC.SUCCESS, RC.REQUEST_CODE_NOT_SUPPORTED), (ok.code, ok.remark)
        writer.write(garbage)
        await writer.drain()
        try:
            leftover = await asyncio.wait_for(reader.read(), 5)
        except ConnectionResetError:
            leftover = b""
        assert leftover == b"", f"the broker answered {leftover[:60]!r} instead of closing"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _frame(header: bytes, body: bytes = b"", serialize_type: int = 0, header_len: int | None = None,
           frame_len: int | None = None) -> bytes:
    hlen = len(header) if header_len is None else header_len
    flen = 4 + len(header) + len(body) if frame_len is None else frame_len
    return struct.pack(">iI", flen, serialize_type << 24 | hlen) + header + body


UNPARSABLE = {
    "oversize_frame": struct.pack(">i", 16 * 1024 * 1024 + 1) + b"\0" * 64,
    "http_request": b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",
    "negative_length": struct.pack(">i", -8) + b"\0" * 16,
    "length_below_header_word": struct.pack(">i", 2) + b"\0" * 16,
    "header_length_past_frame": _frame(b'{"code":105}', header_len=1000),
    "unknown_serialize_type": _frame(b'{"code":105}', serialize_type=7),
    "header_not_json": _frame(b"{not json at all"),
    "header_json_array": _frame(b"[1,2,3]"),
    "binary_header_truncated": _frame(b"\x00\x69\x00\x01\xdf", serialize_type=1),
    # No usable opaque: nothing could address an answer (issue 9 item 7).
    "opaque_beyond_64_bits": _frame(b'{"code":105,"opaque":"99999999999999999999999","flag":0}'),
    "opaque_beyond_int": _frame(b'{"code":105,"opaque":2147483648,"flag":0}'),
    "flag_not_a_number": _frame(b'{"code":105,"opaque":7,"flag":"x"}'),
}


@pytest.mark.parametrize("garbage", list(UNPARSABLE.values()), ids=list(UNPARSABLE))
async def test_unparsable_frame_closes_only_that_connection(cluster: Cluster, garbage: bytes) -> None:
    async with bystander(cluster):
        await _closed_after(cluster.broker, garbage)
        await _closed_after(cluster.namesrv, garbage)


# A sound frame (opaque 7) with one bad member: answered INVALID_PARAMETER, the connection stays.
MALFORMED = {
    "header_without_code": b'{"opaque":7,"flag":0}',
    "ext_fields_not_a_map": b'{"code":105,"flag":0,"opaque":7,"extFields":[1]}',
    "code_beyond_64_bits": b'{"code":"99999999999999999999999","opaque":7}',
    "version_not_a_number": b'{"code":105,"opaque":7,"version":"x"}',
    "language_object": b'{"code":105,"opaque":7,"language":{"a":1}}',
    "remark_list": b'{"code":105,"opaque":7,"remark":[]}',
    "serialize_type_unknown": b'{"code":105,"opaque":7,"serializeTypeCurrentRPC":"XML"}',
}


async def _answered_then_serves(addr: str, garbage: bytes) -> None:
    reader, writer = await asyncio.open_connection(*_host_port(addr))
    try:
        writer.write(garbage)
        resp = await _read_one(reader)
        assert (resp.opaque, resp.code) == (7, RC.INVALID_PARAMETER), (resp.code, resp.remark)
        assert (resp.remark or "").startswith(("header member <", "JSON header has no code")), resp.remark
        ok = await _exchange(reader, writer, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert ok.code in (RC.SUCCESS, RC.REQUEST_CODE_NOT_SUPPORTED), (ok.code, ok.remark)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@pytest.mark.parametrize("header", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_malformed_header_value_is_answered_on_both_ports(cluster: Cluster, header: bytes) -> None:
    async with bystander(cluster):
        await _answered_then_serves(cluster.broker, _frame(header))
        await _answered_then_serves(cluster.namesrv, _frame(header))


async def test_unsolicited_response_frame_is_ignored(cluster: Cluster) -> None:
    reader, writer = await asyncio.open_connection(*_host_port(cluster.broker))
    try:
        stray = RemotingCommand.response(RC.SUCCESS, opaque=987654)
        writer.write(encode_frame_bytes(stray))
        ok = await _exchange(reader, writer, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        assert ok.code == RC.SUCCESS
    finally:
        writer.close()


# -- parsable but refused ---------------------------------------------------------------------------

def _send_ext(**changes: Any) -> dict[str, str]:
    ext = send_header(TOPIC, properties=message_properties())
    for key, value in changes.items():
        if value is None:
            ext.pop(key, None)
        else:
            ext[key] = value
    return ext


def _pull_ext(**changes: Any) -> dict[str, Any]:
    ext: dict[str, Any] = {"consumerGroup": "BadInputGroup", "topic": TOPIC, "queueId": 0, "queueOffset": 0,
                           "maxMsgNums": 8, "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0,
                           "subscription": "*", "subVersion": 0, "expressionType": "TAG"}
    ext.update(changes)
    return {k: v for k, v in ext.items() if v is not None}


# (request code, extFields, body) -> (response code, start of the remark)
REFUSED: dict[str, tuple[int, dict[str, Any] | None, bytes, int, str]] = {
    "unknown_code": (9999, {}, b"", RC.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported"),
    "send_missing_topic": (RequestCode.SEND_MESSAGE_V2, _send_ext(b=None), b"x", RC.INVALID_PARAMETER,
                           "the custom field <b> is null"),
    "send_no_ext_fields": (RequestCode.SEND_MESSAGE_V2, None, b"x", RC.INVALID_PARAMETER,
                           "the custom field <a> is null"),
    "send_queue_id_not_a_number": (RequestCode.SEND_MESSAGE_V2, _send_ext(e="one"), b"x",
                                   RC.INVALID_PARAMETER, "the custom field <e> is not a number"),
    "send_born_timestamp_overflow": (RequestCode.SEND_MESSAGE_V2, _send_ext(g="9" * 30), b"x",
                                     RC.INVALID_PARAMETER, "the custom field <g> is not a number"),
    "send_queue_id_past_queues": (RequestCode.SEND_MESSAGE_V2, _send_ext(e="99"), b"x", RC.INVALID_PARAMETER,
                                  "request queueId[99] is illegal"),
    "send_illegal_topic_chars": (RequestCode.SEND_MESSAGE_V2, _send_ext(b="bad topic!"), b"x",
                                 RC.INVALID_PARAMETER, "The specified topic[bad topic!] contains illegal"),
    "send_topic_128_chars": (RequestCode.SEND_MESSAGE_V2, _send_ext(b="T" * 128), b"x", RC.INVALID_PARAMETER,
                             "The specified topic is longer than topic max length 127"),
    "send_body_over_4_mib": (RequestCode.SEND_MESSAGE_V2, _send_ext(), b"x" * (MAX_BODY + 1),
                             RC.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {MAX_BODY}"),
    "send_v1_missing_fields": (RequestCode.SEND_MESSAGE, {"topic": TOPIC}, b"x", RC.INVALID_PARAMETER,
                               "the custom field <"),
    "pull_negative_queue_id": (RequestCode.PULL_MESSAGE, _pull_ext(queueId=-1), b"", RC.INVALID_PARAMETER,
                               "queueId[-1] is illegal"),
    "pull_offset_not_a_number": (RequestCode.PULL_MESSAGE, _pull_ext(queueOffset="0x10"), b"",
                                 RC.INVALID_PARAMETER, "the custom field <queueOffset> is not a number"),
    "pull_missing_group": (RequestCode.PULL_MESSAGE, _pull_ext(consumerGroup=None), b"", RC.INVALID_PARAMETER,
                           "the custom field <consumerGroup> is null"),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
async def test_refused_request_gets_code_and_remark(cluster: Cluster, case: tuple[Any, ...]) -> None:
    code, ext, body, want_code, want_remark = case
    async with bystander(cluster), RemotingClient() as client:
        assert (await create_topic(client, cluster.broker, TOPIC, read=4, write=4)).code == RC.SUCCESS
        before = [await get_max_offset(client, cluster.broker, TOPIC, q) for q in range(4)]
        r = await invoke(client, cluster.broker, int(code), ext, body, timeout=20)
        assert (r.code, (r.remark or "")[:len(want_remark)]) == (want_code, want_remark), r.remark
        assert [await get_max_offset(client, cluster.broker, TOPIC, q) for q in range(4)] == before
        # The same connection carries on: a refusal is an answer, not a disconnect.
        ok = await send_message(client, cluster.broker, TOPIC, b"next", queue_id=0)
        assert ok.code == RC.SUCCESS, ok.remark


def _corrupt_batches() -> dict[str, bytes]:
    good, _ = batch_body([b"one", b"two", b"three"])
    first_len = struct.unpack_from(">i", good, 0)[0]
    bad_props = bytearray(good)
    body_end = 20 + struct.unpack_from(">i", good, 16)[0]
    props_len = struct.unpack_from(">h", good, body_end)[0]
    struct.pack_into(">h", bad_props, body_end, props_len + 1)  # one byte more than the record holds
    return {
        "empty": b"",
        "truncated_head": good[:10],
        "truncated_tail": good[:-5],
        "size_past_end": struct.pack(">i", len(good) + 100) + good[4:],
        "negative_body_length": good[:16] + struct.pack(">i", -3) + good[20:],
        "props_length_mismatch": bytes(bad_props),
        "not_utf8_props": good[:first_len - 3] + b"\xff\xfe\xfd" + good[first_len:],
    }


CORRUPT_BATCHES = _corrupt_batches()


@pytest.mark.parametrize("body", list(CORRUPT_BATCHES.values()), ids=list(CORRUPT_BATCHES))
async def test_corrupt_batch_body_is_refused_whole(cluster: Cluster, body: bytes) -> None:
    async with bystander(cluster), RemotingClient() as client:
        assert (await create_topic(client, cluster.broker, TOPIC, read=4, write=4)).code == RC.SUCCESS
        before = await get_max_offset(client, cluster.broker, TOPIC, 1)
        ext = send_header(TOPIC, queue_id=1, batch=True, properties=message_properties())
        r = await invoke(client, cluster.broker, RequestCode.SEND_BATCH_MESSAGE, ext, body)
        assert r.code == RC.MESSAGE_ILLEGAL, (r.code, r.remark)
        assert (r.remark or "").startswith("the batch body is")
        after = await get_max_offset(client, cluster.broker, TOPIC, 1)
        assert after == before, "part of the batch was stored"


async def test_edge_values_that_are_accepted(cluster: Cluster) -> None:
    """The other side of the limits: exactly 4 MiB, a 127-char topic, a negative queue id (the broker
    picks one) and a negative pull offset (OFFSET_TOO_SMALL: move to the min offset)."""
    async with bystander(cluster), RemotingClient() as client:
        addr = cluster.broker
        r = await send_message(client, addr, TOPIC, b"y" * MAX_BODY, queue_id=2, timeout=20)
        assert r.code == RC.SUCCESS, r.remark
        r = await send_message(client, addr, "T" * 127, b"long topic name")
        assert r.code == RC.SUCCESS, r.remark
        picked = set()
        for _ in range(12):
            r = await send_message(client, addr, TOPIC, b"anywhere", queue_id=-1)
            assert r.code == RC.SUCCESS, r.remark
            picked.add(int(r.ext("queueId") or -1))
        assert picked <= {0, 1, 2, 3} and picked
        p = await invoke(client, addr, RequestCode.PULL_MESSAGE, _pull_ext(queueOffset=-5))
        assert (p.code, p.remark, p.ext("nextBeginOffset")) == (RC.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", "0")
        big = [m for m in await read_queue(client, addr, TOPIC, 2) if len(m.body) == MAX_BODY]
        assert big and big[-1].body == b"y" * MAX_BODY
