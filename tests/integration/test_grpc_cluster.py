"""Two brokers of one cluster, each serving gRPC itself (docs/grpc.md, "Several brokers"): a route
asked of either lists both broker groups' queues, each with ITS broker's gRPC endpoint, so the
official Python client sends to both brokers and a SimpleConsumer receives (and acks) at both."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from tests.harness import SMALL_STORE, AdminRun, Server, eventually, namesrv_and_brokers, unique_name
from tests.integration.test_grpc_python5 import py5

from rocketq.broker.grpc.protocol import load

pytestmark = [pytest.mark.timeout(180)]

CLUSTER = "GrpcTwoBrokers"
d, s, stubs = load()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    tmp: Path = tmp_path_factory.mktemp("grpc-cluster")
    with namesrv_and_brokers(tmp, ("grpc-a", "grpc-b"), "--set", f"brokerClusterName={CLUSTER}",
                             *SMALL_STORE) as started:
        yield started


@pytest.fixture
def admin(servers: list[Server], capsys: pytest.CaptureFixture[str]) -> AdminRun:
    return AdminRun(capsys, servers[0].addr)


def grpc_of(server: Server) -> str:
    match = re.search(r"^READY broker=\S+ grpc=(\S+)", server.proc.stdout(), re.MULTILINE)
    assert match, server.proc.describe()
    return match[1]


def _topic(admin: AdminRun, prefix: str) -> str:
    topic = unique_name(prefix)
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "2", "-w", "2")
    # the brokers register the topic with the name server on their own: wait for both in its route
    eventually(lambda: len(admin.json("topicRoute", "-t", topic)["brokerDatas"]) == 2 or None, timeout=30)
    return topic


def _endpoint(q: Any) -> str:
    a = q.broker.endpoints.addresses[0]
    return f"{a.host}:{a.port}"


def test_route_and_assignments_name_each_brokers_endpoint(servers: list[Server], admin: AdminRun) -> None:
    _, a, b = servers
    topic = _topic(admin, "GrpcRoute")
    expected = {"grpc-a": grpc_of(a), "grpc-b": grpc_of(b)}
    for server in (a, b):  # either broker answers for the whole cluster
        with grpc.insecure_channel(grpc_of(server)) as channel:
            stub = stubs.MessagingServiceStub(channel)
            meta = (("x-mq-client-id", unique_name("route")),)
            route = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=meta)
            assert route.status.code == d.OK, route
            seen = {(q.broker.name, q.id): _endpoint(q) for q in route.message_queues}
            assert seen == {(n, i): ep for n, ep in expected.items() for i in (0, 1)}
            got = stub.QueryAssignment(s.QueryAssignmentRequest(
                topic=d.Resource(name=topic), group=d.Resource(name="G")), metadata=meta)
            assert got.status.code == d.OK, got
            assigned = {x.message_queue.broker.name: _endpoint(x.message_queue) for x in got.assignments}
            assert assigned == expected


def test_official_client_sends_to_and_receives_from_both_brokers(servers: list[Server],
                                                                  admin: AdminRun) -> None:
    _, a, _ = servers
    topic = _topic(admin, "GrpcBoth")
    rc, out, err = py5("produce", grpc_of(a), topic, "--count", "12", "--prefix", "c")
    assert rc == 0, err
    stats = admin.json("topicStatus", "-t", topic)
    per_broker: dict[str, int] = {}
    for row in stats:
        per_broker[row["brokerName"]] = per_broker.get(row["brokerName"], 0) + int(row["maxOffset"])
    assert per_broker.get("grpc-a", 0) > 0 and per_broker.get("grpc-b", 0) > 0, stats
    rc, out, err = py5("consume", grpc_of(a), topic, unique_name("G2b"), "--count", "12", "--timeout", "90")
    assert rc == 0, err
    got = sorted(m["body"] for line in out if "received_all" in line for m in line["received_all"])
    assert got == sorted(f"c-{i}" for i in range(12))
