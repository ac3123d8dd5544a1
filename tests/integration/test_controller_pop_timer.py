"""Pop and timers across a controller-mode failover (docs/ha.md), with real processes: one
`rocketq controller`, a name server and a group of two brokers in controller mode (SYNC_MASTER).

Pop consumers are served by the master only; a broker promoted by the controllers starts pop (its
checkpoint view rebuilt from the revive topic it replicated) and timer delivery (its wheel filed the
timer messages while it was a slave). kill -9 the master after a pop: the promoted broker serves the
rest, revives the un-acked ones once their invisible time is over, and delivers a timer message due
after the failover exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from tests.harness import (
    Server,
    small_store,
    start_controller_member,
    start_controllers,
    start_namesrv_server,
    unique_name,
    wait_until,
)
from tests.wire import (
    ack,
    create_topic,
    decode_pull,
    get_all_topic_config,
    invoke,
    pop,
    pop_topic_of,
    popped,
    pull,
    send_message,
)

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.errors import RocketQError
from rocketq.remoting import RemotingClient

# ~26 s: make test-all runs it; test_controller_admin checks pop follows an elected master under make test.
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

GROUP = "ctl-pop"
STORE = small_store(commit_log=1024 * 1024, slots=4000, index=16000)
INVISIBLE_MS = 4000
TIMER_DELAY_S = 10  # due well after the kill: the old master cannot have delivered it


@contextlib.contextmanager
def one_controller(tmp_path: Path) -> Iterator[dict[str, Server]]:
    """{"c0", "ns"}; the test adds the members ("b0", "b1"). Stopped on exit."""
    started: dict[str, Server] = {}
    try:
        started["c0"] = start_controllers(tmp_path, 1)[0]
        started["ns"] = start_namesrv_server(tmp_path)
        yield started
    finally:
        for server in reversed(list(started.values())):
            server.proc.stop()


def member(tmp_path: Path, g: dict[str, Server], index: int) -> Server:
    g[f"b{index}"] = start_controller_member(tmp_path, GROUP, g["ns"].addr, [g["c0"]], index, *STORE)
    return g[f"b{index}"]


async def master_and_set(client: RemotingClient, controller: str) -> tuple[str, int]:
    r = await invoke(client, controller, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
    if r.code != 0:
        return "", 0
    body = r.body_bytes()
    in_sync = len(orjson.loads(body).get("syncStateSet", [])) if body else 0
    return (r.ext_fields or {}).get("masterAddress", ""), in_sync


async def replicated(client: RemotingClient, master: str) -> bool:
    """The master's one slave has every byte of its commit log (pop checkpoints included)."""
    r = await invoke(client, master, RequestCode.GET_BROKER_HA_STATUS)
    info = orjson.loads(r.body_bytes())
    return bool(info["haConnectionInfo"]) and all(c["diff"] == 0 for c in info["haConnectionInfo"])


async def test_promoted_broker_serves_pop_revives_and_delivers_timers(tmp_path: Path) -> None:
    with one_controller(tmp_path) as g:
        ctl = g["c0"].addr
        async with RemotingClient() as client:
            # the first member is elected master, the second joins its SyncStateSet
            b0 = member(tmp_path, g, 0)
            await wait_until(lambda: _is(master_and_set(client, ctl), (b0.addr, 1)), timeout=60)
            b1 = member(tmp_path, g, 1)
            await wait_until(lambda: _is(master_and_set(client, ctl), (b0.addr, 2)), timeout=60)
            topic, timer_topic = unique_name("CtlPopT"), unique_name("CtlTimerT")
            cg = unique_name("CtlPopCG")
            for t in (topic, timer_topic):
                assert (await create_topic(client, b0.addr, t, read=1, write=1)).code == 0
            bodies = {b"m-%d" % i for i in range(10)}
            for body in sorted(bodies):
                assert (await send_message(client, b0.addr, topic, body)).code == 0
            # the slave's table copy (every 10 s) brings the topics it will serve once promoted
            await wait_until(lambda: _has_topics(client, b1.addr, topic, timer_topic), timeout=30)

            # the slave refuses pop: only a master writes checkpoints
            r = await pop(client, b1.addr, cg, topic)
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, r.remark

            r = await pop(client, b0.addr, cg, topic, max_nums=4, invisible_ms=INVISIBLE_MS)
            first = popped(r, GROUP)
            assert len(first) == 4
            r = await send_message(client, b0.addr, timer_topic, b"timer",
                                   extra_properties={"TIMER_DELAY_SEC": str(TIMER_DELAY_S)})
            assert r.code == 0
            due = time.monotonic() + TIMER_DELAY_S
            await wait_until(lambda: replicated(client, b0.addr), timeout=30)
            b0.proc.kill()
            killed = time.monotonic()
            assert killed < due - 4, "the kill came too late for the timer to be due after it"

            await wait_until(lambda: _is(master_and_set(client, ctl), (b1.addr, 1)), timeout=30)
            # the promoted broker pops what was never popped, then the revived four, each once
            got: list[bytes] = []
            retried: set[bytes] = set()
            first_pop: list[float] = []

            async def drained() -> bool:
                try:
                    r = await pop(client, b1.addr, cg, topic, invisible_ms=60_000, poll_ms=1000)
                except (RocketQError, OSError):
                    return False
                if r.code == 0:
                    first_pop[:] = first_pop or [time.monotonic() - killed]
                    for m in popped(r, GROUP):
                        got.append(bytes(m.body))
                        if pop_topic_of(m, cg).startswith("%RETRY%") and m.reconsume_times == 1:
                            retried.add(bytes(m.body))
                        assert (await ack(client, b1.addr, cg, m)).code == 0
                return sorted(got) == sorted(bodies)

            await wait_until(drained, timeout=60, interval=0.2)
            print(f"failover: first pop served by the promoted broker {first_pop[0]:.2f} s after the kill, "
                  f"all {len(bodies)} (4 revived) {time.monotonic() - killed:.2f} s after it")
            # the four popped before the kill came back through the pop retry topic (revived)
            assert retried == {bytes(m.body) for m in first}, got

            # the timer message, filed by the slave's wheel, is delivered by the new master once
            async def delivered() -> list[bytes]:
                r = await pull(client, b1.addr, "ctl-timer-reader", timer_topic, 0, 0)
                return [bytes(m.body) for m in decode_pull(r)] if r.code == 0 else []

            await wait_until(lambda: _is(delivered(), [b"timer"]), timeout=60, interval=0.2)
            await asyncio.sleep(3)  # a second delivery (a slot read twice) would show by now
            assert await delivered() == [b"timer"]


async def _is(coro: object, want: object) -> bool:
    return bool(await coro == want)  # type: ignore[misc]


async def _has_topics(client: RemotingClient, addr: str, *topics: str) -> bool:
    known = await get_all_topic_config(client, addr)
    return all(t in known for t in topics)
