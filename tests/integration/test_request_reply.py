"""Request-reply end to end: a replier in another process (examples/request_reply.py --serve, the
blocking API) answers requests made here with the blocking and the asyncio producer; requests
nobody answers time out and leave nothing behind."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.harness import SMALL_STORE, Cluster, ManagedProcess, module_cluster, start_process, unique_name
from tests.integration.test_producer_auto_batch import batch_sizes  # noqa: F401 (a fixture)

import rocketq
import rocketq.aio
from rocketq import Message, RequestTimeout
from rocketq.client.producer.request import REQUEST_FUTURES

pytestmark = [pytest.mark.timeout(120)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "request_reply.py"
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"

cluster = module_cluster("reqreply", *SMALL_STORE, also_as_4_9=True)


@pytest.fixture(scope="module")
def service(cluster: Cluster,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ManagedProcess]]:
    """(request topic, the replier process) for the module."""
    topic = unique_name("Req")
    proc = start_process(
        [sys.executable, str(EXAMPLE), "--serve", "--namesrv", cluster.namesrv, "--topic", topic,
         "--group", unique_name("replier"), "--seconds", "600"],
        name="replier", log_dir=tmp_path_factory.mktemp("replier"),
    )
    try:
        proc.wait_for(re.compile("REPLIER READY"), 60)
        yield topic, proc
    finally:
        proc.stop(5)


def _first_reply(producer: rocketq.Producer, topic: str) -> Any:
    """The first request waits for the replier's queue assignment: retry until it is answered."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return producer.request(Message(topic, b"hello"), timeout=3)
        except RequestTimeout:
            assert time.monotonic() < deadline, "the replier never answered"


async def _requests_together(cluster: Cluster, topic: str, bodies: list[bytes],
                             timeout: float) -> list[bytes]:
    """The reply bodies of requests made all at once with the asyncio producer (after a first
    one answered, as `_first_reply`)."""
    async with rocketq.aio.Producer(unique_name("areq"), namesrv_addr=cluster.namesrv) as p:
        deadline = time.monotonic() + 60
        while True:
            try:
                await p.request(Message(topic, b"warm"), timeout=3)
                break
            except RequestTimeout:
                assert time.monotonic() < deadline, "the replier never answered"
        replies = await asyncio.gather(*(p.request(Message(topic, b), timeout=timeout) for b in bodies))
        return [r.body for r in replies]


def test_sync_round_trip_with_a_replier_in_another_process(service: tuple[str, ManagedProcess],
                                                            cluster: Cluster) -> None:
    topic, replier = service
    with rocketq.Producer(unique_name("req"), namesrv_addr=cluster.namesrv) as p:
        assert _first_reply(p, topic).body == b"pong:hello"
        for i in range(20):
            reply = p.request(Message(topic, b"ping-%d" % i), timeout=10)
            assert reply.body == b"pong:ping-%d" % i
            assert reply.topic == REPLY_TOPIC
            assert reply.properties["MSG_TYPE"] == "reply"
            assert reply.properties["REPLY_TO_CLIENT"] == p.aio.instance.client_id
            assert "ARRIVE_TIME" in reply.properties and "PUSH_REPLY_TIME" in reply.properties
        # the callback form, Java's request(msg, RequestCallback, timeout)
        got: list[Any] = []
        fut = p.request_async(Message(topic, b"cb"), got.append, timeout=10)
        assert fut.result(15).body == b"pong:cb"
        assert [m.body for m in got] == [b"pong:cb"]
    assert replier.alive(), replier.describe()
    assert not REQUEST_FUTURES


def test_async_requests_in_flight_together(service: tuple[str, ManagedProcess], cluster: Cluster) -> None:
    topic, _ = service
    bodies = [b"%d" % i for i in range(50)]
    assert asyncio.run(_requests_together(cluster, topic, bodies, 10)) == [b"pong:" + b for b in bodies]
    assert not REQUEST_FUTURES


def test_batched_requests_get_their_replies(service: tuple[str, ManagedProcess], cluster: Cluster,
                                           batch_sizes: list[int]) -> None:  # noqa: F811 (the fixture)
    """Requests sent together leave in automatic batches; the broker puts CLUSTER on each batched
    message, which the replier needs for the reply topic, so every request is answered."""
    topic, _ = service
    bodies = [b"b%d" % i for i in range(200)]
    # Under the 10 s a consume retry takes: a request stored without CLUSTER fails the replier's
    # create_reply_message, and only its %RETRY% copy (stored singly) would be answered.
    assert asyncio.run(_requests_together(cluster, topic, bodies, 8)) == [b"pong:" + b for b in bodies]
    assert batch_sizes and max(batch_sizes) > 1, "no request was batched"
    assert not REQUEST_FUTURES


def test_unanswered_requests_time_out_and_leave_nothing(cluster: Cluster) -> None:
    topic = unique_name("NoReplier")  # nobody consumes it
    with rocketq.Producer(unique_name("lonely"), namesrv_addr=cluster.namesrv) as p:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            p.request(Message(topic, b"anyone?"), timeout=1.0)
        assert time.monotonic() - t0 >= 0.9
        assert info.value.code == 10006 and "wait reply message timeout" in str(info.value)
        assert not REQUEST_FUTURES
        errors: list[Any] = []
        futures = [p.request_async(Message(topic, b"%d" % i), errors.append, timeout=0.5) for i in range(30)]
        for f in futures:
            with pytest.raises(RequestTimeout):
                f.result(30)
        deadline = time.monotonic() + 10
        while len(errors) < 30:
            assert time.monotonic() < deadline, f"{len(errors)} callbacks of 30"
            time.sleep(0.02)
        assert all(isinstance(e, RequestTimeout) for e in errors)
        assert not REQUEST_FUTURES


def test_a_failed_send_fails_the_request_at_once(cluster: Cluster) -> None:
    with rocketq.Producer(unique_name("bad"), namesrv_addr=cluster.namesrv) as p:
        # Sends to this system topic are refused: the request ends with the send's error, not
        # with RequestTimeout from its timer.
        with pytest.raises(rocketq.RocketQError) as info:
            p.request(Message("SCHEDULE_TOPIC_XXXX", b"x"), timeout=60)
        assert not isinstance(info.value, RequestTimeout)
        assert not REQUEST_FUTURES
