"""Our SDK (``rocketq.aio``) next to real RocketMQ clients, on the same topics and groups.

* rocketq ``Producer`` -> C++ and ali-ons push consumers: tags, keys, user properties, body intact.
* C++ and ali-ons producers -> rocketq ``PushConsumer``: the same, the other way round.
* The blocking ``rocketq.Producer`` / ``rocketq.PushConsumer`` with zlib-compressed bodies both ways.
* One consumer group made of a rocketq PushConsumer, a C++ push consumer and an ali-ons consumer:
  every client allocates with AllocateMessageQueueAveragely over the sorted client ids of
  GET_CONSUMER_LIST_BY_GROUP (38), so the members must split the 8 queues without overlap and each
  message must be consumed exactly once across the group.

Third-party clients run as subprocesses (tests/compat drivers); ours runs on the test's loop.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.harness import (
    ClientRunner,
    Cluster,
    ManagedProcess,
    assert_client_ok,
    parse_json_lines,
    start_process,
    unique_name,
)
from tests.wire import create_routed_topic

import rocketq
from rocketq.admin import AdminClient
from rocketq.aio import Producer, PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message, SendResult
from rocketq.codec.message import MessageExt

# Typically 1-3 s each; the mixed group may wait out one ali-ons rebalance period (10 s) when its
# first allocation ran before the broker listed it.
pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]

COMPAT_DIR = Path(__file__).resolve().parent
NODE_DIR = COMPAT_DIR / "node"
TAGS = ("TagA", "TagB")


async def make_topic(cluster: Cluster, queues: int) -> str:
    topic = unique_name("SdkTopic")
    await create_routed_topic(cluster.namesrv, cluster.broker, topic, queues)
    return topic


async def produce(cluster: Cluster, topic: str, count: int, prefix: str) -> list[tuple[Message, SendResult]]:
    sent = []
    async with Producer(unique_name("SdkP"), namesrv_addr=cluster.namesrv) as producer:
        for i in range(count):
            msg = Message(
                topic, f"{prefix}-{i}".encode(), tags=TAGS[i % len(TAGS)], keys=f"key-{i} alt-{i}",
                properties={"origin": "rocketq", "seq": str(i)},
            )
            sent.append((msg, await producer.send(msg)))
    return sent


class Recorder:
    """A sync listener keeping every delivered message (duplicates included)."""

    def __init__(self) -> None:
        self.messages: list[MessageExt] = []

    def __call__(self, msgs: list[MessageExt], _ctx: Any) -> ConsumeStatus:
        self.messages.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> set[str]:
        return {m.body.decode() for m in self.messages}


def new_push_consumer(cluster: Cluster, group: str, topic: str, listener: Recorder) -> PushConsumer:
    consumer = PushConsumer(
        group, namesrv_addr=cluster.namesrv, instance_name=unique_name("sdk"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_thread_min=2, consume_thread_max=2,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    return consumer


async def wait_for(predicate: Callable[[], bool | Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.1)


# -- 1. rocketq producer -> third-party consumers -------------------------------------------------


async def test_rocketq_producer_to_cpp_and_ali_ons_consumers(
    cpp: ClientRunner, ali_ons: ClientRunner, cluster: Cluster
) -> None:
    topic, count = await make_topic(cluster, 4), 12
    sent = await produce(cluster, topic, count, "from-rocketq")

    # Two groups, so each client sees every message; run side by side to halve the wall time.
    cpp_run, node_run = await asyncio.gather(
        asyncio.to_thread(cpp, "consume", topic, unique_name("SdkCppC"), count,
                          "--property", "origin", "--property", "seq"),
        asyncio.to_thread(ali_ons, "consume", topic, unique_name("SdkNodeC"), count),
    )
    assert_client_ok(cpp_run, cluster)
    assert_client_ok(node_run, cluster)

    by_uniq = {r["msgId"]: r for r in cpp_run.of("received")}
    assert set(by_uniq) == {res.msg_id for _, res in sent}, "C++ reports our UNIQ_KEY as msgId"
    for msg, res in sent:
        r = by_uniq[res.msg_id]
        assert (r["topic"], r["tags"], r["keys"]) == (topic, msg.tags, msg.keys)
        assert r["body"] == msg.body.decode()
        assert r["properties"] == dict(msg.properties)
        assert (r["queueId"], r["queueOffset"]) == (res.message_queue.queue_id, res.queue_offset)
        assert r["reconsumeTimes"] == 0

    by_offset_id = {r["msgId"]: r for r in node_run.of("received")}
    assert set(by_offset_id) == {res.offset_msg_id for _, res in sent}, "ali-ons shows the offset msgId"
    for msg, res in sent:
        r = by_offset_id[res.offset_msg_id]
        assert (r["topic"], r["tags"], r["keys"]) == (topic, msg.tags, msg.keys)
        assert r["body"] == msg.body.decode()
        props = r["properties"]
        assert (props["origin"], props["seq"]) == ("rocketq", msg.properties["seq"])
        assert props["UNIQ_KEY"] == res.msg_id
        assert (r["queue"]["queueId"], r["queueOffset"]) == (res.message_queue.queue_id, res.queue_offset)


# -- 2. third-party producers -> rocketq consumer -------------------------------------------------


async def test_cpp_and_ali_ons_producers_to_rocketq_consumer(
    cpp: ClientRunner, ali_ons: ClientRunner, cluster: Cluster
) -> None:
    topic, count = await make_topic(cluster, 4), 10
    recorder = Recorder()
    consumer = new_push_consumer(cluster, unique_name("SdkC"), topic, recorder)
    await consumer.start()
    try:
        # Both producers write to the topic at the same time while our consumer is already pulling.
        cpp_run, node_run = await asyncio.gather(
            asyncio.to_thread(cpp, "produce", topic, unique_name("SdkCppP"), count,
                              "--prefix", "from-cpp", "--property", "origin=cpp"),
            asyncio.to_thread(ali_ons, "produce", topic, unique_name("SdkNodeP"), count,
                              "--prefix", "from-node", "--property", "origin=ali-ons"),
        )
        assert_client_ok(cpp_run, cluster)
        assert_client_ok(node_run, cluster)
        await wait_for(lambda: len(recorder.bodies()) >= 2 * count, 20, f"{2 * count} messages")
    finally:
        await consumer.shutdown()

    got = {m.body.decode(): m for m in recorder.messages}
    cpp_sent = {s["body"]: s for s in cpp_run.of("sent")}
    node_sent = {s["body"]: s for s in node_run.of("sent")}
    assert set(got) == set(cpp_sent) | set(node_sent)
    for body, s in cpp_sent.items():
        m = got[body]
        assert m.topic == topic
        assert (m.tags, m.keys, m.uniq_key) == (s["tags"], s["keys"], s["msgId"])
        assert m.properties["origin"] == "cpp"
        assert m.queue_offset == s["queueOffset"]  # the binding's SendResult has no queue id
        assert m.reconsume_times == 0
    for body, s in node_sent.items():
        m = got[body]
        assert m.topic == topic
        assert (m.tags, m.keys) == (s["tags"], s["keys"])
        assert m.properties["origin"] == "ali-ons"
        # ali-ons' msgId is the offset id of the stored record; the broker gave it a UNIQ_KEY.
        assert m.offset_msg_id == s["msgId"]
        assert (m.queue_id, m.queue_offset) == (s["queue"]["queueId"], s["queueOffset"])
        assert m.uniq_key and len(m.uniq_key) == 32


# -- 3. one group, three SDKs ---------------------------------------------------------------------


def allocate_averagely(queues: int, cids: Sequence[str], cid: str) -> set[int]:
    """Java's AllocateMessageQueueAveragely, for one broker (queue ids stand for the sorted queues)."""
    index, n = sorted(cids).index(cid), len(cids)
    mod = queues % n
    size = 1 if queues <= n else queues // n + (1 if mod and index < mod else 0)
    start = index * size if mod and index < mod else index * size + mod
    return {(start + i) % queues for i in range(max(0, min(size, queues - start)))}


def _client_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home), "PYTHONUNBUFFERED": "1"}


def _events(proc: ManagedProcess) -> tuple[dict[str, Any], ...]:
    return parse_json_lines(proc.stdout())


async def _wait_exit(proc: ManagedProcess, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while proc.alive() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return proc.returncode()


def _cpp_owned(info: dict[str, Any], topic: str) -> set[int]:
    # ConsumerRunningInfo.mqTable is keyed by the MessageQueue serialised as JSON text.
    owned = set()
    for key, pq in info.get("mqTable", {}).items():
        mq = json.loads(key) if isinstance(key, str) else key
        if mq.get("topic") == topic and not pq.get("droped"):
            owned.add(int(mq["queueId"]))
    return owned


async def test_mixed_group_shares_the_queues(
    cpp_wheel: str, node_executable: str, cluster: Cluster, tmp_path: Path
) -> None:
    queues, count = 8, 64
    topic, group = await make_topic(cluster, queues), unique_name("SdkMixed")
    stop_file = tmp_path / "stop"
    recorder = Recorder()
    ours = new_push_consumer(cluster, group, topic, recorder)
    members: dict[str, ManagedProcess] = {}
    admin = AdminClient(cluster.namesrv)
    await admin.start()
    await ours.start()
    try:
        ours_id = ours.client.client_id
        cids: list[str] = []

        async def members_registered(n: int) -> bool:
            nonlocal cids
            for name, proc in members.items():
                assert proc.alive(), f"{name} member exited early\n{proc.describe()}"
            try:
                conn = await admin.examine_consumer_connection_info(group)
            except Exception:  # the group is not known to the broker yet
                return False
            cids = sorted(c.client_id for c in conn.connection_set)
            return len(cids) == n

        def ours_owned() -> set[int]:
            table = ours.process_queue_table
            return {mq.queue_id for mq, pq in table.items() if mq.topic == topic and not pq.dropped}

        async def cpp_owned(cpp_id: str) -> set[int]:
            # The C++ client answers GET_CONSUMER_RUNNING_INFO (307) with its process queues.
            return _cpp_owned(await admin.get_consumer_running_info(group, cpp_id), topic)

        def node_owned() -> set[int] | None:
            owned = [e for e in _events(members["ali-ons"]) if e.get("event") == "owned"]
            return set(owned[-1]["queues"]) if owned else None

        # The C++ member joins first; ours hands it half the queues on NOTIFY_CONSUMER_IDS_CHANGED.
        members["cpp"] = start_process(
            [sys.executable, str(COMPAT_DIR / "cpp_client.py"), "consume", cluster.namesrv, topic, group,
             "0", "--stop-file", str(stop_file), "--timeout", "55"],
            name="cpp-member", log_dir=tmp_path, env=_client_env(tmp_path / "cpp-home"), cwd=COMPAT_DIR,
        )
        await wait_for(lambda: members_registered(2), 15, "the C++ member to register")
        cpp_id = next(c for c in cids if c != ours_id)
        two = {name: allocate_averagely(queues, cids, cid)
               for name, cid in (("rocketq", ours_id), ("cpp", cpp_id))}

        async def two_converged() -> bool:
            return ours_owned() == two["rocketq"] and await cpp_owned(cpp_id) == two["cpp"]

        await wait_for(two_converged, 15, f"rocketq and C++ to own {two}")

        # ali-ons joins last, so it never has to give a queue up: it consumes what a long poll already
        # in flight returns even after dropping the queue (docs/interop.md), a duplicate in the group.
        members["ali-ons"] = start_process(
            [node_executable, str(NODE_DIR / "ali_ons_roundtrip.js"), cluster.namesrv, topic, group, "0",
             "--mode", "consume", "--stop-file", str(stop_file), "--timeout", "55"],
            name="ali-ons-member", log_dir=tmp_path, env=_client_env(tmp_path / "node-home"), cwd=NODE_DIR,
        )
        await wait_for(lambda: members_registered(3), 15, "the ali-ons member to register")
        node_id = next(c for c in cids if c not in (ours_id, cpp_id))
        expected = {name: allocate_averagely(queues, cids, cid)
                    for name, cid in (("rocketq", ours_id), ("cpp", cpp_id), ("ali-ons", node_id))}

        async def three_converged() -> bool:
            return (
                ours_owned() == expected["rocketq"]
                and node_owned() == expected["ali-ons"]
                and await cpp_owned(cpp_id) == expected["cpp"]
            )

        # ali-ons allocates at start and then every 10 s; C++ and ours follow the notification.
        await wait_for(three_converged, 20, f"the three members to own {expected}")

        sent = await produce(cluster, topic, count, "mixed")
        expected_bodies = {msg.body.decode() for msg, _ in sent}

        def received() -> dict[str, list[dict[str, Any]]]:
            out: dict[str, list[dict[str, Any]]] = {
                "rocketq": [{"body": m.body.decode(), "queueId": m.queue_id} for m in recorder.messages]
            }
            for name, proc in members.items():
                out[name] = [
                    {"body": e["body"], "queueId": e["queueId"] if name == "cpp" else e["queue"]["queueId"]}
                    for e in _events(proc) if e.get("event") == "received"
                ]
            return out

        def all_in() -> bool:
            return {r["body"] for rs in received().values() for r in rs} >= expected_bodies

        await wait_for(all_in, 15, f"{count} messages across the group")
        # A duplicate would come from a queue served twice; give a late one the chance to show.
        await asyncio.sleep(1.0)
        got = received()
    finally:
        stop_file.touch()
        await ours.shutdown()
        await admin.shutdown()
        codes = {name: await _wait_exit(proc, 15) for name, proc in members.items()}
        for proc in members.values():
            proc.stop(grace=2)
    for name, proc in members.items():
        assert codes[name] == 0, f"{name} member did not end cleanly\n{proc.describe()}"

    bodies = collections.Counter(r["body"] for rs in got.values() for r in rs)
    assert set(bodies) == expected_bodies
    assert [b for b, n in bodies.items() if n != 1] == [], "each message consumed exactly once by the group"
    # Each member consumed exactly what the producer put into the queues allocated to it.
    queue_of = {msg.body.decode(): res.message_queue.queue_id for msg, res in sent}
    for name, records in got.items():
        assert records, f"{name} got no share: {expected}"
        mine = {body for body, queue_id in queue_of.items() if queue_id in expected[name]}
        assert {r["body"] for r in records} == mine, (name, expected)
        assert all(queue_of[r["body"]] == r["queueId"] for r in records), name


# -- 4. the blocking facades, with bodies big enough to be compressed ------------------------------


def big_body(size: int, tag: str) -> str:
    # Printable (the C++ binding cuts bodies at NUL) and repetitive, so zlib really shrinks it.
    unit = f"{tag}-rocketq-sync-0123456789-"
    return (unit * (size // len(unit) + 1))[:size]


def sha16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]  # the drivers' bodySha


def test_sync_sdk_compressed_bodies_both_ways(
    cpp: ClientRunner, ali_ons: ClientRunner, cluster: Cluster
) -> None:
    # Our producer deflates bodies over 4 KiB (sysFlag bit 0); the third parties must inflate them.
    topic = asyncio.run(make_topic(cluster, 4))
    bodies = [big_body(6 * 1024, f"m{i}") for i in range(3)] + ["small-0", "small-1"]
    producer = rocketq.Producer(unique_name("SdkSyncP"), namesrv_addr=cluster.namesrv)
    producer.start()
    try:
        results = [producer.send(Message(topic, b.encode(), tags="Big", keys=f"sync-{i}"))
                   for i, b in enumerate(bodies)]
    finally:
        producer.shutdown()
    cpp_run = assert_client_ok(cpp("consume", topic, unique_name("SdkSyncCppC"), len(bodies)), cluster)
    node_run = assert_client_ok(ali_ons("consume", topic, unique_name("SdkSyncNodeC"), len(bodies)), cluster)
    sha = {r.msg_id: sha16(b.encode()) for r, b in zip(results, bodies, strict=True)}
    assert {r["msgId"]: r["bodySha"] for r in cpp_run.of("received")} == sha
    assert sorted(r["body"] for r in node_run.of("received")) == sorted(bodies)
    assert {r["sysFlag"] & 1 for r in node_run.of("received") if len(r["body"]) > 4096} == {1}

    # The other way: the C++ producer deflates its 5 KiB body, our blocking PushConsumer inflates it.
    topic2, count = asyncio.run(make_topic(cluster, 4)), 6
    produced = assert_client_ok(
        cpp("produce", topic2, unique_name("SdkSyncCppP"), count, "--big-body", "5120"), cluster
    )
    recorder = Recorder()
    consumer = rocketq.PushConsumer(
        unique_name("SdkSyncC"), namesrv_addr=cluster.namesrv, instance_name=unique_name("sync"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_thread_min=2, consume_thread_max=2,
    )
    consumer.subscribe(topic2, "*")
    consumer.register_listener(recorder)
    consumer.start()
    try:
        deadline = time.monotonic() + 20
        while len(recorder.bodies()) < count and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        consumer.shutdown()
    got = {m.uniq_key: m for m in recorder.messages}
    assert set(got) == {s["msgId"] for s in produced.of("sent")}
    for s in produced.of("sent"):
        m = got[s["msgId"]]
        assert (len(m.body), sha16(m.body)) == (s["bodyLen"], s["bodySha"])
        assert (m.tags, m.keys) == (s["tags"], s["keys"])
