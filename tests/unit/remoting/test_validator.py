"""A request validator (the ACL's hook): set before registration it runs before every handler,
single or batch, and a refusal answers that request alone with its code; without one, handlers
are registered as they are."""

from __future__ import annotations

import pytest
from test_runs import OTHER, RUN, Recorder, _feed, _request, other

from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import NoPermission
from rocketq.remoting import Channel, RemotingServer


def refuse_odd(request: RemotingCommand, channel: Channel) -> None:
    if int((request.ext_fields or {})["i"]) % 2:
        raise NoPermission(f"No default permission for topic:t{(request.ext_fields or {})['i']}")


@pytest.fixture
def server() -> RemotingServer:
    server = RemotingServer("127.0.0.1", [0])
    server.set_request_validator(refuse_odd)
    return server


async def test_refused_requests_of_a_run_are_answered_alone(server: RemotingServer) -> None:
    rec = Recorder()
    server.register_processor(RUN, rec.process)
    requests = [_request(RUN, i) for i in range(5)]
    responses = {r.opaque: r for r in await _feed(server, *requests)}
    assert rec.runs == [["0", "2", "4"]]  # the batch handler never sees a refused request
    for i, request in enumerate(requests):
        answer = responses[request.opaque]
        if i % 2:
            assert answer.code == ResponseCode.NO_PERMISSION
            assert answer.remark == f"No default permission for topic:t{i}"
        else:
            assert answer.code == 0 and (answer.ext_fields or {})["i"] == str(i)


async def test_a_wholly_refused_run_never_reaches_the_handler(server: RemotingServer) -> None:
    rec = Recorder()
    server.register_processor(RUN, rec.process)
    responses = await _feed(server, _request(RUN, 1), _request(RUN, 3))
    assert rec.runs == []
    assert [r.code for r in responses] == [ResponseCode.NO_PERMISSION] * 2


async def test_single_and_default_handlers_are_guarded(server: RemotingServer) -> None:
    server.register_processor(OTHER, other)
    server.register_default_processor(other)
    requests = [_request(OTHER, 1), _request(OTHER, 2), _request(4242, 3), _request(4242, 4)]
    responses = await _feed(server, *requests)
    assert [r.code for r in responses] == [ResponseCode.NO_PERMISSION, 0, ResponseCode.NO_PERMISSION, 0]


def test_without_a_validator_handlers_are_registered_unwrapped() -> None:
    server = RemotingServer("127.0.0.1", [0])
    rec = Recorder()
    server.register_processor(RUN, rec.process)
    assert server._processors[RUN] == rec.process
    assert server._run_processors[RUN] == rec.process_run
