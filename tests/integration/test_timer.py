"""Timer messages end to end against a real broker process (precision 100 ms, recall on): they
come out on their real topic at their time and in order of time, never early; a recall cancels
one; a delay beyond timerMaxDelaySec is refused; delay levels still work; the admin reads the
timer checkpoint."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, eventually, module_cluster, unique_name, wait_until
from tests.wire import decode_pull, pull

import rocketq
import rocketq.aio
from rocketq import Message, MessageQueue
from rocketq.codec.codes import ResponseCode
from rocketq.codec.message import MessageExt
from rocketq.codec.recall import RecallHandle
from rocketq.errors import RocketQError
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(120)]

PRECISION = 100
cluster = module_cluster("timer", *SMALL_STORE, "--set", f"timerPrecisionMs={PRECISION}",
                         "--set", "recallMessageEnable=true")


def _now() -> int:
    return int(time.time() * 1000)


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[rocketq.aio.Producer]:
    p = rocketq.aio.Producer(unique_name("TimerP"), namesrv_addr=cluster.namesrv)
    await p.start()
    try:
        yield p
    finally:
        await p.shutdown()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


async def _read(client: RemotingClient, addr: str, topic: str, queue_id: int = 0) -> list[MessageExt]:
    out: list[MessageExt] = []
    while True:
        r = await pull(client, addr, "TimerReader", topic, queue_id, len(out))
        if r.code != ResponseCode.SUCCESS:
            return out
        out.extend(decode_pull(r))


async def _queue0(producer: rocketq.aio.Producer, topic: str, queue_id: int = 0) -> MessageQueue:
    queues = await producer.fetch_publish_message_queues(topic)
    return next(q for q in queues if q.queue_id == queue_id)


async def test_timers_fire_on_their_real_topic_in_order_of_time_never_early(
        cluster: Cluster, producer: rocketq.aio.Producer, client: RemotingClient) -> None:
    topic = unique_name("TimerOrder")
    await producer.send(Message(topic, b"warm-up"))  # creates the topic
    mq = await _queue0(producer, topic)
    base = _now() + 1500
    # Sent in shuffled time order; spread over 2 s at various offsets inside the slots.
    offsets = [1700, 200, 900, 1234, 0, 450, 1999, 650, 1100, 333]
    sent = {}
    for i, off in enumerate(offsets):
        r = await producer.send(Message(topic, f"t{i}".encode(), delivery_timestamp=base + off), queue=mq)
        assert r.recall_handle, "a timer message's SendResult carries its recall handle"
        sent[r.msg_id] = base + off

    async def fired() -> list[MessageExt] | None:
        msgs = [m for m in await _read(client, cluster.broker, topic) if m.msg_id in sent]
        return msgs if len(msgs) == len(sent) else None

    msgs = await wait_until(fired, timeout=60)
    assert [m.topic for m in msgs] == [topic] * len(sent)  # the real topic, not rmq_sys_wheel_timer
    due = [sent[m.msg_id] for m in msgs]
    assert due == sorted(due), "delivered in order of time"
    for m in msgs:
        assert m.store_timestamp >= sent[m.msg_id], "never before its time"
        out_ms = int(m.properties["TIMER_OUT_MS"])
        assert out_ms % PRECISION == 0 and out_ms < sent[m.msg_id]  # slots of the configured precision
        assert "REAL_TOPIC" not in m.properties and "TIMER_DEQUEUE_MS" in m.properties


async def test_a_delay_is_a_timer_too_and_delay_levels_still_work(
        cluster: Cluster, producer: rocketq.aio.Producer, client: RemotingClient) -> None:
    from datetime import timedelta

    topic = unique_name("TimerDelay")
    await producer.send(Message(topic, b"warm-up"))
    mq = await _queue0(producer, topic)
    t0 = _now()
    by_delay = await producer.send(Message(topic, b"delay", delay=timedelta(milliseconds=1500)), queue=mq)
    by_level = await producer.send(Message(topic, b"level", delay_level=1), queue=mq)
    assert by_level.recall_handle is None

    async def both() -> list[MessageExt] | None:
        msgs = {m.msg_id: m for m in await _read(client, cluster.broker, topic)}
        return [msgs[by_delay.msg_id], msgs[by_level.msg_id]] if by_delay.msg_id in msgs and (
            by_level.msg_id in msgs) else None

    delayed, levelled = await wait_until(both, timeout=60)
    assert delayed.store_timestamp >= t0 + 1500 and delayed.properties["TIMER_DELAY_MS"] == "1500"
    assert levelled.store_timestamp >= t0 + 1000 and levelled.properties.get("DELAY") == "1"


async def test_recall_cancels_a_pending_timer(
        cluster: Cluster, producer: rocketq.aio.Producer, client: RemotingClient) -> None:
    topic = unique_name("TimerRecall")
    await producer.send(Message(topic, b"warm-up"))
    mq = await _queue0(producer, topic, 2)
    at = _now() + 2500
    keep = await producer.send(Message(topic, b"keep", delivery_timestamp=at), queue=mq)
    gone = await producer.send(Message(topic, b"gone", delivery_timestamp=at), queue=mq)
    assert gone.recall_handle is not None
    assert gone.message_queue == mq  # the queue it will be delivered to, as Java answers
    handle = RecallHandle.decode(gone.recall_handle)
    assert (handle.topic, handle.message_id) == (topic, gone.msg_id)
    assert await producer.recall(topic, gone.recall_handle) == gone.msg_id
    later = await producer.send(Message(topic, b"later", delivery_timestamp=at + 1000), queue=mq)

    async def fired(msg_id: str) -> bool:
        return any(m.msg_id == msg_id for m in await _read(client, cluster.broker, topic, 2))

    await wait_until(lambda: fired(later.msg_id), timeout=60)  # the slot of `gone` is long over
    ids = [m.msg_id for m in await _read(client, cluster.broker, topic, 2)]
    assert keep.msg_id in ids and gone.msg_id not in ids
    # Too late to recall one that fired: refused as Java refuses it.
    with pytest.raises(RocketQError) as e:
        assert keep.recall_handle is not None
        await producer.recall(topic, keep.recall_handle)
    assert e.value.code == ResponseCode.ILLEGAL_OPERATION and "timestamp invalid" in str(e.value)


async def test_a_delay_beyond_the_max_is_refused(producer: rocketq.aio.Producer) -> None:
    topic = unique_name("TimerMax")
    four_days = _now() + 4 * 24 * 3600 * 1000
    with pytest.raises(RocketQError) as e:
        await producer.send(Message(topic, b"x", delivery_timestamp=four_days))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "max delay 259200000ms" in str(e.value)


def test_admin_reads_the_timer_checkpoint_and_metrics(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("TimerAdmin")
    with rocketq.Producer(unique_name("TimerAdminP"), namesrv_addr=cluster.namesrv) as p:
        p.send(Message(topic, b"x", delivery_timestamp=_now() + 60_000))
    assert eventually(lambda: admin.json("getTimerMetrics", "-b", cluster.broker).get(topic) == 1, timeout=30)
    cp = admin.json("getTimerCheckPoint", "-b", cluster.broker)
    assert cp["lastTimerQueueOffset"] >= 1 and cp["lastReadTimeMs"] % PRECISION == 0
    assert abs(cp["lastReadTimeMs"] - _now()) < 60_000  # it follows the clock
    code, out, _ = admin.raw("getTimerCheckPoint", "-b", cluster.broker)
    assert code == 0 and "lastTimerQueueOffset" in out
    status = admin.json("brokerStatus", "-b", cluster.broker)  # GET_BROKER_RUNTIME_INFO, Java's keys
    runtime = status.get(cluster.broker, status)
    assert int(runtime["timerCongestNum"]) >= 1 and runtime["timerOffsetBehind"] == "0"
