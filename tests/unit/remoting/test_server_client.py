"""A real RemotingServer and RemotingClient on 127.0.0.1: request/response, pipelining, one-way,
dispatch errors, async handlers and requests the server sends back to the client."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import RemotingTimeoutError, TopicNotExist
from rocketq.remoting import Channel, RemotingClient, RemotingServer

ECHO, SLOW = 1000, 1001  # registered by the `server` fixture (conftest.py)


async def test_request_response(client: RemotingClient, addr: str) -> None:
    request = RemotingCommand.request(ECHO, {"topic": "TopicTest", "n": "1"}, b"payload")
    response = await client.invoke(addr, request, 2.0)
    assert response.is_response
    assert response.code == ResponseCode.SUCCESS
    assert response.opaque == request.opaque
    assert response.ext_fields == {"topic": "TopicTest", "n": "1"}
    assert response.body == b"payload"
    # The handler saw the client's real address.
    (channel,) = client.channels
    assert response.remark == channel.local_address
    assert channel.remote_address == addr


async def test_one_connection_per_address(client: RemotingClient, addr: str, server: RemotingServer) -> None:
    await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(ECHO)) for _ in range(20)))
    assert len(client.channels) == 1
    assert len(server.channels) == 1


async def test_1000_pipelined_requests(client: RemotingClient, addr: str) -> None:
    requests = [RemotingCommand.request(ECHO, {"i": str(i)}, str(i).encode() * (i % 7)) for i in range(1000)]
    responses = await asyncio.gather(*(client.invoke(addr, r, 10.0) for r in requests))
    for i, response in enumerate(responses):
        assert response.ext_fields == {"i": str(i)}
        assert response.body == str(i).encode() * (i % 7)
    channel = next(iter(client.channels))
    assert channel.pending_requests == 0


async def test_oneway_gets_no_response(
    client: RemotingClient, addr: str, server: RemotingServer, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[RemotingCommand] = []

    def record(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        seen.append(request)
        return request.make_response()  # must be dropped: the request was one-way

    server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, record)
    with caplog.at_level(logging.WARNING, "rocketq.remoting"):
        await client.invoke_oneway(
            addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"x": "1"})
        )
        await client.invoke(addr, RemotingCommand.request(ECHO))  # ordered after the one-way
    assert [r.ext_fields for r in seen] == [{"x": "1"}]
    assert seen[0].is_oneway
    assert "not matched any request" not in caplog.text


async def test_answer_to_a_cancelled_request_is_dropped_quietly(
    client: RemotingClient, addr: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A consumer shutting down cancels its long polls; the broker answers them moments later.
    slow = RemotingCommand.request(SLOW, {"sleep": "0.2"})
    waiting = asyncio.ensure_future(client.invoke(addr, slow, 10.0))
    await asyncio.sleep(0.05)
    (channel,) = client.channels
    assert channel.pending_requests == 1
    with caplog.at_level(logging.DEBUG, "rocketq.remoting"):
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        deadline = time.monotonic() + 10
        while channel.pending_requests and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    assert channel.pending_requests == 0  # the answer came and took its entry along
    assert "not matched any request" not in caplog.text
    assert "abandoned request" in caplog.text


async def test_unknown_code_is_request_code_not_supported(client: RemotingClient, addr: str) -> None:
    response = await client.invoke(addr, RemotingCommand.request(999))
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
    assert response.remark == " request type 999 not supported"


async def test_unknown_oneway_is_silent(client: RemotingClient, addr: str) -> None:
    await client.invoke_oneway(addr, RemotingCommand.request(999))
    assert (await client.invoke(addr, RemotingCommand.request(ECHO))).code == 0


async def test_default_processor(client: RemotingClient, addr: str, server: RemotingServer) -> None:
    server.register_default_processor(lambda req, ch: req.make_response(0, f"default {req.code}"))
    assert (await client.invoke(addr, RemotingCommand.request(777))).remark == "default 777"


async def test_rocketq_error_becomes_its_code(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    def handler(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        raise TopicNotExist("topic[T] not exist, apply first please!")

    server.register_processor(RequestCode.SEND_MESSAGE_V2, handler)
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark == "topic[T] not exist, apply first please!"


async def test_other_exception_is_system_error_and_logged(
    client: RemotingClient, addr: str, server: RemotingServer, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        raise ValueError("boom: bad state")

    server.register_processor(RequestCode.PULL_MESSAGE, handler)
    with caplog.at_level(logging.ERROR, "rocketq.remoting"):
        response = await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE))
    assert response.code == ResponseCode.SYSTEM_ERROR == 1
    assert response.remark == "boom: bad state"
    assert any(r.exc_info and r.exc_info[0] is ValueError for r in caplog.records)


async def test_async_handlers(client: RemotingClient, addr: str, server: RemotingServer) -> None:
    async def fails(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        await asyncio.sleep(0)
        raise TopicNotExist("later")

    server.register_processor(RequestCode.QUERY_MESSAGE, fails)
    ok = await client.invoke(addr, RemotingCommand.request(SLOW, {"sleep": "0.01"}))
    assert ok.remark == "slow"
    bad = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE))
    assert (bad.code, bad.remark) == (ResponseCode.TOPIC_NOT_EXIST, "later")


async def test_responses_may_overtake(client: RemotingClient, addr: str) -> None:
    slow = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(SLOW, {"sleep": "0.2"})))
    await asyncio.sleep(0.02)
    fast = await client.invoke(addr, RemotingCommand.request(ECHO, {"k": "v"}))
    assert fast.ext_fields == {"k": "v"} and not slow.done()
    assert (await slow).remark == "slow"


async def test_a_future_returning_handler(client: RemotingClient, addr: str, server: RemotingServer) -> None:
    def handler(request: RemotingCommand, channel: Channel) -> asyncio.Future[RemotingCommand | None]:
        fut: asyncio.Future[RemotingCommand | None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, fut.set_result, request.make_response(0, "from future"))
        return fut

    server.register_processor(RequestCode.HEART_BEAT, handler)
    assert (
        await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT))
    ).remark == "from future"


async def test_handler_returning_none_sends_nothing(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    server.register_processor(RequestCode.HEART_BEAT, lambda req, ch: None)
    start = time.monotonic()
    with pytest.raises(RemotingTimeoutError, match=r"timeout, \d+\(ms\)"):
        await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT), 0.2)
    assert 0.15 < time.monotonic() - start < 1.0


async def test_server_invokes_the_client_on_its_connection(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    channels: list[Channel] = []
    notified: list[RemotingCommand] = []

    def remember(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        channels.append(channel)
        return request.make_response()

    def running_info(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return request.make_response(0, None, None, b'{"properties":{}}')

    server.register_processor(RequestCode.HEART_BEAT, remember)
    client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
    client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda req, ch: notified.append(req))
    await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT))
    (channel,) = channels

    answer = await channel.invoke(
        RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g"}), 2.0
    )
    assert answer.code == 0 and answer.body == b'{"properties":{}}'

    channel.invoke_oneway(
        RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"})
    )
    for _ in range(100):
        if notified:
            break
        await asyncio.sleep(0.01)
    assert notified and notified[0].ext_fields == {"consumerGroup": "g"} and notified[0].is_oneway

    # A code the client has no processor for: the Java answer, from the client this time.
    unknown = await channel.invoke(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE), 2.0)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_server_invoke_times_out(client: RemotingClient, addr: str, server: RemotingServer) -> None:
    channels: list[Channel] = []
    server.register_processor(
        RequestCode.HEART_BEAT, lambda req, ch: (channels.append(ch), req.make_response())[1]
    )
    client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, lambda req, ch: None)
    await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT))
    with pytest.raises(RemotingTimeoutError):
        await channels[0].invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 0.15)


async def test_binary_header_request_is_answered(server: RemotingServer, addr: str) -> None:
    from rocketq.codec.codes import SerializeType
    from rocketq.codec.frame import FrameDecoder, encode_frame_bytes

    reader, writer = await asyncio.open_connection("127.0.0.1", server.bound_ports[0])
    request = RemotingCommand(ECHO, 0, 479, 42, 0, None, {"topic": "TopicTest"}, b"b")
    writer.write(encode_frame_bytes(request, SerializeType.ROCKETMQ))
    decoder = FrameDecoder()
    responses: list[RemotingCommand] = []
    while not responses:
        responses = decoder.feed(await asyncio.wait_for(reader.read(65536), 2.0))
    (response,) = responses
    assert response.opaque == 42 and response.ext_fields == {"topic": "TopicTest"}
    assert response.serialize_type == SerializeType.JSON  # we always answer in JSON (C++ needs it)
    writer.close()


async def test_a_handler_returning_nonsense_is_a_system_error(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    server.register_processor(RequestCode.HEART_BEAT, lambda req, ch: 42)  # type: ignore[arg-type,return-value]
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT))
    assert response.code == ResponseCode.SYSTEM_ERROR and "int" in (response.remark or "")


async def test_oneway_without_await_is_still_sent(
    client: RemotingClient, addr: str, server: RemotingServer
) -> None:
    seen: list[RemotingCommand] = []
    server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, lambda req, ch: seen.append(req))
    client.invoke_oneway(
        addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET)
    )  # not connected yet
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    client.invoke_oneway(
        addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET)
    )  # connected: queued now
    await client.invoke(addr, RemotingCommand.request(ECHO))
    assert len(seen) == 2
