"""Header members of the wrong type or range over a real connection (issue 9 item 7).

An answerable one (opaque and flag usable) gets INVALID_PARAMETER with a remark on the same
connection, which then carries on; an unanswerable one closes that connection with one
WARNING line. Neither logs a traceback, on either loop.
"""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.errors import MalformedRequest
from rocketq.remoting import Channel, RemotingClient, RemotingServer

ECHO = 1000  # registered by the `server` fixture (conftest.py)


def _frame(header: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header), len(header)) + header


async def _read_answers(reader: asyncio.StreamReader, n: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    while len(out) < n:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, f"closed after {len(out)} of {n} answers"
        out.extend(decoder.feed(data))
    return out


def _no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text


async def test_bad_members_are_answered_and_the_connection_carries_on(
    server: RemotingServer, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_ports[0])
    try:
        writer.write(_frame(b'{"code":1000,"opaque":11,"version":"x"}')
                     + _frame(b'{"code":"99999999999999999999999","opaque":12}')
                     + _frame(b'{"code":1000,"opaque":13,"flag":2,"extFields":[1]}')  # one-way: no answer
                     + encode_frame_bytes(RemotingCommand(ECHO, opaque=14, ext_fields={"k": "v"})))
        answers = await _read_answers(reader, 3)
        assert [(a.opaque, a.code) for a in answers] == [
            (11, ResponseCode.INVALID_PARAMETER), (12, ResponseCode.INVALID_PARAMETER), (14, 0)]
        assert answers[0].remark == "header member <version> is not an integer: 'x'"
        assert (answers[1].remark or "").startswith("header member <code> is out of the int range")
        assert answers[2].ext_fields == {"k": "v"}
    finally:
        writer.close()
    _no_tracebacks(caplog)


@pytest.mark.parametrize("header", [
    b'{"code":1000,"opaque":"99999999999999999999999","flag":0}',
    b'{"code":1000,"opaque":2147483648}',
    b'{"code":1000,"opaque":1,"flag":[0]}',
])
async def test_unusable_opaque_closes_with_one_warning(
    client: RemotingClient, addr: str, server: RemotingServer, caplog: pytest.LogCaptureFixture, header: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_ports[0])
    writer.write(_frame(header))
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    warnings = [r for r in caplog.records
                if r.levelno == logging.WARNING and "decode frame" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    _no_tracebacks(caplog)
    assert (await client.invoke(addr, RemotingCommand.request(ECHO))).code == 0


async def test_a_response_with_a_bad_member_fails_only_its_request(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    """The client side: an answer whose code is unreadable fails that request, not the connection."""

    def answer_badly(request: RemotingCommand, channel: Channel) -> None:
        channel._transport.write(_frame(b'{"code":"x","flag":1,"opaque":%d}' % request.opaque))

    server.register_processor(2001, answer_badly)
    with pytest.raises(MalformedRequest, match="header member <code>"):
        await client.invoke(addr, RemotingCommand.request(2001), 5)
    assert (await client.invoke(addr, RemotingCommand.request(ECHO))).code == 0
    assert len(client.channels) == 1
