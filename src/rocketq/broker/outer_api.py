"""BrokerOuterAPI: the broker's calls to the name servers (REGISTER_BROKER / UNREGISTER_BROKER).

A broker registers with every name server at once; the name servers do not talk to each other,
so one that is down only delays the broker's route on that name server.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketq.codec.bodies import KVTable, RegisterBrokerBody, TopicConfigSerializeWrapper
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rocketq.errors import ProtocolError, RocketQError
from rocketq.remoting import RemotingClient
from rocketq.remoting.tls import client_context

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.outer")

UNREGISTER_TIMEOUT = 3.0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """What one name server answered to REGISTER_BROKER."""

    namesrv_addr: str
    ha_server_addr: str | None
    master_addr: str | None
    order_topics: dict[str, str]


class BrokerOuterAPI:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self._client: RemotingClient | None = None

    @property
    def client(self) -> RemotingClient:
        if self._client is None:
            self._client = RemotingClient(connect_timeout=3.0)
            server = self._ctl.server_config
            if server.tls_enable:  # tls.enable: the name servers are reached over TLS
                self._client.ssl_context = client_context(
                    ca_file=server.tls_client_trust_cert_path or None, verify=server.tls_client_auth_server)
            acl = getattr(self._ctl, "acl", None)
            if acl is not None:  # an ACL name server takes registrations signed by an admin
                self._client.request_hook = acl.outgoing_hook(self._ctl.broker_config.inner_access_key)
        return self._client

    async def shutdown(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _ha_server_addr(self) -> str:
        # The master's live HA port (a free one when listenPort is 0): slaves connect to what we say.
        ctl = self._ctl
        if ctl.replication is not None:
            return ctl.replication.ha_server_addr()
        return f"{ctl.broker_config.broker_ip1}:{ctl.listen_port + 1}"

    async def register_broker_all(self, wrapper: TopicConfigSerializeWrapper,
                                  timeout: float | None = None) -> list[RegisterBrokerResult]:
        """REGISTER_BROKER to every name server concurrently; failures are logged, not raised."""
        ctl = self._ctl
        bc = ctl.broker_config
        addrs = bc.namesrv_addr_list
        if not addrs:
            return []
        compressed = bc.compressed_register
        body = RegisterBrokerBody(wrapper, ()).encode(compress=compressed)
        ext = RegisterBrokerRequestHeader(
            broker_name=bc.broker_name, broker_addr=ctl.address, cluster_name=bc.broker_cluster_name,
            ha_server_addr=self._ha_server_addr(), broker_id=bc.broker_id, compressed=compressed,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        ).to_ext()
        if timeout is None:
            timeout = bc.register_broker_timeout_mills / 1000
        outcomes = await asyncio.gather(
            *(self._register_one(addr, ext, body, timeout) for addr in addrs), return_exceptions=True)
        results = []
        for addr, outcome in zip(addrs, outcomes, strict=True):
            if isinstance(outcome, RegisterBrokerResult):
                results.append(outcome)
            elif isinstance(outcome, BaseException):
                log.warning("register broker to name server %s failed: %s", addr, outcome)
        return results

    async def _register_one(self, addr: str, ext: dict[str, str], body: bytes,
                            timeout: float) -> RegisterBrokerResult:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(ext), body)
        response = await self.client.invoke(addr, request, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise RocketQError(f"code {response.code}: {response.remark}", code=response.code)
        header = RegisterBrokerResponseHeader.from_ext(response.ext_fields)
        order_topics: dict[str, str] = {}
        raw = response.body_bytes()
        if raw:
            try:
                order_topics = dict(KVTable.from_json(raw).table)
            except ProtocolError as exc:
                log.warning("name server %s answered a bad KVTable: %s", addr, exc)
        log.info("register broker[%s]to name server %s OK", self._ctl.broker_config.broker_id, addr)
        return RegisterBrokerResult(addr, header.ha_server_addr, header.master_addr, order_topics)

    async def unregister_broker_all(self) -> None:
        ctl = self._ctl
        bc = ctl.broker_config
        ext = UnRegisterBrokerRequestHeader(
            broker_name=bc.broker_name, broker_addr=ctl.address, cluster_name=bc.broker_cluster_name,
            broker_id=bc.broker_id,
        ).to_ext()

        async def one(addr: str) -> None:
            try:
                request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(ext))
                response = await self.client.invoke(addr, request, UNREGISTER_TIMEOUT)
                if response.code == ResponseCode.SUCCESS:
                    log.info("unregisterBroker OK, NamesrvAddr: %s", addr)
                else:
                    log.warning("unregisterBroker failed, NamesrvAddr: %s: %s", addr, response.remark)
            except RocketQError as exc:
                log.warning("unregisterBroker Exception, %s: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in bc.namesrv_addr_list))
