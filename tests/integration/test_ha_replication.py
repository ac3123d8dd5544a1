"""Master/slave replication with real processes (docs/ha.md): one name server, one broker group of a
master and a slave, each its own ``rocketq broker`` with its own store.

What is sent to the master is readable from the slave; topics and consumer offsets follow; a slave
killed with -9 catches up from its own offset; a slave whose log went past its master's is cut back
to it; consumers keep reading from the slave while the master is down; and under SYNC_MASTER +
SYNC_FLUSH, a master killed with -9 under 64-way send load loses no acknowledged message: every one
is in the slave's store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.harness import (
    Server,
    small_store,
    start_group_member,
    start_namesrv_server,
    unique_name,
    wait_until,
)
from tests.wire import (
    create_topic,
    decode_pull,
    get_all_topic_config,
    get_max_offset,
    invoke,
    message_properties,
    pull,
    send_header,
)

from rocketq.codec.bodies import KVTable
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(180)

GROUP = "ha-a"
QUEUES = 4
STORE = small_store(commit_log=1024 * 1024, slots=4000, index=16000)
DURABLE = ("--set", "flushDiskType=SYNC_FLUSH")


@contextlib.contextmanager
def broker_group(tmp_path: Path, *extra: str, role: str = "ASYNC_MASTER") -> Iterator[dict[str, Server]]:
    """{"ns", "master", "slave"}: stopped on exit (whatever is still running)."""
    started: dict[str, Server] = {}
    try:
        started["ns"] = ns = start_namesrv_server(tmp_path)
        started["master"] = start_group_member(tmp_path, GROUP, ns.addr, 0, *STORE, *extra, role=role)
        started["slave"] = start_group_member(tmp_path, GROUP, ns.addr, 1, *STORE, *extra)
        yield started
    finally:
        for server in reversed(list(started.values())):
            server.proc.stop()


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, queue_id: int) -> tuple[int, str]:
    """(response code, UNIQ_KEY) of one SEND_MESSAGE_V2."""
    response, uniq = await send_command(client, addr, topic, body, queue_id)
    return response.code, uniq


async def send_command(client: RemotingClient, addr: str, topic: str, body: bytes,
                       queue_id: int) -> tuple[RemotingCommand, str]:
    """(response, UNIQ_KEY) of one SEND_MESSAGE_V2."""
    props = message_properties()
    uniq = props.split("UNIQ_KEY\x01", 1)[1].split("\x02", 1)[0]
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                      send_header(topic, queue_id=queue_id, properties=props), body)
    return await client.invoke(addr, request, 5.0), uniq


async def read_all(client: RemotingClient, addr: str, topic: str, queues: int = QUEUES) -> list[Any]:
    """Every message of `topic` on the broker at `addr`, queue by queue, by plain pulls (a slave
    serves a topic once its 10 s copy of the master's table brought it)."""
    await wait_until(lambda: topic_on(client, addr, topic), timeout=40)
    out: list[Any] = []
    for q in range(queues):
        offset = 0
        while True:
            r = await pull(client, addr, "ha-reader", topic, q, offset)
            if r.code != ResponseCode.SUCCESS:
                break
            msgs = decode_pull(r)
            out += msgs
            offset = int(r.ext_fields["nextBeginOffset"])
    return out


async def same_max_offsets(client: RemotingClient, a: str, b: str, topic: str) -> bool:
    for q in range(QUEUES):
        if await get_max_offset(client, a, topic, q) != await get_max_offset(client, b, topic, q):
            return False
    return True


async def replicated_topic(client: RemotingClient, g: dict[str, Server], prefix: str, n: int,
                           tag: str = "m") -> tuple[str, list[str]]:
    """A new topic on the group's master with `n` messages, once the slave has them all."""
    master = g["master"].addr
    topic = unique_name(prefix)
    await create_topic(client, master, topic, read=QUEUES, write=QUEUES)
    keys = await fill(client, master, topic, n, tag)
    await wait_until(lambda: same_max_offsets(client, master, g["slave"].addr, topic), timeout=30)
    return topic, keys


async def fill(client: RemotingClient, addr: str, topic: str, n: int, tag: str = "m") -> list[str]:
    keys = []
    for i in range(n):
        code, uniq = await send(client, addr, topic, f"{tag}{i}".encode(), i % QUEUES)
        assert code == ResponseCode.SUCCESS
        keys.append(uniq)
    return keys


async def test_messages_topics_and_offsets_reach_the_slave(tmp_path: Path) -> None:
    with broker_group(tmp_path) as g:
        master, slave = g["master"].addr, g["slave"].addr
        async with RemotingClient() as client:
            topic = unique_name("HaT")
            assert (await create_topic(client, master, topic, read=QUEUES, write=QUEUES)).code == 0
            keys = await fill(client, master, topic, 200)
            await wait_until(lambda: same_max_offsets(client, master, slave, topic), timeout=30)
            got = await read_all(client, slave, topic)
            assert sorted(m.uniq_key for m in got) == sorted(keys)

            # The slave refuses sends, as RocketMQ's does.
            code, _ = await send(client, slave, topic, b"no", 0)
            assert code == ResponseCode.SERVICE_NOT_AVAILABLE

            # Topic configs and consumer offsets come over with the 10 s table copy.
            r = await invoke(client, master, RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "ha-cg", "topic": topic, "queueId": 1, "commitOffset": 37})
            assert r.code == 0

            async def offset_on_slave() -> bool:
                r = await invoke(client, slave, RequestCode.QUERY_CONSUMER_OFFSET, {
                    "consumerGroup": "ha-cg", "topic": topic, "queueId": 1})
                return r.code == 0 and r.ext_fields.get("offset") == "37"

            await wait_until(offset_on_slave, timeout=40)
            assert topic in await get_all_topic_config(client, slave)


async def test_killed_slave_catches_up_from_its_own_offset(tmp_path: Path) -> None:
    with broker_group(tmp_path) as g:
        master = g["master"].addr
        async with RemotingClient() as client:
            topic, keys = await replicated_topic(client, g, "HaR", 100, "a")
            g["slave"].proc.kill()
            keys += await fill(client, master, topic, 300, "b")
            g["slave"] = start_group_member(tmp_path, GROUP, g["ns"].addr, 1, *STORE)
            await wait_until(lambda: same_max_offsets(client, master, g["slave"].addr, topic), timeout=60)
            got = await read_all(client, g["slave"].addr, topic)
            assert sorted(m.uniq_key for m in got) == sorted(keys)  # nothing twice, nothing lost


# ~13 s of real replication: make test-all runs it; make test keeps the pair, kill -9 and slave-read tests.
@pytest.mark.slow
async def test_a_slave_past_its_master_is_truncated_to_it(tmp_path: Path) -> None:
    """The master lost the tail of its log (as a machine crash loses unflushed pages) that its slave
    already had: the slave cuts its log back to the master's end and then follows it again."""
    with broker_group(tmp_path) as g:
        async with RemotingClient() as client:
            topic, _ = await replicated_topic(client, g, "HaD", 60, "old")
            await read_all(client, g["slave"].addr, topic)  # the slave has the topic's config too
            g["slave"].proc.kill()
            g["master"].proc.stop()
            segment = tmp_path / f"{GROUP}-0" / "store" / "commitlog" / ("0" * 20)
            data = segment.read_bytes()
            end = len(data.rstrip(b"\0"))
            cut = 0
            while cut < end - 1000:  # from a record start: the last ~5 records never reached the disk
                cut += int.from_bytes(data[cut : cut + 4], "big")
            with segment.open("r+b") as f:
                f.seek(cut)
                f.write(bytes(end - cut))

            g["master"] = start_group_member(tmp_path, GROUP, g["ns"].addr, 0, *STORE)
            g["slave"] = start_group_member(tmp_path, GROUP, g["ns"].addr, 1, *STORE)
            master = g["master"].addr
            await fill(client, master, topic, 8, "new")
            await wait_until(lambda: same_max_offsets(client, master, g["slave"].addr, topic), timeout=60)
            on_master = sorted(m.uniq_key for m in await read_all(client, master, topic))
            on_slave = sorted(m.uniq_key for m in await read_all(client, g["slave"].addr, topic))
            assert on_slave == on_master
            assert 60 < len(on_master) < 68
            assert "truncating" in g["slave"].proc.stderr_path.read_text()


async def consume_all(namesrv: str, topic: str, keys: list[str]) -> None:
    """A push consumer (a new group, from the first offset) until it got every one of `keys`."""
    from rocketq.aio import PushConsumer
    from rocketq.client.consumer import ConsumeStatus

    seen: set[str] = set()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        seen.update(m.uniq_key for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(unique_name("HaCG"), namesrv_addr=namesrv,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await wait_until(lambda: seen >= set(keys), timeout=60)
    finally:
        await consumer.shutdown()


async def gets_served(client: RemotingClient, addr: str) -> int:
    r = await invoke(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return int(KVTable.from_json(r.body_bytes()).table["msgGetTotalTodayNow"])


async def test_consumers_read_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    with broker_group(tmp_path) as g:
        async with RemotingClient() as client:
            topic, keys = await replicated_topic(client, g, "HaS", 40)
            await wait_until(lambda: topic_on(client, g["slave"].addr, topic), timeout=40)
        g["master"].proc.kill()
        await consume_all(g["ns"].addr, topic, keys)


# ~13 s of real replication: make test-all runs it; make test keeps the pair, kill -9 and slave-read tests.
@pytest.mark.slow
async def test_a_consumer_far_behind_is_sent_to_the_slave(tmp_path: Path) -> None:
    """slaveReadEnable with accessMessageInMemoryMaxRatio=0: every pull that leaves anything behind it
    is out of "memory", so the master suggests the slave and the SDK's next pulls go there."""
    with broker_group(tmp_path, "--set", "slaveReadEnable=true",
                      "--set", "accessMessageInMemoryMaxRatio=0") as g:
        async with RemotingClient() as client:
            topic, keys = await replicated_topic(client, g, "HaF", 400)
            await wait_until(lambda: topic_on(client, g["slave"].addr, topic), timeout=40)
            before = await gets_served(client, g["slave"].addr)
            await consume_all(g["ns"].addr, topic, keys)
            assert await gets_served(client, g["slave"].addr) > before


async def _kill_master_under_load(tmp_path: Path) -> None:
    """SYNC_MASTER + SYNC_FLUSH on both: 64 senders, the master killed with -9 mid-stream; every
    message acknowledged with SEND_OK is in the slave's store."""
    with broker_group(tmp_path, *DURABLE, role="SYNC_MASTER") as g:
        master, slave = g["master"].addr, g["slave"].addr
        acked: list[str] = []
        async with RemotingClient() as client:
            topic = unique_name("HaK")
            await create_topic(client, master, topic, read=QUEUES, write=QUEUES)
            await wait_until(lambda: topic_on(client, slave, topic), timeout=40)
            code, _ = await send(client, master, topic, b"first", 0)
            assert code == ResponseCode.SUCCESS  # the slave is connected and acking
            stop = asyncio.Event()

            async def sender(i: int) -> None:
                n = 0
                while not stop.is_set():
                    try:
                        code, uniq = await send(client, master, topic, b"x%d-%d" % (i, n), n % QUEUES)
                    except Exception:
                        return  # the master is gone
                    if code == ResponseCode.SUCCESS:
                        acked.append(uniq)
                    n += 1

            senders = [asyncio.ensure_future(sender(i)) for i in range(64)]
            await wait_until(lambda: len(acked) >= 500, timeout=60)
            g["master"].proc.kill()
            await asyncio.wait_for(asyncio.gather(*senders), 30)
            stop.set()
            stored = {m.uniq_key for m in await read_all(client, slave, topic)}
        lost = set(acked) - stored
        assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages are not on the slave"


async def topic_on(client: RemotingClient, addr: str, topic: str) -> bool:
    return topic in await get_all_topic_config(client, addr)


async def test_sync_master_kill_loses_no_acknowledged_message(tmp_path: Path) -> None:
    await _kill_master_under_load(tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("round_", range(5))
async def test_sync_master_kill_loses_no_acknowledged_message_again(tmp_path: Path, round_: int) -> None:
    await _kill_master_under_load(tmp_path)
