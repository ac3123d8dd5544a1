"""The Prometheus endpoints of a real `rocketq up` (metricsPort=0), scraped after known traffic."""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.harness import ManagedProcess, rocketq_command, start_process, unique_name, wait_until

pytestmark = [pytest.mark.timeout(90)]

READY = re.compile(
    r"^READY namesrv=(?P<namesrv>\S+) broker=(?P<broker>\S+) namesrvMetrics=(?P<ns_metrics>\S+) "
    r"metrics=(?P<metrics>\S+)(?: grpc=\S+)?$", re.MULTILINE)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class MetricsCluster:
    def __init__(self, proc: ManagedProcess, match: re.Match[str]) -> None:
        self.proc = proc
        self.namesrv = match["namesrv"]
        self.broker = match["broker"]
        self.metrics = match["metrics"]
        self.ns_metrics = match["ns_metrics"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    tmp = tmp_path_factory.mktemp("metrics")
    args = [*rocketq_command(), "up", "--data-dir", str(tmp / "data"), "--namesrv-port", "0",
            "--broker-port", "0", "--set", "metricsPort=0", "--set", "namesrv.metricsPort=0",
            "--set", "flushDiskType=SYNC_FLUSH"]
    proc = start_process(args, name="rocketq-up-metrics", log_dir=tmp / "logs")
    try:
        match = proc.wait_for(READY, 30.0)
        yield MetricsCluster(proc, match)
    finally:
        assert proc.stop(20.0) == 0, proc.describe()


def scrape(addr: str, path: str = "/metrics") -> str:
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        return str(resp.read().decode())


def samples(addr: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(scrape(addr)):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def pick(data: Samples, name: str, **labels: str) -> list[float]:
    want = set(labels.items())
    return [v for (n, lab), v in data.items() if n == name and want <= lab]


def one(data: Samples, name: str, **labels: str) -> float:
    found = pick(data, name, **labels)
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0]


async def test_traffic_counters_lag_and_storage(cluster: MetricsCluster) -> None:
    from rocketq.aio import ConsumeStatus, Message, Producer, PushConsumer

    topic, group = unique_name("MetT"), unique_name("MetG")
    body = b"m" * 200
    before = samples(cluster.metrics)
    puts_before = one(before, "rocketmq_broker_put_messages_total")
    async with Producer(unique_name("MetP"), namesrv_addr=cluster.namesrv) as producer:
        for i in range(30):
            await producer.send(Message(topic, body, keys=f"k{i}"))

        data = samples(cluster.metrics)
        assert one(data, "rocketmq_messages_in_total", topic=topic) == 30
        bytes_in = one(data, "rocketmq_throughput_in_total", topic=topic)
        assert 30 * len(body) < bytes_in < 30 * (len(body) + 400)
        assert one(data, "rocketmq_broker_put_messages_total") - puts_before == 30
        # SYNC_FLUSH: every acknowledged send was flushed, and each flush was timed
        assert one(data, "rocketmq_storage_flush_latency_count") >= 1
        assert one(data, "rocketmq_storage_flush_behind_bytes") == 0
        assert one(data, "rocketmq_storage_commitlog_size_bytes") >= bytes_in
        assert one(data, "rocketmq_storage_size_bytes") > 0
        assert 0 < one(data, "rocketmq_storage_disk_used_ratio") <= 1
        assert one(data, "rocketmq_remoting_connections") >= 1
        assert one(data, "rocketmq_messages_in_total", topic=topic, cluster="DefaultCluster",
                   node_type="broker") == 30

        got: list[object] = []

        def listener(msgs: list[object], ctx: object) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(group, namesrv_addr=cluster.namesrv,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        await consumer.start()
        try:
            await wait_until(lambda: len(got) >= 30, timeout=15.0)
            assert one(samples(cluster.metrics), "rocketmq_consumer_connections", consumer_group=group) == 1
        finally:
            await consumer.shutdown()  # persists the consumed offsets to the broker

        data = samples(cluster.metrics)
        assert one(data, "rocketmq_messages_out_total", topic=topic, consumer_group=group) == 30
        assert one(data, "rocketmq_throughput_out_total", topic=topic, consumer_group=group) == bytes_in
        lags = pick(data, "rocketmq_consumer_lag_messages", topic=topic, consumer_group=group)
        assert lags and sum(lags) == 0

        for _ in range(10):
            await producer.send(Message(topic, body))
    data = samples(cluster.metrics)
    lags = pick(data, "rocketmq_consumer_lag_messages", topic=topic, consumer_group=group)
    assert sum(lags) == 10
    assert max(pick(data, "rocketmq_consumer_lag_latency", topic=topic, consumer_group=group)) >= 0
    assert one(data, "rocketmq_messages_in_total", topic=topic) == 40
    assert one(data, "rocketmq_messages_out_total", topic=topic, consumer_group=group) == 30


async def test_pending_timers_and_timer_lag(cluster: MetricsCluster) -> None:
    import time

    from rocketq.aio import Message, Producer

    topic = unique_name("MetTimer")
    async with Producer(unique_name("MetTimerP"), namesrv_addr=cluster.namesrv) as producer:
        at = int(time.time() * 1000) + 600_000
        for _ in range(3):
            await producer.send(Message(topic, b"later", delivery_timestamp=at))

    async def filed() -> bool:
        return one(samples(cluster.metrics), "rocketmq_timer_pending_messages") >= 3
    await wait_until(filed, timeout=30)
    data = samples(cluster.metrics)
    assert one(data, "rocketmq_timer_enqueue_lag") == 0
    assert one(data, "rocketmq_timer_dequeue_lag") == 0  # nothing is due for ten minutes
    assert 0 <= one(data, "rocketmq_timer_dequeue_latency") < 60_000


async def test_pop_inflight_and_revive_backlog(cluster: MetricsCluster) -> None:
    from tests.wire import create_topic, pop, popped, send_message

    from rocketq.remoting import RemotingClient

    topic, group = unique_name("MetPop"), unique_name("met_pop_g")
    async with RemotingClient() as client:
        await create_topic(client, cluster.broker, topic, read=1, write=1)
        for i in range(5):
            assert (await send_message(client, cluster.broker, topic, b"p%d" % i, queue_id=0)).code == 0
        response = await pop(client, cluster.broker, group, topic, max_nums=4, invisible_ms=60_000)
        assert len(popped(response, "")) == 4

    def four_out() -> bool:
        data = samples(cluster.metrics)
        return one(data, "rocketq_pop_inflight_messages", group=group, topic=topic) == 4

    await wait_until(four_out, timeout=20)
    # invisible for 60 s: nothing waits for the revive service yet
    assert one(samples(cluster.metrics), "rocketq_pop_revive_backlog", group=group, topic=topic) == 0


async def test_request_counts_by_code(cluster: MetricsCluster) -> None:
    from rocketq.aio import Message, Producer

    topic = unique_name("RpcT")
    before = sum(pick(samples(cluster.metrics), "rocketmq_rpc_latency_count", request_code="send_message_v2"))
    async with Producer(unique_name("RpcP"), namesrv_addr=cluster.namesrv) as producer:
        for _ in range(5):
            await producer.send(Message(topic, b"x"))
    data = samples(cluster.metrics)
    assert sum(pick(data, "rocketmq_rpc_latency_count", request_code="send_message_v2")) - before >= 5
    assert sum(pick(data, "rocketmq_rpc_responses_total", request_code="send_message_v2",
                    response_code="success")) >= 5
    ns = samples(cluster.ns_metrics)
    assert sum(pick(ns, "rocketmq_rpc_responses_total", request_code="get_routeinfo_by_topic")) >= 1


async def test_name_server_metrics(cluster: MetricsCluster) -> None:
    data = await asyncio.to_thread(samples, cluster.ns_metrics)
    assert one(data, "rocketmq_namesrv_live_brokers", cluster="DefaultCluster") == 1
    assert one(data, "rocketmq_namesrv_clusters") == 1
    assert one(data, "rocketmq_namesrv_topics") >= 1
    assert one(data, "rocketmq_remoting_connections") >= 1
    assert one(data, "rocketmq_namesrv_clusters", node_type="namesrv", node_id=cluster.namesrv) == 1


def test_unknown_path_is_404_and_process_metrics_are_there(cluster: MetricsCluster) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        scrape(cluster.metrics, "/nope")
    assert err.value.code == 404
    text = scrape(cluster.metrics)
    assert "process_resident_memory_bytes" in text
    assert "# TYPE rocketmq_messages_in_total counter" in text or "rocketmq_messages_in" not in text


def test_metrics_off_by_default(tmp_path: Path) -> None:
    from tests.harness import start_cluster

    c = start_cluster(tmp_path)
    try:
        line = next(ln for ln in c.proc.stdout().splitlines() if ln.startswith("READY"))
        assert "metrics=" not in line
    finally:
        assert c.stop(20.0) == 0
