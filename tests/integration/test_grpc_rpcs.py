"""The broker's apache.rocketmq.v2 RPCs that the official Python client does not call, through raw
stubs compiled from our .proto files (docs/grpc.md): status codes, namespaces from x-mq-namespace,
the pull-style RPCs, ForwardMessageToDeadLetterQueue, RecallMessage, and gRPC clients in admin's
connection lists. Against a real `rocketq up`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from tests.harness import (
    SMALL_STORE,
    AdminRun,
    Cluster,
    eventually,
    grpc_address,
    module_cluster,
    unique_name,
)

from rocketq.broker.grpc.protocol import load

pytestmark = [pytest.mark.timeout(120)]

CLUSTER = "DefaultCluster"
d, s, stubs = load()

cluster = module_cluster("grpc-rpcs", *SMALL_STORE, "--set", "recallMessageEnable=true")


@pytest.fixture(scope="module")
def stub(cluster: Cluster) -> Iterator[Any]:
    with grpc.insecure_channel(grpc_address(cluster)) as channel:
        yield stubs.MessagingServiceStub(channel)


def md(client: str, namespace: str = "") -> tuple[tuple[str, str], ...]:
    pairs = [("x-mq-client-id", client)]
    if namespace:
        pairs.append(("x-mq-namespace", namespace))
    return tuple(pairs)


def _topic(admin: AdminRun, name: str, queues: int = 1) -> str:
    admin.json("updateTopic", "-t", name, "-c", CLUSTER, "-r", str(queues), "-w", str(queues))
    return name


def _send(stub: Any, topic: str, bodies: list[bytes], meta: Any) -> Any:
    msgs = []
    for i, body in enumerate(bodies):
        m = d.Message(topic=d.Resource(name=topic), body=body)
        m.system_properties.message_id = f"0102FC000000016{i:019X}"
        m.system_properties.message_type = d.NORMAL
        m.system_properties.tag = "T"
        m.system_properties.born_timestamp.GetCurrentTime()
        msgs.append(m)
    resp = stub.SendMessage(s.SendMessageRequest(messages=msgs), metadata=meta)
    assert resp.status.code == d.OK, resp
    return resp


def _mq(topic: str, qid: int = 0) -> Any:
    return d.MessageQueue(topic=d.Resource(name=topic), id=qid)


def test_status_codes(stub: Any) -> None:
    meta = md(unique_name("c"))
    route = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=unique_name("Nope"))), metadata=meta)
    assert route.status.code == d.TOPIC_NOT_FOUND
    bad = s.AckMessageEntry(message_id="m", receipt_handle="bad")
    ack = stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="g"), topic=d.Resource(name="t"),
                                              entries=[bad]), metadata=meta)
    assert ack.status.code == d.INVALID_RECEIPT_HANDLE
    assert ack.entries[0].status.code == d.INVALID_RECEIPT_HANDLE
    recall = stub.RecallMessage(s.RecallMessageRequest(topic=d.Resource(name="t"), recall_handle="x"),
                                metadata=meta)
    assert recall.status.code == d.TOPIC_NOT_FOUND


def test_pull_offsets_and_query_offset(stub: Any, admin: AdminRun) -> None:
    topic = _topic(admin, unique_name("GPull"))
    meta = md(unique_name("c"))
    sent = _send(stub, topic, [b"p0", b"p1", b"p2"], meta)
    assert [e.offset for e in sent.entries] == [0, 1, 2]
    begin = stub.QueryOffset(s.QueryOffsetRequest(message_queue=_mq(topic), query_offset_policy=d.BEGINNING),
                             metadata=meta)
    end = stub.QueryOffset(s.QueryOffsetRequest(message_queue=_mq(topic), query_offset_policy=d.END),
                           metadata=meta)
    assert (begin.offset, end.offset) == (0, 3)
    pulled = list(stub.PullMessage(s.PullMessageRequest(group=d.Resource(name="pg"), message_queue=_mq(topic),
                                                        offset=1, batch_size=10), metadata=meta))
    assert pulled[0].status.code == d.OK
    assert [r.message.body for r in pulled if r.WhichOneof("content") == "message"] == [b"p1", b"p2"]
    assert pulled[-1].next_offset == 3
    group = unique_name("pg")
    missing = stub.GetOffset(s.GetOffsetRequest(group=d.Resource(name=group), message_queue=_mq(topic)),
                             metadata=meta)
    assert missing.status.code == d.OFFSET_NOT_FOUND
    upd = stub.UpdateOffset(s.UpdateOffsetRequest(group=d.Resource(name=group), message_queue=_mq(topic),
                                                  offset=2), metadata=meta)
    assert upd.status.code == d.OK
    got = stub.GetOffset(s.GetOffsetRequest(group=d.Resource(name=group), message_queue=_mq(topic)),
                         metadata=meta)
    assert (got.status.code, got.offset) == (d.OK, 2)


def test_namespace_from_metadata(stub: Any, admin: AdminRun) -> None:
    name = unique_name("GNs")
    _topic(admin, f"ns1%{name}")
    meta = md(unique_name("c"), namespace="ns1")
    route = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=name)), metadata=meta)
    assert route.status.code == d.OK and len(route.message_queues) == 1
    _send(stub, name, [b"ns"], meta)
    # stored under RocketMQ 4's wrapped name, where a remoting client of namespace ns1 reads it
    end = stub.QueryOffset(s.QueryOffsetRequest(message_queue=_mq(f"ns1%{name}"), query_offset_policy=d.END),
                           metadata=md("plain"))
    assert end.offset == 1


def test_forward_to_dead_letter_queue(stub: Any, admin: AdminRun) -> None:
    topic = _topic(admin, unique_name("GDlq"))
    group = unique_name("dg")
    meta = md(unique_name("c"))
    _send(stub, topic, [b"poison"], meta)
    req = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=_mq(topic, -1), batch_size=1)
    req.invisible_duration.FromSeconds(30)
    req.long_polling_timeout.FromSeconds(5)
    got = [r.message for r in stub.ReceiveMessage(req, metadata=meta) if r.WhichOneof("content") == "message"]
    assert [m.body for m in got] == [b"poison"]
    fwd = stub.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(
        group=d.Resource(name=group), topic=d.Resource(name=topic),
        receipt_handle=got[0].system_properties.receipt_handle,
        message_id=got[0].system_properties.message_id, delivery_attempt=1, max_delivery_attempts=16),
        metadata=meta)
    assert fwd.status.code == d.OK, fwd

    def dlq() -> list[bytes]:
        pull = s.PullMessageRequest(group=d.Resource(name="x"), message_queue=_mq(f"%DLQ%{group}"),
                                    offset=0, batch_size=10)
        pulled = stub.PullMessage(pull, metadata=meta)
        return [r.message.body for r in pulled if r.WhichOneof("content") == "message"]

    assert eventually(dlq, timeout=20) == [b"poison"]


def test_grpc_consumer_in_admin_connections(stub: Any, admin: AdminRun) -> None:
    group = unique_name("cg")
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    client_id = unique_name("grpc-client")
    hb = stub.Heartbeat(s.HeartbeatRequest(group=d.Resource(name=group), client_type=d.SIMPLE_CONSUMER),
                        metadata=md(client_id))
    assert hb.status.code == d.OK
    conn = eventually(lambda: admin.json("consumerConnection", "-g", group), timeout=20)
    assert client_id in str(conn), conn
    stub.NotifyClientTermination(s.NotifyClientTerminationRequest(group=d.Resource(name=group)),
                                 metadata=md(client_id))
    assert client_id not in str(admin.raw("consumerConnection", "-g", group))


def test_timer_message_recalled_before_it_fires(stub: Any, admin: AdminRun) -> None:
    topic = _topic(admin, unique_name("GrpcTimer"))
    meta = md(unique_name("recaller"))
    m = d.Message(topic=d.Resource(name=topic), body=b"later")
    m.system_properties.message_id = "0102FC0000000160000000000000000AB"
    m.system_properties.message_type = d.DELAY
    m.system_properties.born_timestamp.GetCurrentTime()
    m.system_properties.delivery_timestamp.GetCurrentTime()
    m.system_properties.delivery_timestamp.seconds += 60
    sent = stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=meta)
    assert sent.status.code == d.OK, sent
    handle = sent.entries[0].recall_handle
    assert handle
    recalled = stub.RecallMessage(s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle=handle),
                                  metadata=meta)
    assert recalled.status.code == d.OK, recalled
    assert recalled.message_id == m.system_properties.message_id
    wrong = stub.RecallMessage(s.RecallMessageRequest(topic=d.Resource(name=topic), recall_handle="bad"),
                               metadata=meta)
    assert wrong.status.code != d.OK


def test_admin_change_log_level_and_lite_subscription_status(cluster: Cluster) -> None:
    from rocketq.broker.grpc.protocol import load_admin

    m, admin_stubs = load_admin()
    with grpc.insecure_channel(grpc_address(cluster)) as channel:
        admin_stub = admin_stubs.AdminStub(channel)
        try:
            got = admin_stub.ChangeLogLevel(m.ChangeLogLevelRequest(level=m.ChangeLogLevelRequest.DEBUG))
            assert got.remark == "log level changed to DEBUG"
            eventually(lambda: "log level changed to DEBUG by gRPC ChangeLogLevel" in cluster.proc.describe(),
                       timeout=10)
        finally:
            got = admin_stub.ChangeLogLevel(m.ChangeLogLevelRequest(level=m.ChangeLogLevelRequest.INFO))
        assert got.remark == "log level changed to INFO"
        lite = stubs.MessagingServiceStub(channel).SyncLiteSubscription(
            s.SyncLiteSubscriptionRequest(topic=d.Resource(name="parent")), metadata=md(unique_name("lite")))
    assert lite.status.code == d.NOT_IMPLEMENTED and "lite topics" in lite.status.message


def test_grpc_clients_on_the_dashboard(stub: Any, admin: AdminRun, cluster: Cluster) -> None:
    """The dashboard's producer and group pages list a gRPC producer (Telemetry publishing settings)
    and a gRPC consumer (Heartbeat naming its group) among the connections."""
    from rocketq.admin import AdminClient
    from rocketq.dashboard.pages import group_page
    from rocketq.dashboard.producers import producer_page

    topic = _topic(admin, unique_name("GrpcDash"))
    group = unique_name("dash-g")
    admin.json("updateSubGroup", "-g", group, "-c", CLUSTER)
    client_id = unique_name("dash-client")
    leave = threading.Event()

    def commands() -> Iterator[Any]:
        yield s.TelemetryCommand(settings=d.Settings(
            client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=topic)])))
        leave.wait(60)  # the stream stays open, as a live client's does

    replies = stub.Telemetry(commands(), metadata=md(client_id))
    try:
        assert next(replies).status.code == d.OK
        hb = stub.Heartbeat(s.HeartbeatRequest(group=d.Resource(name=group), client_type=d.SIMPLE_CONSUMER),
                            metadata=md(client_id))
        assert hb.status.code == d.OK

        async def pages() -> tuple[str, str]:
            async with AdminClient(cluster.namesrv) as a:
                return await producer_page(a, f"GRPC_PRODUCER_{topic}"), await group_page(a, group)

        producers, consumers = asyncio.run(pages())
        assert client_id in producers and client_id in consumers
    finally:
        leave.set()
        replies.cancel()
