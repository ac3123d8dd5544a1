"""The admin client's transport and lookups: name servers, routes, cluster membership.

Every admin operation is one or a few requests to a name server or a broker; this base sends them
(through the client's ``MQClientAPI``, which fails over between name servers), turns an error
answer into the ``rocketq.errors`` class of its code, and resolves the ``-c cluster`` / ``-b broker``
targets that most mqadmin commands take.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from rocketq.acl.signature import SessionCredentials
from rocketq.client.api import MQClientAPI, broker_error
from rocketq.client.config import ClientConfig
from rocketq.client.security import configure_transport
from rocketq.codec.bodies import BrokerData, ClusterInfo, TopicRouteData
from rocketq.codec.codes import V5_0_0, RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import BrokerNotFound, InvalidArgument, NoNameServer, ProtocolError, TopicNotExist
from rocketq.remoting import RemotingClient

__all__ = ["DEFAULT_TIMEOUT", "MASTER_ID", "AdminBase", "resolve_namesrv_addr"]

log = logging.getLogger("rocketq.admin")

DEFAULT_TIMEOUT = 5.0
MASTER_ID = 0


def jbool(value: bool) -> str:
    """A boolean extField as Java writes it."""
    return "true" if value else "false"


def resolve_namesrv_addr(addr: str | Sequence[str] | None) -> list[str]:
    """Name servers from the argument, else env NAMESRV_ADDR (``"a:9876;b:9876"``, as mqadmin)."""
    if addr is None:
        addr = os.environ.get("NAMESRV_ADDR") or ""
    parts = addr.split(";") if isinstance(addr, str) else list(addr)
    addrs = [a.strip() for a in parts if a and a.strip()]
    if not addrs:
        raise NoNameServer("no name server address: pass -n host:port or set NAMESRV_ADDR")
    for a in addrs:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise InvalidArgument(f"bad name server address {a!r}: expected host:port")
    return addrs


class AdminBase:
    """Connections and lookups shared by every group of admin operations."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        instance_name: str | None = None,
        credentials: SessionCredentials | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
        tls_verify: bool = True,
    ) -> None:
        self.namesrv_addrs = resolve_namesrv_addr(namesrv_addr)
        # ACL and TLS: what a Producer's ClientConfig would say (client/security.py applies both).
        self._security = ClientConfig(credentials=credentials, tls=tls, tls_ca_file=tls_ca_file,
                                      tls_verify=tls_verify)
        self.timeout = timeout
        self.instance_name = instance_name or f"admin-{os.getpid()}-{id(self):x}"
        self._remoting: RemotingClient | None = None
        self._api: MQClientAPI | None = None

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connections are made lazily; start only builds the transport on the running loop."""
        if self._remoting is not None:
            return
        self._remoting = RemotingClient(connect_timeout=min(self.timeout, 3.0), idle_timeout=None)
        config = ClientConfig(
            namesrv_addr=";".join(self.namesrv_addrs),
            instance_name=self.instance_name,
            mq_client_api_timeout=int(self.timeout * 1000),
        )
        configure_transport(self._remoting, self._security)
        self._api = MQClientAPI(self._remoting, config)
        self._api.update_name_server_address_list(self.namesrv_addrs)

    async def shutdown(self) -> None:
        remoting, self._remoting, self._api = self._remoting, None, None
        if remoting is not None:
            await remoting.close()

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def security(self) -> ClientConfig:
        """The credentials and TLS settings the connections use (for another connection alike)."""
        return self._security

    @property
    def api(self) -> MQClientAPI:
        if self._api is None:
            raise RuntimeError("the admin client is not started: call start() or use 'async with'")
        return self._api

    # -- requests ---------------------------------------------------------------------------------------

    async def _namesrv(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """One request to the name servers (the next one when the current cannot be reached)."""
        response = await self.api.invoke_namesrv(RemotingCommand.request(code, ext, body), self.timeout)
        if response.code not in ok:
            raise broker_error(response)
        return response

    async def _each_namesrv(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> dict[str, RemotingCommand]:
        """The same request to every name server (they share nothing, so changes go to each)."""
        out = {}
        for addr in self.namesrv_addrs:
            out[addr] = await self._call(addr, code, ext, body)
        return out

    async def _call(
        self,
        addr: str,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
        timeout: float | None = None,
    ) -> RemotingCommand:
        remoting = self._remoting
        if remoting is None:
            raise RuntimeError("the admin client is not started: call start() or use 'async with'")
        request = RemotingCommand.request(code, ext, body)
        response = await remoting.invoke(addr, request, self.timeout if timeout is None else timeout)
        self.api.broker_versions[addr] = response.version
        if response.code not in ok:
            raise broker_error(response, addr)
        return response

    # -- cluster and routes -----------------------------------------------------------------------------

    def knows_5x(self, addr: str) -> bool:
        """Whether ``addr`` has announced RocketMQ 5.0 or later: only then may it get 5.x's codes."""
        return self.api.broker_versions.get(addr, 0) >= V5_0_0

    async def examine_broker_cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: clusters, their broker names and each broker's addresses."""
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.from_json(response.body_bytes() or b"{}")

    async def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; ``TopicNotExist`` when no broker carries the topic."""
        return await self.api.get_topic_route_info_from_name_server(topic, self.timeout)

    async def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """broker name -> master address, of one cluster (``InvalidArgument`` if unknown) or all."""
        info = await self.examine_broker_cluster_info()
        if cluster is not None:
            names = info.cluster_addr_table.get(cluster)
            if names is None:
                known = ", ".join(sorted(info.cluster_addr_table)) or "none"
                raise InvalidArgument(f"cluster [{cluster}] not found (known clusters: {known})")
        else:
            names = tuple(info.broker_addr_table)
        out = {}
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            addr = data.master_addr if data is not None else None
            if addr:
                out[name] = addr
        return out

    async def find_broker_addr(self, broker_name: str) -> str:
        """The master address of a broker name (``BrokerNotFound`` if the name servers have none)."""
        info = await self.examine_broker_cluster_info()
        data = info.broker_addr_table.get(broker_name)
        addr = data.master_addr if data is not None else None
        if not addr:
            raise BrokerNotFound(f"broker [{broker_name}] not found in the name server")
        return addr

    async def targets(self, cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """What mqadmin's ``-b addr`` / ``-c cluster`` name: that broker, or the cluster's masters."""
        if broker_addr:
            return [broker_addr]
        if cluster:
            addrs = list((await self.master_addrs(cluster)).values())
            if not addrs:
                raise BrokerNotFound(f"cluster [{cluster}] has no master broker")
            return addrs
        raise InvalidArgument("name a broker (-b host:port) or a cluster (-c name)")

    async def topic_brokers(self, topic: str) -> list[BrokerData]:
        """The brokers of a topic's route that have a master (what topic-wide admin calls visit)."""
        route = await self.examine_topic_route_info(topic)
        brokers = [b for b in route.broker_datas if b.master_addr]
        if not brokers:
            raise TopicNotExist("no master broker in the topic's route", topic=topic)
        return sorted(brokers, key=lambda b: b.broker_name)

    @staticmethod
    def _json(response: RemotingCommand, what: str) -> bytes:
        data = response.body_bytes()
        if not data:
            raise ProtocolError(f"{what}: the answer has no body")
        return data
