"""Connections over time: timeouts, closes, bad frames, idle channels, graceful stop, several
ports, reconnects and back-pressure."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from tests.harness import wait_until

from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.errors import RemotingConnectError, RemotingTimeoutError
from rocketq.remoting import Channel, RemotingClient, RemotingServer

ECHO, SLOW = 1000, 1001  # registered by the `server` fixture (conftest.py)


async def _read_closed(reader: asyncio.StreamReader, timeout: float = 2.0) -> bool:
    """True once the peer closed (EOF or reset)."""
    try:
        while True:
            data = await asyncio.wait_for(reader.read(65536), timeout)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True


async def test_timeout_scan_fails_a_request_at_its_deadline(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    never: asyncio.Future[RemotingCommand | None] = asyncio.get_running_loop().create_future()
    server.register_processor(RequestCode.PULL_MESSAGE, lambda req, ch: never)
    await client.invoke(addr, RemotingCommand.request(ECHO))  # connected: the budget is all for the wait
    start = time.monotonic()
    results = await asyncio.gather(
        *(client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE), t) for t in (0.1, 0.3)),
        return_exceptions=True,
    )
    elapsed = time.monotonic() - start
    assert all(isinstance(r, RemotingTimeoutError) for r in results)
    assert 0.25 <= elapsed < 0.8
    (channel,) = client.channels
    assert channel.pending_requests == 0
    # The connection is still fine for everybody else.
    assert (await client.invoke(addr, RemotingCommand.request(ECHO))).code == 0
    never.cancel()


async def test_pending_requests_fail_at_once_when_the_channel_closes(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    def close_it(request: RemotingCommand, channel: Channel) -> None:
        channel.close()

    server.register_processor(RequestCode.PULL_MESSAGE, close_it)
    hanging = [
        asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW, {"sleep": "5"}), 10.0))
        for _ in range(3)
    ]
    await asyncio.sleep(0.05)
    start = time.monotonic()
    with pytest.raises(RemotingConnectError, match="closed before the response"):
        await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE), 10.0)
    for fut in hanging:
        with pytest.raises(RemotingConnectError):
            await fut
    assert time.monotonic() - start < 1.0
    # The next request opens a new connection.
    assert (await client.invoke(addr, RemotingCommand.request(ECHO))).code == 0


async def test_garbage_closes_only_that_connection(
    client: RemotingClient, addr: str, server: RemotingServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert (await client.invoke(addr, RemotingCommand.request(ECHO))).code == 0
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_ports[0])
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert await _read_closed(reader)
    writer.close()
    assert "decode frame from" in caplog.text
    responses = await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(ECHO)) for _ in range(10)))
    assert all(r.code == 0 for r in responses)


async def test_oversize_frame_closes_the_connection(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_ports[0])
    writer.write(struct.pack(">i", 64 * 1024 * 1024))  # announces 64 MiB: refused from the prefix alone
    assert await _read_closed(reader)
    writer.close()


async def test_bad_header_length_closes_the_connection(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_ports[0])
    writer.write(struct.pack(">iI", 8, 100) + b"{}{}")
    assert await _read_closed(reader)
    writer.close()


async def test_idle_connections_are_closed() -> None:
    closed: list[Channel] = []
    server = RemotingServer("127.0.0.1", [0], idle_timeout=0.2)
    server.register_processor(ECHO, lambda req, ch: req.make_response())
    server.on_channel_close(closed.append)
    await server.start()
    try:
        port = server.bound_ports[0]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", port)
        start = time.monotonic()
        decoder = FrameDecoder()
        # The busy connection keeps talking and survives; the quiet one is closed.
        while time.monotonic() - start < 0.6:
            busy_writer.write(encode_frame_bytes(RemotingCommand.request(ECHO)))
            decoder.feed(await asyncio.wait_for(busy_reader.read(65536), 1.0))
            await asyncio.sleep(0.05)
        assert await _read_closed(reader, 1.0)
        assert time.monotonic() - start < 1.5
        assert len(closed) == 1 and len(server.channels) == 1
        writer.close()
        busy_writer.close()
    finally:
        await server.stop()


async def test_graceful_stop_lets_in_flight_handlers_answer(client: RemotingClient) -> None:
    server = RemotingServer("127.0.0.1", [0])

    async def slow(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        await asyncio.sleep(0.2)
        return request.make_response(0, "finished")

    server.register_processor(SLOW, slow)
    await server.start()
    addr = f"127.0.0.1:{server.bound_ports[0]}"
    await client.get_channel(addr)
    in_flight = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW), 5.0))
    await asyncio.sleep(0.05)
    await server.stop(grace=2.0)
    assert (await in_flight).remark == "finished"
    assert not server.channels and not server.is_serving
    await wait_until(lambda: not client.channels)
    with pytest.raises(RemotingConnectError):
        await client.invoke(addr, RemotingCommand.request(SLOW), 1.0)


async def test_stop_cancels_handlers_past_the_grace(client: RemotingClient) -> None:
    server = RemotingServer("127.0.0.1", [0])

    async def forever(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        await asyncio.sleep(60)
        return request.make_response()

    server.register_processor(SLOW, forever)
    await server.start()
    addr = f"127.0.0.1:{server.bound_ports[0]}"
    in_flight = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW), 5.0))
    await asyncio.sleep(0.1)
    start = time.monotonic()
    await server.stop(grace=0.1)
    assert time.monotonic() - start < 2.0
    with pytest.raises(RemotingConnectError):
        await in_flight


async def test_two_listening_ports_share_the_processors(client: RemotingClient) -> None:
    server = RemotingServer("127.0.0.1", [0, 0])
    server.register_processor(ECHO, lambda req, ch: req.make_response(0, ch.local_address))
    await server.start()
    try:
        first, second = server.bound_ports
        assert first != second
        a = await client.invoke(f"127.0.0.1:{first}", RemotingCommand.request(ECHO))
        b = await client.invoke(f"127.0.0.1:{second}", RemotingCommand.request(ECHO))
        assert a.remark == f"127.0.0.1:{first}" and b.remark == f"127.0.0.1:{second}"
        assert len(client.channels) == 2
    finally:
        await server.stop()


async def test_fixed_port_and_vip_port(client: RemotingClient) -> None:
    # Another process may take the probed port (or port - 2) meanwhile: try a few before failing.
    for attempt in range(5):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = RemotingServer("127.0.0.1", [port, port - 2])
        server.register_processor(ECHO, lambda req, ch: req.make_response())
        try:
            await server.start()
            break
        except OSError:
            if attempt == 4:
                raise
    try:
        assert server.bound_ports == [port, port - 2]
        assert (await client.invoke(f"127.0.0.1:{port - 2}", RemotingCommand.request(ECHO))).code == 0
    finally:
        await server.stop()


async def test_port_in_use_fails_start_and_releases_the_others(server: RemotingServer) -> None:
    taken = server.bound_ports[0]
    other = RemotingServer("127.0.0.1", [0, taken])
    with pytest.raises(OSError):
        await other.start()
    assert not other.is_serving and other.bound_ports == []


async def test_connect_errors(client: RemotingClient) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nobody listens there
    with pytest.raises(RemotingConnectError):
        await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 1.0)
    with pytest.raises(RemotingConnectError):
        await client.invoke("no-port", RemotingCommand.request(ECHO), 1.0)


async def test_concurrent_first_requests_share_one_connect(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(ECHO)) for _ in range(50)))
    assert len(server.channels) == 1


async def test_close_listeners_and_client_close(addr: str, server: RemotingServer) -> None:
    server_closed: list[Channel] = []
    client_closed: list[Channel] = []
    server.on_channel_close(server_closed.append)
    client = RemotingClient()
    client.on_channel_close(client_closed.append)
    await client.invoke(addr, RemotingCommand.request(ECHO))
    pending = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW, {"sleep": "5"}), 10.0))
    await asyncio.sleep(0.05)
    await client.close()
    with pytest.raises(RemotingConnectError):
        await pending
    await wait_until(lambda: len(server_closed) == 1)
    assert len(client_closed) == 1 and not client_closed[0].is_active
    with pytest.raises(RemotingConnectError):
        await client.invoke(addr, RemotingCommand.request(ECHO))


async def test_channel_attrs_and_send_after_close(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    channels: list[Channel] = []
    server.register_processor(
        RequestCode.HEART_BEAT, lambda req, ch: (channels.append(ch), req.make_response())[1]
    )
    await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT))
    (channel,) = channels
    channel.attrs["clientId"] = "127.0.0.1@1"
    assert channel.is_active and channel.attrs == {"clientId": "127.0.0.1@1"}
    channel.close()
    await wait_until(lambda: not channel.is_active)
    assert channel.send(RemotingCommand.request(ECHO)) is False
    with pytest.raises(Exception, match="closed"):
        await channel.invoke(RemotingCommand.request(ECHO), 1.0)


async def test_back_pressure_pauses_reading_from_a_peer_that_does_not_read(server: RemotingServer) -> None:
    big = b"z" * (256 * 1024)
    served: list[Channel] = []

    def pull(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        served.append(channel)
        return request.make_response(0, None, None, [memoryview(big)])

    server.register_processor(RequestCode.PULL_MESSAGE, pull)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.bound_ports[0]))
    sock.setblocking(False)
    requests = b"".join(
        encode_frame_bytes(RemotingCommand.request(RequestCode.PULL_MESSAGE)) for _ in range(200)
    )
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, requests)
    await wait_until(lambda: served and not served[0]._transport.is_reading(), 3.0)
    # Far fewer requests were taken in than sent: the server stopped reading instead of buffering
    # 200 responses of 256 KiB for a peer that does not read them.
    assert len(served) < 200
    taken = len(served)
    await asyncio.sleep(0.1)
    assert len(served) == taken
    # Once the peer reads, everything flows again.
    decoder = FrameDecoder()
    received = 0
    deadline = time.monotonic() + 10
    while received < 200 and time.monotonic() < deadline:
        data = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 5.0)
        received += len(decoder.feed(data))
    sock.close()
    assert received == 200


async def test_heavy_traffic_both_ways_does_not_deadlock(client: RemotingClient, addr: str) -> None:
    # Requests and responses both far above the write buffers: the server may pause reading, the
    # client must keep reading its responses or neither side would ever drain.
    body = b"q" * (256 * 1024)
    requests = [RemotingCommand.request(ECHO, {"i": str(i)}, body) for i in range(80)]
    responses = await asyncio.wait_for(
        asyncio.gather(*(client.invoke(addr, r, 20.0) for r in requests)), 20.0
    )
    assert [r.ext_fields for r in responses] == [{"i": str(i)} for i in range(80)]
    assert all(r.body_length == len(body) for r in responses)
