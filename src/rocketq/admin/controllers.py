"""Controller administration (RocketMQ 5 controller mode, docs/ha.md): mqadmin 5.x's
getControllerMetaData, getSyncStateSet, electMaster, cleanBrokerMetadata, getControllerConfig and
updateControllerConfig, on the same request codes, headers and bodies as Java's MQClientAPIImpl,
so they work against Java controllers too.

A controller address may be a list (``"a:9878;b:9878"``): the first that answers says who leads,
and the requests only the leader serves go there, as Java's admin does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from rocketq.admin._base import AdminBase, jbool
from rocketq.admin.brokers import properties_dict, properties_text
from rocketq.codec.codes import RequestCode
from rocketq.errors import InvalidArgument, ProtocolError, RemotingError, ServerError

NOT_LEADER = 2007  # ResponseCode.CONTROLLER_NOT_LEADER

__all__ = ["ControllerAdmin", "ControllerMetaData", "ElectMasterResult", "GroupReplicas", "ReplicaIdentity"]


@dataclass(frozen=True, slots=True)
class ControllerMetaData:
    """GetMetaDataResponseHeader."""

    group: str
    leader_id: str
    leader_address: str
    is_leader: bool
    peers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """BrokerReplicasInfo.ReplicaIdentity."""

    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool


@dataclass(frozen=True, slots=True)
class GroupReplicas:
    """One group of BrokerReplicasInfo: its master, epochs and members in and out of the set."""

    broker_name: str
    master_broker_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    in_sync: tuple[ReplicaIdentity, ...]
    not_in_sync: tuple[ReplicaIdentity, ...]


@dataclass(frozen=True, slots=True)
class ElectMasterResult:
    """ElectMasterResponseHeader and the group's members (BrokerMemberGroup)."""

    master_broker_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    broker_addrs: dict[int, str]


def _controllers(addr: str | list[str]) -> list[str]:
    addrs = [a.strip() for a in (addr.split(";") if isinstance(addr, str) else addr) if a and a.strip()]
    if not addrs:
        raise InvalidArgument("no controller address: pass -a host:port")
    return addrs


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _identities(name: str, rows: Any) -> tuple[ReplicaIdentity, ...]:
    return tuple(ReplicaIdentity(str(r.get("brokerName") or name), _int(r.get("brokerId")),
                                 str(r.get("brokerAddress") or ""), bool(r.get("alive")))
                 for r in rows or ())


class ControllerAdmin(AdminBase):
    async def get_controller_meta_data(self, controller_addr: str | list[str]) -> ControllerMetaData:
        """CONTROLLER_GET_METADATA_INFO from the first controller of the list that answers."""
        failure: Exception | None = None
        for addr in _controllers(controller_addr):
            try:
                r = await self._call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
            except (RemotingError, ServerError) as exc:
                failure = exc
                continue
            f = r.ext_fields or {}
            peers = tuple(p for p in (f.get("peers") or "").split(";") if p)
            return ControllerMetaData(f.get("group", ""), f.get("controllerLeaderId", ""),
                                      f.get("controllerLeaderAddress", ""), f.get("isLeader") == "true",
                                      peers)
        assert failure is not None
        raise failure

    async def _leader(self, controller_addr: str | list[str]) -> str:
        meta = await self.get_controller_meta_data(controller_addr)
        if not meta.leader_address:
            raise ServerError(f"the controllers {controller_addr} have no leader now (an election is "
                              "under way?)", code=NOT_LEADER)
        return meta.leader_address

    async def get_sync_state_data(self, controller_addr: str | list[str],
                                  broker_names: list[str]) -> dict[str, GroupReplicas]:
        """CONTROLLER_GET_SYNC_STATE_DATA (Java's getInSyncStateData): each named group's master,
        epochs and SyncStateSet; an empty list asks for every group the controller knows
        (rocketq's controller answers that; Java's answers none)."""
        leader = await self._leader(controller_addr)
        body = orjson.dumps(broker_names)
        r = await self._call(leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, body)
        try:
            table = orjson.loads(r.body_bytes() or b"{}").get("replicasInfoTable") or {}
            return {name: GroupReplicas(
                name, None if info.get("masterBrokerId") is None else _int(info["masterBrokerId"]),
                str(info.get("masterAddress") or ""), _int(info.get("masterEpoch")),
                _int(info.get("syncStateSetEpoch")), _identities(name, info.get("inSyncReplicas")),
                _identities(name, info.get("notInSyncReplicas")))
                for name, info in sorted(table.items())}
        except (orjson.JSONDecodeError, AttributeError, KeyError) as exc:
            raise ProtocolError(f"CONTROLLER_GET_SYNC_STATE_DATA: {exc}") from None

    async def elect_master(self, controller_addr: str | list[str], cluster: str, broker_name: str,
                           broker_id: int) -> ElectMasterResult:
        """CONTROLLER_ELECT_MASTER as an admin triggers it (designateElect): make ``broker_id`` the
        master of ``broker_name``. It must be alive and in the SyncStateSet (CONTROLLER_ELECT_MASTER_FAILED
        otherwise); its members switch roles at their next round with the controller (~1 s)."""
        leader = await self._leader(controller_addr)
        r = await self._call(leader, RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": cluster, "brokerName": broker_name, "brokerId": str(broker_id),
            "designateElect": "true", "invokeTime": str(int(time.time() * 1000))})
        f = r.ext_fields or {}
        addrs: dict[int, str] = {}
        body = r.body_bytes()
        if body:
            try:
                decoded = orjson.loads(body)
                group = decoded.get("brokerMemberGroup") or decoded  # Java admin reads either shape
                addrs = {_int(k): str(v) for k, v in (group.get("brokerAddrs") or {}).items()}
            except (orjson.JSONDecodeError, AttributeError) as exc:
                raise ProtocolError(f"CONTROLLER_ELECT_MASTER: {exc}") from None
        master = f.get("masterBrokerId")
        return ElectMasterResult(None if master in (None, "") else _int(master), f.get("masterAddress", ""),
                                 _int(f.get("masterEpoch")), _int(f.get("syncStateSetEpoch")), addrs)

    async def clean_controller_broker_data(self, controller_addr: str | list[str], cluster: str | None,
                                           broker_name: str, broker_ids: list[int] | None = None,
                                           clean_living_broker: bool = False) -> None:
        """CLEAN_BROKER_DATA: forget a group (no ids) or some of its members on the controllers.
        Without ``clean_living_broker`` the controller refuses while they are alive."""
        if not clean_living_broker and not cluster:
            raise InvalidArgument("without cleanLivingBroker the cluster name is required (as Java's)")
        leader = await self._leader(controller_addr)
        ext = {"brokerName": broker_name, "isCleanLivingBroker": jbool(clean_living_broker),
               "invokeTime": str(int(time.time() * 1000))}
        if cluster:
            ext["clusterName"] = cluster
        if broker_ids:
            ext["brokerControllerIdsToClean"] = ";".join(str(b) for b in broker_ids)
        await self._call(leader, RequestCode.CLEAN_BROKER_DATA, ext)

    async def get_controller_config(self, controller_addr: str | list[str]) -> dict[str, dict[str, str]]:
        """GET_CONTROLLER_CONFIG of each controller listed: address -> its properties."""
        out = {}
        for addr in _controllers(controller_addr):
            r = await self._call(addr, RequestCode.GET_CONTROLLER_CONFIG)
            out[addr] = properties_dict(r.body_bytes().decode("utf-8", "replace"), f"controller {addr}")
        return out

    async def update_controller_config(self, controller_addr: str | list[str], props: dict[str, str]) -> None:
        """UPDATE_CONTROLLER_CONFIG to each controller listed (each keeps its own settings)."""
        body = properties_text(props).encode()
        for addr in _controllers(controller_addr):
            await self._call(addr, RequestCode.UPDATE_CONTROLLER_CONFIG, None, body)

