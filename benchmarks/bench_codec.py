"""Codec and transport figures for the send path (printed, never asserted).

- decode: one SEND_MESSAGE_V2 request frame -> RemotingCommand -> SendMessageRequestHeader
- encode: the SendMessageResponseHeader -> extFields -> response frame buffers
- round trips: SEND_MESSAGE_V2 request/response through a RemotingServer in another process
  (echo handler), one connection, 64 requests in flight; the client is this process.
- decode_messages: a PULL_MESSAGE answer body (32 and 1000 stored records of 128-byte bodies
  with TAGS, KEYS, WAIT and UNIQ_KEY) -> MessageExt list, as the client decodes every pull,
  with and without reading each message's properties afterwards.

``python -m benchmarks codec`` or ``python benchmarks/bench_codec.py [--no-transport]``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import time
from collections.abc import Callable
from typing import Any

from rocketq.codec.codes import LanguageCode, RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame, encode_frame_bytes
from rocketq.codec.headers import SendMessageRequestHeader, SendMessageResponseHeader
from rocketq.codec.message import MessageExt, decode_messages, encode_message

IN_FLIGHT = 64

# What a Java 4.9 producer sends (PROTOCOL.md §2.2 captured example, plus a UNIQ_KEY and `n`).
SEND_EXT = {
    "a": "please_rename_unique_group_name",
    "b": "TopicTest",
    "c": "TBW102",
    "d": "4",
    "e": "3",
    "f": "0",
    "g": "1491978653614",
    "h": "0",
    "i": "TAGS\x01TagA\x02WAIT\x01true\x02KEYS\x01OrderID188\x02"
    "UNIQ_KEY\x017F0000012C5818B4AAC2475C4B900000\x02",
    "j": "0",
    "k": "false",
    "m": "false",
    "n": "broker-a",
}
BODY = b"Hello RocketMQ " * 8  # 120 bytes


def _request() -> RemotingCommand:
    return RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, LanguageCode.JAVA, 401, 1, 0, None, dict(SEND_EXT), BODY
    )


def _response_header() -> SendMessageResponseHeader:
    return SendMessageResponseHeader(
        "7F00000100002A9F00000000000004D2",
        3,
        1234,
        "7F0000012C5818B4AAC2475C4B900000",
        msg_region="DefaultRegion",
        trace_on=True,
    )


def _rate(fn: Callable[[], object], seconds: float = 1.0) -> float:
    n = 0
    batch = 1000
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(batch):
            fn()
        n += batch
        now = time.perf_counter()
        if now >= end:
            return n / (now - start)


def codec_figures() -> dict[str, float]:
    frame = encode_frame_bytes(_request())
    decoder = FrameDecoder()

    def decode() -> None:
        (cmd,) = decoder.feed(frame)
        SendMessageRequestHeader.from_ext_v2(cmd.ext_fields)

    header = _response_header()

    def encode() -> None:
        response = RemotingCommand(ResponseCode.SUCCESS, opaque=1, flag=1, ext_fields=header.to_ext())
        encode_frame(response)

    # 64 pipelined frames per feed, as the server sees them under load.
    burst = frame * IN_FLIGHT

    def decode_burst() -> None:
        for cmd in decoder.feed(burst):
            SendMessageRequestHeader.from_ext_v2(cmd.ext_fields)

    return {
        "send request decode (frame+header) ops/s": _rate(decode),
        "send request decode, 64 per feed, ops/s": _rate(decode_burst) * IN_FLIGHT,
        "send response encode (header+frame) ops/s": _rate(encode),
        "send request frame bytes": float(len(frame)),
    }


# -- pulled records ----------------------------------------------------------------------------------

PULL_SIZES = (32, 1000)
# What the client appends to every record of a pull (see client/api.py).
PULL_STAMP = "\x02MIN_OFFSET\x010\x02MAX_OFFSET\x0110000\x02"


def pull_body(count: int, body_size: int = 128) -> bytes:
    """`count` back-to-back stored records as a broker answers PULL_MESSAGE."""
    records = []
    for i in range(count):
        props = {
            "TAGS": "TagA",
            "KEYS": f"OrderID{i:06d}",
            "WAIT": "true",
            "UNIQ_KEY": f"7F0000012C5818B4AAC2475C{i:08X}",
        }
        records.append(encode_message(MessageExt(
            topic="TopicTest", body=bytes([65 + i % 26]) * body_size, properties=props, queue_id=3,
            queue_offset=i, commit_log_offset=i * 300, born_timestamp=1_700_000_000_000 + i,
            born_host=("10.0.0.7", 53412), store_timestamp=1_700_000_000_005 + i,
            store_host=("10.0.0.1", 10911),
        )))
    return b"".join(records)


def _ns_per_call(fn: Callable[[], object], seconds: float = 0.5) -> float:
    """Best time of one call over a few timed rounds (the least disturbed by other work)."""
    best = float("inf")
    end = time.perf_counter() + seconds
    while True:
        start = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - start)
        if time.perf_counter() >= end:
            return best


def decode_figures() -> dict[str, float]:
    figures: dict[str, float] = {}
    for count in PULL_SIZES:
        body = pull_body(count)
        assert len(decode_messages(body, PULL_STAMP)) == count

        def decode(body: bytes = body) -> None:
            decode_messages(body, PULL_STAMP)

        def decode_and_read(body: bytes = body) -> None:
            for m in decode_messages(body, PULL_STAMP):
                m.properties.get("TAGS")

        for label, fn in (("decode_messages", decode), ("decode_messages+properties", decode_and_read)):
            ns = _ns_per_call(fn) / count
            figures[f"{label} x{count} ns/msg"] = ns
            figures[f"{label} x{count} msgs/s"] = 1e9 / ns
    return figures


# -- transport ---------------------------------------------------------------------------------------


def _serve(port_queue: Any, stop_event: Any) -> None:
    from rocketq.remoting import RemotingServer, run

    header_ext = _response_header().to_ext()

    def on_send(request: RemotingCommand, channel: object) -> RemotingCommand:
        SendMessageRequestHeader.from_ext_v2(request.ext_fields)
        return request.make_response(ext_fields=dict(header_ext))

    async def main() -> None:
        server = RemotingServer("127.0.0.1", [0])
        server.register_processor(RequestCode.SEND_MESSAGE_V2, on_send)
        await server.start()
        port_queue.put(server.bound_ports[0])
        while not stop_event.is_set():
            await asyncio.sleep(0.05)
        await server.stop(grace=0.5)

    run(main())


async def _drive(addr: str, seconds: float) -> float:
    from rocketq.remoting import RemotingClient

    client = RemotingClient()
    try:
        await client.invoke(addr, _request())  # connect and warm up
        done = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds

        async def worker() -> None:
            nonlocal done
            while loop.time() < end:
                await client.invoke(addr, _request(), 5.0)
                done += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        return done / (time.perf_counter() - start)
    finally:
        await client.close()


def transport_figures(seconds: float = 2.0) -> dict[str, float]:
    from rocketq.remoting import run

    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    stop = ctx.Event()
    proc = ctx.Process(target=_serve, args=(ports, stop), daemon=True)
    proc.start()
    try:
        port = ports.get(timeout=30)
        rate = run(_drive(f"127.0.0.1:{port}", seconds))
    finally:
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return {"SEND_MESSAGE_V2 round trips/s (64 in flight, 1 conn)": rate}


def run(transport: bool = True) -> dict[str, float]:
    figures = codec_figures()
    figures.update(decode_figures())
    if transport:
        figures.update(transport_figures())
    for key, value in figures.items():
        print(f"  {key:<52} {value:>12,.0f}")
    return figures


if __name__ == "__main__":
    run(transport="--no-transport" not in sys.argv[1:])
