"""Message trace against a real `rocketq up`: a traced send and its consumption leave Pub, SubBefore
and SubAfter records in RMQ_SYS_TRACE_TOPIC (created on first use from TBW102, as RocketMQ does
without traceTopicEnable), found by the message id through the index; a trace topic that cannot be
written costs the sends nothing."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.harness import (
    SMALL_STORE,
    AdminRun,
    Cluster,
    module_cluster,
    run_process,
    unique_name,
    wait_until,
)

import rocketq
from rocketq.admin import AdminClient
from rocketq.admin.trace import TraceView
from rocketq.aio import LitePullConsumer, Producer, PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message, MessageExt, SendStatus
from rocketq.client.trace import RMQ_SYS_TRACE_TOPIC, TraceType, decode_traces

pytestmark = [pytest.mark.timeout(120)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

cluster = module_cluster("trace", *SMALL_STORE, also_as_4_9=True)
FIRST = "CONSUME_FROM_FIRST_OFFSET"


async def _views(admin: AdminClient, msg_id: str, kinds: set[str],
                 topic: str | None = None) -> list[TraceView]:
    async def found() -> list[TraceView] | None:
        views = await admin.query_msg_trace_by_id(msg_id, topic)
        return views if kinds <= {v.msg_type for v in views} else None

    result: list[TraceView] = await wait_until(found, timeout=60, interval=0.3)
    return result


async def test_send_and_consume_leave_their_trace(cluster: Cluster) -> None:
    topic, group, pgroup = unique_name("TrT"), unique_name("TrC"), unique_name("TrP")
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], _ctx: Any) -> ConsumeStatus:
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    async with Producer(pgroup, namesrv_addr=cluster.namesrv, enable_trace=True) as p:
        sent = await p.send(Message(topic, b"traced", tags="TagA", keys=["k1", "k2"]))
        assert sent.status is SendStatus.SEND_OK
        consumer = PushConsumer(group, namesrv_addr=cluster.namesrv, enable_trace=True,
                                instance_name=unique_name("i"), consume_from_where=FIRST)
        consumer.subscribe(topic, "*")
        consumer.register_listener(listener)
        await consumer.start()
        try:
            await wait_until(lambda: got, timeout=60)
            async with AdminClient(cluster.namesrv) as admin:
                views = await _views(admin, sent.msg_id, {"Pub", "SubBefore", "SubAfter"})
                pub = next(v for v in views if v.msg_type == "Pub")
                assert (pub.group_name, pub.topic, pub.tags, pub.keys, pub.status) == (
                    pgroup, topic, "TagA", "k1 k2", "success")
                assert pub.store_host == cluster.broker
                assert pub.offset_msg_id == sent.offset_msg_id
                assert 0 <= pub.cost_time < 60_000
                before = next(v for v in views if v.msg_type == "SubBefore")
                after = next(v for v in views if v.msg_type == "SubAfter")
                assert before.group_name == group == after.group_name
                assert before.request_id == after.request_id and before.retry_times == 0
                assert after.status == "success" and 0 <= after.cost_time < 60_000
                # the trace message is indexed under the traced id and the traced keys
                [trace_msg, *_] = await admin.query_message(RMQ_SYS_TRACE_TOPIC, sent.msg_id)
                assert {sent.msg_id, "k1", "k2"} <= set((trace_msg.keys or "").split(" "))
                assert any(c.trace_type is TraceType.Pub for c in decode_traces(trace_msg.body.decode()))
                route = await admin.examine_topic_route_info(RMQ_SYS_TRACE_TOPIC)
                assert route.queue_datas  # created on first use
        finally:
            await consumer.shutdown()


async def test_custom_trace_topic_sync_api_and_the_cli(cluster: Cluster,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    topic, trace_topic = unique_name("TrS"), unique_name("MyTrace")
    with rocketq.Producer(unique_name("TrP"), namesrv_addr=cluster.namesrv, enable_trace=True,
                          trace_topic=trace_topic) as p:
        sent = p.send(Message(topic, b"x", tags="t"))
    # the producer's shutdown flushed the trace
    async with AdminClient(cluster.namesrv) as admin:
        await _views(admin, sent.msg_id, {"Pub"}, trace_topic)
        assert await admin.query_msg_trace_by_id(sent.msg_id) == []  # not in the default topic
    run = AdminRun(capsys, cluster.namesrv)
    code, out, err = await asyncio.to_thread(run.raw, "queryMsgTraceById", "-i", sent.msg_id,
                                             "-t", trace_topic)
    assert code == 0, err
    lines = out.splitlines()
    header = ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert lines[0].split() == header
    assert lines[1].startswith("Pub ") and lines[1].split()[-1] == "success"


async def test_lite_pull_consumption_is_traced(cluster: Cluster) -> None:
    topic, group = unique_name("TrL"), unique_name("TrLG")
    async with Producer(unique_name("TrP"), namesrv_addr=cluster.namesrv) as p:
        sent = await p.send(Message(topic, b"lite", keys="lk"))
    consumer = LitePullConsumer(group, namesrv_addr=cluster.namesrv, enable_trace=True,
                                instance_name=unique_name("i"), consume_from_where=FIRST)
    consumer.subscribe(topic, "*")
    await consumer.start()
    try:
        got: list[MessageExt] = []

        async def some() -> bool:
            got.extend(await consumer.poll(0.5))
            return bool(got)

        await wait_until(some, timeout=60)
        async with AdminClient(cluster.namesrv) as admin:
            views = await _views(admin, sent.msg_id, {"SubBefore", "SubAfter"})
        assert {v.group_name for v in views} == {group}
        assert not any(v.msg_type == "Pub" for v in views)  # that producer was not traced
    finally:
        await consumer.shutdown()


async def test_trace_topic_outage_costs_the_sends_nothing(cluster: Cluster,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    topic, dead = unique_name("TrO"), unique_name("DeadTrace")
    async with AdminClient(cluster.namesrv) as admin:
        await admin.create_topic(dead, cluster="DefaultCluster", read_queue_nums=1, write_queue_nums=1,
                                 perm=4)  # readable only: every trace send fails
    caplog.set_level(logging.WARNING, logger="rocketq.client.trace")
    async with Producer(unique_name("TrP"), namesrv_addr=cluster.namesrv, enable_trace=True,
                        trace_topic=dead) as p:
        assert p.trace is not None
        results = await asyncio.gather(*(p.send(Message(topic, b"%d" % i)) for i in range(300)))
        assert all(r.status is SendStatus.SEND_OK for r in results)
        dispatcher = p.trace.dispatcher
        await wait_until(lambda: dispatcher.discarded >= 300, timeout=60)
        assert dispatcher.sent_messages == 0
        more = await asyncio.gather(*(p.send(Message(topic, b"again")) for _ in range(50)))
        assert all(r.status is SendStatus.SEND_OK for r in more)
    dropped = [r for r in caplog.records if "trace records dropped" in r.getMessage()]
    assert 1 <= len(dropped) <= 3  # rate-limited: one line per interval, not one per record


def test_the_example_runs(cluster: Cluster) -> None:
    run = run_process([sys.executable, str(EXAMPLES / "trace.py"), "--namesrv", cluster.namesrv,
                       "--topic", unique_name("TrEx"), "--group", unique_name("TrExG")], timeout=100)
    assert run.returncode == 0, run.describe()
    assert "SubAfter" in run.stdout and "Pub" in run.stdout


async def test_traces_of_a_namespaced_client_name_plain_topics(cluster: Cluster) -> None:
    topic, pgroup = unique_name("TrN"), unique_name("TrNP")
    async with Producer(pgroup, namesrv_addr=cluster.namesrv, namespace="nst", enable_trace=True) as p:
        sent = await p.send(Message(topic, b"ns"))
    async with AdminClient(cluster.namesrv) as admin:
        [pub] = await _views(admin, sent.msg_id, {"Pub"})  # in the shared, unwrapped trace topic
        assert (pub.topic, pub.group_name) == (topic, pgroup)
        assert f"nst%{topic}" in await admin.fetch_all_topic_list()


async def test_a_compressed_batch_of_traces_is_found(cluster: Cluster) -> None:
    # 200 sends in one go: their Pub records travel in one trace message over 4 KB, which the trace
    # producer compresses like any other body.
    topic = unique_name("TrZ")
    async with Producer(unique_name("TrZP"), namesrv_addr=cluster.namesrv, enable_trace=True) as p:
        results = await asyncio.gather(*(p.send(Message(topic, b"z", keys=f"key-{i}")) for i in range(200)))
    async with AdminClient(cluster.namesrv) as admin:
        for r in (results[0], results[-1]):
            [pub] = await _views(admin, r.msg_id, {"Pub"})
            assert pub.topic == topic
        [trace_msg, *_] = await admin.query_message(RMQ_SYS_TRACE_TOPIC, results[0].msg_id)
        assert trace_msg.sys_flag & 0x1 and len(trace_msg.body) > 4096  # stored compressed, read inflated
