"""The uvloop helper, the RocketMQ-named configs, and a printed (never asserted) throughput figure."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from rocketq.codec.command import RemotingCommand
from rocketq.remoting import (
    RemotingClient,
    RemotingClientConfig,
    RemotingServer,
    RemotingServerConfig,
    new_event_loop,
    run,
    split_address,
)
from rocketq.remoting.loop import uvloop_available

ECHO = 1000  # registered by the `server` fixture (conftest.py)


def test_new_event_loop_prefers_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = new_event_loop()
    try:
        assert type(loop).__module__.startswith("uvloop") == uvloop_available()
    finally:
        loop.close()
    monkeypatch.setenv("ROCKETQ_NO_UVLOOP", "1")
    loop = new_event_loop()
    try:
        assert not type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_run_returns_the_result() -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    module = run(main())
    assert module.startswith("uvloop") == uvloop_available()


def test_server_config_names_and_defaults() -> None:
    config = RemotingServerConfig()
    names = {f.name for f in dataclasses.fields(config)}
    assert {"listen_port", "server_channel_max_idle_time_seconds", "bind_address"} <= names
    assert config.listen_port == 10911
    assert config.server_channel_max_idle_time_seconds == 120
    server = RemotingServer.from_config(config)
    assert server.ports == [10911] and server.idle_timeout == 120.0 and server.host == "127.0.0.1"
    vip = RemotingServer.from_config(config, ports=[10911, 10909])
    assert vip.ports == [10911, 10909]
    graceful = RemotingServer.from_config(
        RemotingServerConfig(enable_shutdown_gracefully=True, shutdown_wait_time_seconds=7)
    )
    assert graceful.shutdown_grace == 7.0


def test_client_config() -> None:
    config = RemotingClientConfig()
    assert config.connect_timeout_millis == 3000
    client = RemotingClient.from_config(RemotingClientConfig(connect_timeout_millis=1500))
    assert client.connect_timeout == 1.5 and client.idle_timeout == 120.0


@pytest.mark.parametrize(
    ("addr", "expected"),
    [("127.0.0.1:10911", ("127.0.0.1", 10911)), ("[::1]:9876", ("::1", 9876)), (" host:1 ", ("host", 1))],
)
def test_split_address(addr: str, expected: tuple[str, int]) -> None:
    assert split_address(addr) == expected


async def test_server_from_config_serves(client: RemotingClient) -> None:
    server = RemotingServer.from_config(RemotingServerConfig(listen_port=0))
    server.register_processor(ECHO, lambda req, ch: req.make_response())
    await server.start()
    try:
        assert (
            await client.invoke(f"127.0.0.1:{server.bound_ports[0]}", RemotingCommand.request(ECHO))
        ).code == 0
    finally:
        await server.stop()


async def test_print_round_trips_per_second(client: RemotingClient, addr: str) -> None:
    """Both ends share this process and core, so this is a floor; benchmarks/bench_codec.py
    measures the two-process figure."""
    ext = {
        "a": "group",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "TAGS\x01A\x02WAIT\x01true\x02",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    await client.invoke(addr, RemotingCommand.request(ECHO))
    done = 0
    stop_at = time.perf_counter() + 0.5

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await client.invoke(addr, RemotingCommand.request(ECHO, dict(ext), b"x" * 128), 5.0)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(64)))
    rate = done / (time.perf_counter() - start)
    loop_name = type(asyncio.get_running_loop()).__name__
    print(f"\n{loop_name}: {rate:,.0f} echo round trips/s, 64 in flight, one process")
    assert done > 0
