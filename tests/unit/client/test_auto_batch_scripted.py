"""Automatic batching against scripted brokers: an idle producer sends each message at once and
alone, messages sent while a request is in flight leave as batches, and a batch's retry or error
reaches every caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.unit.client.test_producer_send_call import FakeCluster, cluster, producer

from rocketq.aio import Producer
from rocketq.client.message import Message
from rocketq.client.producer import SelectMessageQueueByHash
from rocketq.client.producer.accumulator import PIPELINE
from rocketq.codec.codes import ResponseCode
from rocketq.errors import MessageIllegal, RemotingTimeoutError

__all__ = ["cluster", "producer"]  # the scripted cluster fixtures, shared with the send-call tests

pytestmark = pytest.mark.timeout(30)


def requests(cluster: FakeCluster) -> list[dict[str, str]]:
    return [s for b in cluster.brokers.values() for s in b.sends]


def forget_requests(cluster: FakeCluster) -> int:
    """Clear what the brokers recorded (``requests`` lists broker by broker, so a count taken
    before would not mark where the new ones start); returns 0, the new start."""
    for b in cluster.brokers.values():
        b.sends.clear()
    return 0


def hang(cluster: FakeCluster, answer: int | str) -> None:
    for b in cluster.brokers.values():
        b.answer = answer


async def wait_for_requests(cluster: FakeCluster, n: int) -> None:
    async with asyncio.timeout(15):
        while len(requests(cluster)) < n:
            await asyncio.sleep(0.01)


async def hang_one(p: Producer, cluster: FakeCluster) -> tuple[asyncio.Future[Any], int]:
    """Send one message the brokers never answer; returns its future and the requests before it.
    The brokers answer everything after it."""
    before = len(requests(cluster))
    for b in cluster.brokers.values():
        b.answer = "hang"
    stuck = p.send_async(Message("T", b"stuck"))
    while len(requests(cluster)) == before:  # the broker holds it
        await asyncio.sleep(0.01)
    for b in cluster.brokers.values():
        b.answer = ResponseCode.SUCCESS
    return stuck, before


async def test_an_idle_producer_sends_every_message_at_once_and_alone(
        cluster: FakeCluster, producer: Producer) -> None:
    assert producer.config.auto_batch
    await producer.send(Message("T", b"route"))
    for i in range(10):
        await producer.send_async(Message("T", b"%d" % i))
    assert [s["m"] for s in requests(cluster)] == ["false"] * 11  # never a batch
    assert producer._batch_async is not None and producer._batch_async.held_bytes == 0


async def test_a_long_max_delay_never_holds_a_message_of_an_idle_queue(cluster: FakeCluster) -> None:
    async with Producer("PG_DELAY", namesrv_addr=cluster.namesrv_addr, batch_max_delay_ms=30_000) as p:
        await p.send(Message("T", b"route"))
        # held for batch_max_delay_ms, these would take minutes: the wait_for bound would fail them
        await asyncio.wait_for(asyncio.gather(*(p.send_async(Message("T", b"%d" % i)) for i in range(4))), 20)
        for i in range(4):
            await asyncio.wait_for(p.send_async(Message("T", b"%d" % i)), 20)


async def test_sends_during_a_request_in_flight_leave_as_batches(
        cluster: FakeCluster, producer: Producer) -> None:
    await producer.send(Message("T", b"route"))
    cluster.brokers["a"].sends.clear()
    cluster.brokers["b"].sends.clear()
    futs = [producer.send_async(Message("T", b"m%d" % i, tags="A")) for i in range(200)]
    results = await asyncio.gather(*futs)
    sent = requests(cluster)
    batches = [s for s in sent if s["m"] == "true"]
    assert batches, "nothing was batched"
    assert len(sent) < 200
    assert all("UNIQ_KEY" not in s["i"] for s in batches)  # Apache brokers would give them one id
    assert len({r.msg_id for r in results}) == 200 and all("," not in r.msg_id for r in results)


async def test_plain_pipelining_when_auto_batch_is_off(cluster: FakeCluster) -> None:
    async with Producer("PG_PLAIN", namesrv_addr=cluster.namesrv_addr, auto_batch=False) as p:
        await p.send(Message("T", b"route"))
        await asyncio.gather(*(p.send_async(Message("T", b"%d" % i)) for i in range(50)))
    assert len(requests(cluster)) == 51 and {s["m"] for s in requests(cluster)} == {"false"}


async def test_a_batch_error_reaches_each_caller(cluster: FakeCluster, producer: Producer) -> None:
    await producer.send(Message("T", b"route"))
    for b in cluster.brokers.values():
        b.answer = ResponseCode.MESSAGE_ILLEGAL
    futs = [producer.send_async(Message("T", b"%d" % i)) for i in range(40)]
    outcomes = await asyncio.gather(*futs, return_exceptions=True)
    assert all(isinstance(o, MessageIllegal) for o in outcomes)
    assert any(s["m"] == "true" for s in requests(cluster))


async def test_a_retried_batch_answers_each_caller_from_the_other_broker(
        cluster: FakeCluster, producer: Producer) -> None:
    await producer.send(Message("T", b"route"))
    cluster.brokers["a"].answer = ResponseCode.SYSTEM_BUSY
    results = []
    for _ in range(20):  # each burst starts on the next queue: some burst's batch goes to a
        results += await asyncio.gather(*(producer.send_async(Message("T", b"%d" % i)) for i in range(60)))
        if any(s["m"] == "true" for s in cluster.brokers["a"].sends):
            break
    assert any(s["m"] == "true" for s in cluster.brokers["a"].sends), "no batch was tried on a"
    assert {r.message_queue.broker_name for r in results} == {"b"}
    assert len({r.msg_id for r in results}) == len(results)


async def test_a_caller_that_cancels_is_left_out_of_its_batch(
        cluster: FakeCluster, producer: Producer) -> None:
    await producer.send(Message("T", b"route"))
    futs = [producer.send_async(Message("T", b"%d" % i)) for i in range(30)]
    futs[-1].cancel()
    results = await asyncio.gather(*futs[:-1])
    assert len({r.msg_id for r in results}) == 29
    assert futs[-1].cancelled()


async def test_gathered_messages_leave_after_batch_max_delay_when_the_request_hangs(
        cluster: FakeCluster) -> None:
    # an ordered lane (a fixed queue) has one request in flight: what it gathers waits for that
    # request's answer or for the delay
    async with Producer("PG_EXPIRE", namesrv_addr=cluster.namesrv_addr, batch_max_delay_ms=50,
                        send_msg_timeout=20_000) as p:
        await p.send(Message("T", b"route"))
        mq = (await p.fetch_publish_message_queues("T"))[0]
        before = forget_requests(cluster)
        hang(cluster, "hang")
        stuck = p.send_async(Message("T", b"stuck"), queue=mq)
        await wait_for_requests(cluster, before + 1)
        hang(cluster, ResponseCode.SUCCESS)
        results = await asyncio.wait_for(
            asyncio.gather(*(p.send_async(Message("T", b"%d" % i), queue=mq) for i in range(10))), 15)
        assert not stuck.done()
        assert len({r.msg_id for r in results}) == 10
        assert sorted(s["m"] for s in requests(cluster)[before:]) == ["false", "true"]
        stuck.cancel()


async def test_a_busy_queue_has_a_few_requests_in_flight_and_holds_the_rest(cluster: FakeCluster) -> None:
    async with Producer("PG_PIPE", namesrv_addr=cluster.namesrv_addr, batch_max_delay_ms=30_000,
                        send_msg_timeout=2_000, retry_times_when_send_async_failed=0) as p:
        await p.send(Message("T", b"route"))
        before = forget_requests(cluster)
        hang(cluster, "hang")
        futs = []
        for _ in range(PIPELINE + 2):  # each turn's sends leave together while the queue has room
            futs += [p.send_async(Message("T", b"%d" % i)) for i in range(3)]
            await asyncio.sleep(0.05)
        await wait_for_requests(cluster, before + PIPELINE)
        await asyncio.sleep(0.2)
        sent = requests(cluster)[before:]
        assert len(sent) == PIPELINE  # no more in flight at once...
        assert len({(s["b"], s["e"]) for s in sent}) == 1  # ...to the one queue they stick to
        assert [s["m"] for s in sent] == ["false"] + ["true"] * (PIPELINE - 1)
        assert p._batch_async is not None and p._batch_async.held_bytes == 3 * 3  # the rest is held
        # the hanging requests time out, then the held ones leave and do: each caller gets an error
        outcomes = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 30)
        assert len(outcomes) == 3 * (PIPELINE + 2)
        assert all(isinstance(o, RemotingTimeoutError) for o in outcomes)


async def test_an_ordered_queue_keeps_one_request_in_flight(cluster: FakeCluster) -> None:
    async with Producer("PG_ORDER", namesrv_addr=cluster.namesrv_addr, batch_max_delay_ms=30_000,
                        send_msg_timeout=2_000) as p:
        await p.send(Message("T", b"route"))
        before = forget_requests(cluster)
        hang(cluster, "hang")
        futs = []
        first = SelectMessageQueueByHash()
        for _ in range(3):
            futs += [p.send_async(Message("T", b"%d" % i), selector=first, arg=0) for i in range(3)]
            await asyncio.sleep(0.05)
        await wait_for_requests(cluster, before + 1)
        await asyncio.sleep(0.2)
        assert len(requests(cluster)) == before + 1
        assert p._batch_async is not None and p._batch_async.held_bytes == 8
        await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 60)


async def test_the_total_bound_sends_at_once_instead_of_holding(cluster: FakeCluster) -> None:
    async with Producer("PG_TOTAL", namesrv_addr=cluster.namesrv_addr, batch_max_delay_ms=30_000,
                        total_batch_max_bytes=1, send_msg_timeout=20_000) as p:
        await p.send(Message("T", b"route"))
        stuck, before = await hang_one(p, cluster)
        # with nothing allowed to be held, each message behind the hanging one leaves at once
        results = await asyncio.wait_for(
            asyncio.gather(*(p.send_async(Message("T", b"%d" % i)) for i in range(5))), 15)
        assert len(results) == 5
        assert p._batch_async is not None and p._batch_async.held_bytes == 0
        assert not stuck.done()
        assert len(requests(cluster)) >= before + 1 + 5  # never gathered behind the stuck one
        stuck.cancel()


async def test_shutdown_sends_and_answers_what_was_gathered(cluster: FakeCluster) -> None:
    p = Producer("PG_DRAIN", namesrv_addr=cluster.namesrv_addr, batch_max_delay_ms=30_000)
    await p.start()
    await p.send(Message("T", b"route"))
    futs = [p.send_async(Message("T", b"%d" % i)) for i in range(50)]
    await p.shutdown()  # without the drain, the gathered ones would wait 30 s and then fail
    assert all(f.done() and f.exception() is None for f in futs)
    assert len({f.result().msg_id for f in futs}) == 50


async def test_a_lone_send_is_written_before_the_loop_turn_ends(
        cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketq.remoting.channel import Channel

    async with Producer("PG_LONE", namesrv_addr=cluster.namesrv_addr) as p:
        # connected to every broker first: a send to a broker not connected yet goes after its connect
        async with asyncio.timeout(15):
            while len(p.channels) < len(cluster.brokers):
                await p.send(Message("T", b"route"))
        written: list[int] = []
        write_out = Channel._write_out

        def spy(channel: Channel) -> None:
            written.append(len(channel._out))
            write_out(channel)

        monkeypatch.setattr(Channel, "_write_out", spy)
        fut = p.send_async(Message("T", b"now"))
        assert [n for n in written if n] != []  # the request reached the socket within the call
        await fut
