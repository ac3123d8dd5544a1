"""Runs of requests: a processor marked with `handles_runs` gets consecutive requests of its code,
read together, in one call, and answers each as its single handler would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import FLAG_ONEWAY, RemotingCommand
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes
from rocketq.errors import TopicNotExist
from rocketq.remoting import Channel, RemotingClient, RemotingServer, handles_runs
from rocketq.remoting.channel import Connection

RUN, OTHER = 2000, 2001


class Recorder:
    """Answers RUN requests with their "i" field; remembers the runs it was handed."""

    def __init__(self) -> None:
        self.runs: list[list[str]] = []
        self.singles: list[str] = []
        self.fail_with: dict[str, BaseException] = {}
        self.deferred: set[str] = set()
        self.raise_run = False

    def _answer(self, request: RemotingCommand) -> Any:
        i = (request.ext_fields or {})["i"]
        if i in self.fail_with:
            return self.fail_with[i]
        if i in self.deferred:
            return self._later(request)
        return request.make_response(0, None, {"i": i})

    async def _later(self, request: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0.01)
        return request.make_response(0, "later", {"i": (request.ext_fields or {})["i"]})

    @handles_runs("process_run")
    def process(self, request: RemotingCommand, channel: Channel) -> Any:
        self.singles.append((request.ext_fields or {})["i"])
        result = self._answer(request)
        if isinstance(result, BaseException):
            raise result
        return result

    def process_run(self, requests: list[RemotingCommand], channel: Channel) -> list[Any]:
        self.runs.append([(r.ext_fields or {})["i"] for r in requests])
        if self.raise_run:
            raise RuntimeError("broken batch handler")
        return [self._answer(r) for r in requests]


def other(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    return request.make_response(0, "other")


class FakeTransport:
    def __init__(self) -> None:
        self.out: list[bytes] = []

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def writelines(self, parts: list[bytes]) -> None:
        self.out.extend(bytes(p) for p in parts)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _request(code: int, i: int, oneway: bool = False) -> RemotingCommand:
    return RemotingCommand.request(code, {"i": str(i)}, oneway=oneway)


async def _feed(server: RemotingServer, *commands: RemotingCommand) -> list[RemotingCommand]:
    """Everything in one read of one connection; the responses written back."""
    transport = FakeTransport()
    conn = Connection(server)
    conn.connection_made(transport)  # type: ignore[arg-type]
    conn.data_received(b"".join(encode_frame_bytes(c) for c in commands))
    await asyncio.sleep(0.05)
    return FrameDecoder().feed(b"".join(transport.out))


async def test_one_read_is_one_run_split_by_other_codes() -> None:
    rec = Recorder()
    server = RemotingServer("127.0.0.1", [0])
    server.register_processor(RUN, rec.process)
    server.register_processor(OTHER, other)
    requests = [_request(RUN, 0), _request(RUN, 1), _request(RUN, 2), _request(OTHER, 3), _request(RUN, 4)]
    responses = await _feed(server, *requests)
    assert rec.runs == [["0", "1", "2"], ["4"]]  # a run of one goes to the batch handler too
    assert rec.singles == []
    assert [r.opaque for r in responses] == [r.opaque for r in requests]
    assert [(r.ext_fields or {}).get("i") for r in responses] == ["0", "1", "2", None, "4"]
    assert responses[3].remark == "other"
    assert all(r.is_response and r.code == 0 for r in responses)


async def test_errors_oneway_and_awaitables_are_answered_per_request() -> None:
    rec = Recorder()
    rec.fail_with = {"1": TopicNotExist("topic[X] not exist"), "2": ValueError("boom")}
    rec.deferred = {"3"}
    server = RemotingServer("127.0.0.1", [0])
    server.register_processor(RUN, rec.process)
    requests = [_request(RUN, 0), _request(RUN, 1), _request(RUN, 2), _request(RUN, 3),
                _request(RUN, 4, oneway=True), _request(RUN, 5)]
    responses = {r.opaque: r for r in await _feed(server, *requests)}
    assert rec.runs == [["0", "1", "2", "3", "4", "5"]]
    assert requests[4].flag & FLAG_ONEWAY and requests[4].opaque not in responses
    assert responses[requests[0].opaque].code == 0
    assert responses[requests[1].opaque].code == ResponseCode.TOPIC_NOT_EXIST
    assert "topic[X] not exist" in (responses[requests[1].opaque].remark or "")
    assert responses[requests[2].opaque].code == ResponseCode.SYSTEM_ERROR
    assert responses[requests[3].opaque].remark == "later"
    assert responses[requests[5].opaque].code == 0
    assert len(responses) == 5


async def test_a_raising_batch_handler_fails_each_request_of_its_run() -> None:
    rec = Recorder()
    rec.raise_run = True
    server = RemotingServer("127.0.0.1", [0])
    server.register_processor(RUN, rec.process)
    responses = await _feed(server, _request(RUN, 0), _request(RUN, 1))
    assert [r.code for r in responses] == [ResponseCode.SYSTEM_ERROR] * 2
    assert all("broken batch handler" in (r.remark or "") for r in responses)


async def test_plain_handlers_and_reregistration_have_no_runs() -> None:
    rec = Recorder()
    server = RemotingServer("127.0.0.1", [0])
    server.register_processor(RUN, rec.process)
    server.register_processor(RUN, lambda request, channel: rec.process(request, channel))
    await _feed(server, _request(RUN, 0), _request(RUN, 1))
    assert rec.runs == [] and rec.singles == ["0", "1"]


@pytest.fixture
async def run_server() -> Any:
    rec = Recorder()
    srv = RemotingServer("127.0.0.1", [0])
    srv.register_processor(RUN, rec.process)
    await srv.start()
    try:
        yield srv, rec
    finally:
        await srv.stop(grace=0.5)


async def test_pipelined_requests_over_tcp_come_back_in_runs(run_server: Any) -> None:
    srv, rec = run_server
    addr = f"127.0.0.1:{srv.bound_ports[0]}"
    async with RemotingClient() as client:
        await client.invoke(addr, _request(RUN, -1))  # connect first: the rest goes out together
        requests = [_request(RUN, i) for i in range(300)]
        responses = await asyncio.gather(*(client.invoke(addr, r, 10.0) for r in requests))
    assert [(r.ext_fields or {})["i"] for r in responses] == [str(i) for i in range(300)]
    seen = [i for run in rec.runs[1:] for i in run]
    assert seen == [str(i) for i in range(300)]  # every request once, in the order sent
    assert max(len(run) for run in rec.runs) > 1
