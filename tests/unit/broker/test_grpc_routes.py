"""The other brokers' queues of a gRPC route (broker/grpc/routes.py): from the name server's route
and each master's GET_BROKER_RUNTIME_INFO `grpcAddress`, cached, one fetch per key in flight."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rocketq.broker.grpc.routes import ClusterRoutes, RemoteQueues
from rocketq.codec.bodies import BrokerData, KVTable, QueueData, TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand

ROUTE = TopicRouteData(
    queue_datas=(QueueData("me", 4, 4, 6), QueueData("b", 2, 2, 6), QueueData("java", 4, 4, 6)),
    broker_datas=(BrokerData("c", "me", {0: "10.0.0.1:10911"}), BrokerData("c", "b", {0: "10.0.0.2:10911"}),
                  BrokerData("c", "java", {0: "10.0.0.3:10911"})))
GRPC = {"10.0.0.2:10911": "10.0.0.2:8082", "10.0.0.3:10911": ""}  # the Java broker tells none


class Remoting:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        self.asked.append(addr)
        await asyncio.sleep(0.01)  # callers meet while the fetch is in flight
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return RemotingCommand(ResponseCode.SUCCESS, body=ROUTE.to_json())
        table = {"grpcAddress": GRPC[addr]} if GRPC[addr] else {}
        return RemotingCommand(ResponseCode.SUCCESS, body=KVTable(table).to_json())


def _routes() -> tuple[ClusterRoutes, Remoting]:
    remoting = Remoting()
    ctl: Any = SimpleNamespace(broker_name="me", outer_api=SimpleNamespace(client=remoting),
                               broker_config=SimpleNamespace(namesrv_addr_list=("ns:9876",)))
    return ClusterRoutes(ctl), remoting


async def test_other_brokers_with_their_grpc_address_once_fetched() -> None:
    routes, remoting = _routes()
    first, second = await asyncio.gather(routes.others("T"), routes.others("T"))
    assert first == second == [RemoteQueues("b", "10.0.0.2", 8082, 2, 2, 6)]  # not me, not the Java broker
    assert sorted(remoting.asked) == ["10.0.0.2:10911", "10.0.0.3:10911", "ns:9876"]  # once each
    assert await routes.others("T") == first and len(remoting.asked) == 3  # cached
