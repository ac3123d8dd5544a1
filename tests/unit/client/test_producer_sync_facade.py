"""The sync facade's engine (one background loop thread) and the blocking Producer's call-site
behaviour; round trips against a broker are in tests/integration/test_producer.py."""

from __future__ import annotations

import asyncio
import threading

import pytest

import rocketq
import rocketq.aio
from rocketq.client import _sync
from rocketq.errors import InvalidMessage, ServiceStateError


def test_run_sync_runs_on_one_shared_loop_thread() -> None:
    async def where() -> tuple[asyncio.AbstractEventLoop, str]:
        return asyncio.get_running_loop(), threading.current_thread().name

    loop1, name1 = _sync.run_sync(where())
    loop2, _ = _sync.run_sync(where())
    assert loop1 is loop2 is _sync.background_loop()
    assert name1 == "rocketq-client-loop" and name1 != threading.current_thread().name
    assert not _sync.in_loop_thread()


def test_run_sync_propagates_errors_and_times_out() -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        _sync.run_sync(boom())
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        _sync.run_sync(slow(), timeout=0.05)
    assert cancelled.wait(2)


def test_blocking_call_on_the_loop_thread_is_refused() -> None:
    seen: list[BaseException] = []
    done = threading.Event()

    async def nested() -> int:
        return 1

    def on_loop() -> None:
        try:
            _sync.run_sync(nested())
        except RuntimeError as e:
            seen.append(e)
        done.set()

    _sync.call_soon(on_loop)
    assert done.wait(2) and isinstance(seen[0], RuntimeError)


def test_sync_producer_checks_at_the_call_site() -> None:
    p = rocketq.Producer("PG_SYNC_UNIT", namesrv_addr="127.0.0.1:1")
    assert p.group == "PG_SYNC_UNIT" and p.service_state.name == "CREATE_JUST"
    assert isinstance(p.aio, rocketq.aio.Producer)
    with pytest.raises(InvalidMessage):  # checked in the calling thread, before anything else
        p.send(rocketq.Message("T", b""))
    with pytest.raises(InvalidMessage):
        p.send_async(rocketq.Message("bad topic", b"x"))
    with pytest.raises(ServiceStateError):
        p.send(rocketq.Message("T", b"x"))
    fut = p.send_async(rocketq.Message("T", b"x"), callback=lambda r: None)
    with pytest.raises(ServiceStateError):
        fut.result(2)
    p.shutdown()  # never started: nothing to do


def test_public_names() -> None:
    assert rocketq.Producer is not rocketq.aio.Producer
    assert rocketq.Message is rocketq.aio.Message and rocketq.SendStatus is rocketq.aio.SendStatus
    assert "Producer" in dir(rocketq) and "PushConsumer" in rocketq.__all__
    assert rocketq.__version__
    with pytest.raises(AttributeError):
        rocketq.NoSuchThing  # noqa: B018
