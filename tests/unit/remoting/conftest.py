"""Every remoting test runs twice: on the stock asyncio loop and on uvloop (what production uses)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from rocketq.codec.command import RemotingCommand
from rocketq.remoting import Channel, RemotingClient, RemotingServer

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    uvloop = None


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], Any]]:
    factories: dict[str, Callable[[], Any]] = {"asyncio": asyncio.new_event_loop}
    if uvloop is not None:
        factories["uvloop"] = uvloop.new_event_loop
    return factories


ECHO = 1000
SLOW = 1001


def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    """Answer with the request's extFields and body (and the peer address as the remark)."""
    return request.make_response(
        0, channel.remote_address, dict(request.ext_fields or {}), request.body_bytes()
    )


async def slow(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    await asyncio.sleep(float((request.ext_fields or {}).get("sleep", "0.1")))
    return request.make_response(0, "slow")


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    srv = RemotingServer("127.0.0.1", [0])
    srv.register_processor(ECHO, echo)
    srv.register_processor(SLOW, slow)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop(grace=0.5)


@pytest.fixture
def addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.bound_ports[0]}"


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    cli = RemotingClient(connect_timeout=2.0)
    try:
        yield cli
    finally:
        await cli.close()
