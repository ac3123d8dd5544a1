"""The cluster's queues of a topic, each with the gRPC endpoint of the broker that serves it.

Apache's proxy in front of a cluster answers QueryRoute with every broker's queues (the name
server's route). rocketq has no proxy: each master serves gRPC itself, so a route lists every
broker group's queues with THAT broker's gRPC endpoint, and a client sends, receives and acks at
the broker that holds the queue. Apache's proxy inside a broker ("local" mode) assumes every broker
listens on its own gRPC port; rocketq brokers may not (port 0, the 8081 fallback, several brokers on
one host), so each broker tells its gRPC address in GET_BROKER_RUNTIME_INFO's KVTable under
``grpcAddress`` (a key Java tools ignore; the name server registration stays Java's). A broker
whose runtime info has no such key (a Java broker, a rocketq broker with gRPC off) is left out of
the route: a client could not reach a gRPC endpoint there.

Both look-ups are cached (a route for ROUTE_TTL, an address for ADDRESS_TTL), and one fetch per
key is in flight at a time, so 1,000 clients refreshing their routes cost the name server little.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from rocketq.codec.bodies import KVTable, TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import GetRouteInfoRequestHeader
from rocketq.errors import RocketQError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.grpc")

GRPC_ADDRESS_KEY = "grpcAddress"  # GET_BROKER_RUNTIME_INFO's key for a broker's gRPC host:port
ROUTE_TTL = 10.0  # seconds a name server route is reused: a new broker shows within this
ADDRESS_TTL = 60.0  # seconds a broker's gRPC address is reused (it changes only on restart)
MISS_TTL = 5.0  # seconds a broker without a gRPC address (or unreachable) is not asked again
FETCH_TIMEOUT = 3.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RemoteQueues:
    """One other broker group's queues of a topic and where its gRPC endpoint is."""

    broker_name: str
    host: str
    port: int
    read_queue_nums: int
    write_queue_nums: int
    perm: int


class _Cache(Generic[T]):
    """Values by key for a while (a miss, None, for MISS_TTL), one fetch per key in flight:
    concurrent callers share its result."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[float, T | None]] = {}
        self._inflight: dict[str, asyncio.Future[T | None]] = {}

    async def get(self, key: str, fetch: Callable[[], Awaitable[T | None]], ttl: float) -> T | None:
        cached = self._values.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[T | None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            value = await fetch()
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: a failure nobody else waited for is not logged as unhandled
            raise
        finally:
            del self._inflight[key]
        fut.set_result(value)
        self._values[key] = (time.monotonic() + (ttl if value is not None else MISS_TTL), value)
        return value


class ClusterRoutes:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self._routes: _Cache[TopicRouteData] = _Cache()
        self._addresses: _Cache[str] = _Cache()

    async def others(self, topic: str) -> list[RemoteQueues]:
        """The other broker groups' queues of `topic` (empty when the name server is not reachable:
        the broker's own queues are still served)."""
        route = await self._route(topic)
        if route is None:
            return []
        me = self._ctl.broker_name
        masters = {b.broker_name: b.master_addr for b in route.broker_datas}
        wanted = [(q, masters.get(q.broker_name)) for q in route.queue_datas if q.broker_name != me]
        addrs = await asyncio.gather(*(self._grpc_address(a) for _, a in wanted if a))
        found = iter(addrs)
        out: list[RemoteQueues] = []
        for q, master in wanted:
            grpc_addr = next(found) if master else None
            if not grpc_addr:
                continue
            host, _, port = grpc_addr.rpartition(":")
            out.append(RemoteQueues(q.broker_name, host, int(port), q.read_queue_nums, q.write_queue_nums,
                                    q.perm))
        return out

    async def _route(self, topic: str) -> TopicRouteData | None:
        return await self._routes.get(topic, lambda: self._fetch_route(topic), ROUTE_TTL)

    async def _grpc_address(self, broker_addr: str) -> str | None:
        return await self._addresses.get(broker_addr, lambda: self._fetch_address(broker_addr), ADDRESS_TTL)

    async def _fetch_route(self, topic: str) -> TopicRouteData | None:
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic, accept_standard_json_only=True).to_ext())
        for namesrv in self._ctl.broker_config.namesrv_addr_list:
            try:
                response = await self._ctl.outer_api.client.invoke(namesrv, request, FETCH_TIMEOUT)
            except RocketQError as exc:
                log.debug("route of %s from name server %s: %s", topic, namesrv, exc)
                continue
            if response.code == ResponseCode.SUCCESS:
                return TopicRouteData.from_json(response.body_bytes())
            return None  # TOPIC_NOT_EXIST: this broker's own queues are the route
        return None

    async def _fetch_address(self, broker_addr: str) -> str | None:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        try:
            response = await self._ctl.outer_api.client.invoke(broker_addr, request, FETCH_TIMEOUT)
        except RocketQError as exc:
            log.debug("runtime info of broker %s: %s", broker_addr, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            return None
        return KVTable.from_json(response.body_bytes()).table.get(GRPC_ADDRESS_KEY) or None
