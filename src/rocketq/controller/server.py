"""The controller process (RocketMQ 5's ControllerManager + ControllerRequestProcessor): the
CONTROLLER_* request codes on a remoting port, the Raft-replicated state behind them, and the
leader's scan that elects a master when one stops heartbeating.

Contract (the CLI and the tests call exactly this)::

    ctl = ControllerServer("127.0.0.1:9878", ["127.0.0.1:9878", "127.0.0.1:9880", ...])
    await ctl.start(); ... ; await ctl.shutdown()

Only the leader answers (others say CONTROLLER_NOT_LEADER, 2007, and GET_METADATA_INFO names the
leader), as Java's DLedger controller does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import orjson

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.controller.heartbeats import Heartbeats
from rocketq.controller.raft import ControllerRaft
from rocketq.controller.state import (
    INVALID_CLEAN_BROKER_METADATA,
    INVALID_REQUEST,
    NOT_LEADER,
    ReplicasInfo,
    Result,
)
from rocketq.remoting import RemotingServer

__all__ = ["ControllerServer"]

log = logging.getLogger("rocketq.controller")

SCAN_INTERVAL = 1.0
_MASTER_KEYS = ("masterBrokerId", "masterAddress", "masterEpoch", "syncStateSetEpoch", "masterHaAddress")


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _ext(values: dict[str, Any], *keys: str) -> dict[str, str]:
    out = {}
    for k in keys:
        v = values.get(k)
        if v is not None and v != "":
            out[k] = str(v)
    return out


class ControllerServer:
    def __init__(self, address: str, peers: list[str], data_dir: str | None = None, *,
                 heartbeat_timeout_ms: int | None = None, unclean_elect: bool = False,
                 server: RemotingServer | None = None) -> None:
        """`server`: an existing remoting server to add the codes to (a name server embedding
        the controller); otherwise this controller listens on `address` itself."""
        self.address = address
        self.peers = peers or [address]
        self.data_dir = data_dir
        self.unclean_elect = unclean_elect
        self.heartbeats = Heartbeats(heartbeat_timeout_ms) if heartbeat_timeout_ms else Heartbeats()
        self._own_server = server is None
        host, _, port = address.rpartition(":")
        self.server = server or RemotingServer(host, [int(port)])
        self.raft: ControllerRaft | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._was_leader = False
        self.register(self.server)

    def register(self, server: RemotingServer) -> None:
        handlers: dict[int, Any] = {
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_controller_config,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_controller_config,
        }
        for code, handler in handlers.items():
            server.register_processor(code, handler)
        server.on_channel_close(self._on_channel_close)

    async def start(self) -> None:
        if self._own_server:
            await self.server.start()
        self.raft = ControllerRaft(self.address, self.peers, self.data_dir)
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="controller-scan")
        log.info("controller %s started, peers %s", self.address, ",".join(self.peers))

    async def shutdown(self) -> None:
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.raft is not None:
            await asyncio.to_thread(self.raft.destroy_synchronous)
            self.raft = None
        if self._own_server:
            await self.server.stop()

    def metric_families(self) -> list[Any]:
        """The Prometheus series (controller/metrics.py), for whichever endpoint serves them."""
        from rocketq.controller.metrics import metric_families  # prometheus_client: the metrics extra

        return metric_families(self)

    # -- the leader's scan ------------------------------------------------------------------------

    async def _scan_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SCAN_INTERVAL):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self._scan()
            except Exception:  # the scan must outlive any one bad round
                log.exception("controller scan failed")

    async def _scan(self) -> None:
        raft = self.raft
        if raft is None:
            return
        leader = raft.is_leader
        now = _now_ms()
        if leader and not self._was_leader:
            log.info("controller %s is the leader now", self.address)
            self.heartbeats.become_leader(now)
        self._was_leader = leader
        if not leader:
            return
        with raft.lock:
            commands = self.heartbeats.decide(raft.state, now)
        for command in commands:
            if command["op"] == "elect" and self.unclean_elect:
                command["unclean"] = True
            result = await raft.propose(command)
            if command["op"] == "elect":
                (log.info if result.ok else log.warning)(
                    "elect master of %s (alive %s): %s %s", command["brokerName"], command["alive"],
                    result.code, result.values.get("masterBrokerId", result.remark))
            elif result.ok:
                log.info("SyncStateSet of %s is now %s", command["brokerName"], command["syncStateSet"])

    def _on_channel_close(self, channel: Any) -> None:
        if self.heartbeats.channel_closed(channel):
            self._wake.set()

    # -- request handlers -------------------------------------------------------------------------

    def _leader(self) -> ControllerRaft | None:
        raft = self.raft
        return raft if raft is not None and raft.is_leader else None

    @staticmethod
    def _answer(request: RemotingCommand, result: Result, ext: dict[str, str] | None = None,
                body: bytes = b"") -> RemotingCommand:
        return request.make_response(result.code, result.remark or None, ext or {}, body)

    def _not_leader(self, request: RemotingCommand) -> RemotingCommand:
        leader = self.raft.leader_addr if self.raft is not None else None
        return request.make_response(NOT_LEADER, f"not the controller leader; the leader is {leader}")

    def get_metadata(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CONTROLLER_GET_METADATA_INFO: who leads (GetMetaDataResponseHeader)."""
        raft = self.raft
        leader = raft.leader_addr if raft is not None else None
        ext = {"group": "rocketq-controller", "isLeader": str(bool(raft and raft.is_leader)).lower(),
               "peers": ";".join(self.peers)}
        if leader:
            ext.update(controllerLeaderId=leader, controllerLeaderAddress=leader)
        return request.make_response(0, None, ext)

    def get_next_broker_id(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        f = request.fields() or {}
        with raft.lock:
            nxt = raft.state.next_broker_id(f.get("brokerName", ""))
        return request.make_response(0, None, {"clusterName": f.get("clusterName", ""),
                                               "brokerName": f.get("brokerName", ""),
                                               "nextBrokerId": str(nxt)})

    async def apply_broker_id(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        f = request.fields() or {}
        result = await raft.propose({"op": "apply_broker_id", "cluster": f.get("clusterName", ""),
                                     "brokerName": f.get("brokerName", ""),
                                     "brokerId": int(f.get("appliedBrokerId", "-1")),
                                     "checkCode": f.get("registerCheckCode", "")})
        return self._answer(request, result, {"clusterName": f.get("clusterName", ""),
                                              "brokerName": f.get("brokerName", "")})

    async def register_broker(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        f = request.fields() or {}
        result = await raft.propose({"op": "register", "brokerName": f.get("brokerName", ""),
                                     "brokerId": int(f.get("brokerId", "-1")),
                                     "address": f.get("brokerAddress", ""),
                                     "haAddress": f.get("haServerAddr", "")})
        if result.ok:
            self.heartbeats.beat(f.get("brokerName", ""), int(f.get("brokerId", "-1")),
                                 f.get("brokerAddress", ""), _now_ms(), channel=channel)
        return self._replica_answer(request, result, clusterName=f.get("clusterName", ""),
                                    brokerName=f.get("brokerName", ""))

    def _replica_answer(self, request: RemotingCommand, result: Result, **extra: str) -> RemotingCommand:
        v = result.values
        ext = _ext(v, *_MASTER_KEYS)
        ext.update({k: x for k, x in extra.items() if x})
        body = b""
        if "syncStateSet" in v:
            body = orjson.dumps({k: v[k] for k in ("syncStateSet", "syncStateSetEpoch")})
        return self._answer(request, result, ext, body)

    def get_replica_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        with raft.lock:
            result = raft.state.replica_info(request.ext("brokerName") or "")
        return self._replica_answer(request, result)

    async def elect_master(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        f = request.fields() or {}
        name = f.get("brokerName", "")
        now = _now_ms()
        with raft.lock:
            g = raft.state.group(name)
            alive = sorted(self.heartbeats.alive(g, now)) if g is not None else []
            live = self.heartbeats.live_info(g) if g is not None else {}
        result = await raft.propose({"op": "elect", "brokerName": name,
                                     "brokerId": int(f.get("brokerId", "-1")),
                                     "designate": f.get("designateElect") == "true", "alive": alive,
                                     "live": live, "unclean": self.unclean_elect})
        v = result.values
        ext = _ext(v, *_MASTER_KEYS)
        body = b""
        if "syncStateSet" in v:  # Java's ElectMasterResponseBody: the group's members and the set
            with raft.lock:
                g = raft.state.group(name)
                members = _member_group(g) if g is not None else None
            body = orjson.dumps({"brokerMemberGroup": members, "syncStateSet": v["syncStateSet"]})
        return self._answer(request, result, ext, body)

    async def alter_sync_state_set(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        f = request.fields() or {}
        try:
            body = orjson.loads(request.body_bytes())
            command = {"op": "alter_sync_state_set", "brokerName": f["brokerName"],
                       "masterBrokerId": int(f["masterBrokerId"]), "masterEpoch": int(f["masterEpoch"]),
                       "syncStateSet": [int(b) for b in body["syncStateSet"]],
                       "syncStateSetEpoch": int(body["syncStateSetEpoch"])}
        except (KeyError, ValueError, TypeError, orjson.JSONDecodeError) as exc:
            return self._answer(request, Result(INVALID_REQUEST, f"bad ALTER_SYNC_STATE_SET: {exc}"))
        result = await raft.propose(command)
        return self._answer(request, result, _ext(result.values, "syncStateSetEpoch"),
                            orjson.dumps(result.values) if result.ok else b"")

    def get_sync_state_data(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CONTROLLER_GET_SYNC_STATE_DATA: each named group's master, set and members (the body
        is a JSON list of broker names, as Java's)."""
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        try:
            names = orjson.loads(request.body_bytes() or b"[]")
        except orjson.JSONDecodeError:
            names = []
        now = _now_ms()
        table: dict[str, Any] = {}
        with raft.lock:
            for name in names or list(raft.state.groups):
                g = raft.state.group(name)
                if g is None:
                    continue
                alive = self.heartbeats.alive(g, now)
                members = [{"brokerName": name, "brokerId": b, "brokerAddress": a, "alive": b in alive}
                           for b, a in sorted(g.brokers.items())]
                in_sync = g.sync_state_set
                table[name] = {"masterBrokerId": g.master, "masterAddress": g.brokers.get(g.master, "")
                               if g.master is not None else "", "masterEpoch": g.master_epoch,
                               "syncStateSetEpoch": g.sync_state_set_epoch,
                               "inSyncReplicas": [m for m in members if m["brokerId"] in in_sync],
                               "notInSyncReplicas": [m for m in members if m["brokerId"] not in in_sync]}
        return request.make_response(0, None, {}, orjson.dumps({"replicasInfoTable": table}))

    def broker_heartbeat(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        f = request.fields() or {}
        try:
            self.heartbeats.beat(
                f.get("brokerName", ""), int(f.get("brokerId", "-1")), f.get("brokerAddr", ""), _now_ms(),
                epoch=int(f.get("epoch") or 0), max_offset=int(f.get("maxOffset") or 0),
                timeout_ms=int(f.get("heartbeatTimeoutMills") or 0) or None,
                priority=int(f.get("electionPriority") or 0), channel=channel)
        except ValueError as exc:
            return self._answer(request, Result(INVALID_REQUEST, f"bad heartbeat: {exc}"))
        return None if request.is_oneway else request.make_response(0)

    async def clean_broker_data(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CLEAN_BROKER_DATA (mqadmin cleanBrokerMetadata): forget a group, or some of its
        members; without isCleanLivingBroker, refused while they are alive (as Java's)."""
        raft = self._leader()
        if raft is None:
            return self._not_leader(request)
        f = request.fields() or {}
        name = f.get("brokerName", "")
        try:
            ids = [int(x) for x in (f.get("brokerControllerIdsToClean") or "").split(";") if x.strip()]
        except ValueError as exc:
            remark = f"Please set the option <brokerControllerIdsToClean> according to the format: {exc}"
            return self._answer(request, Result(INVALID_CLEAN_BROKER_METADATA, remark))
        if (f.get("isCleanLivingBroker") or "false").lower() != "true":
            with raft.lock:
                g = raft.state.group(name)
                alive = self.heartbeats.alive(g, _now_ms()) if g is not None else set()
                refused = None
                if g is not None and not ids and g.master is not None:
                    refused = f"Broker {name} is still alive, clean up failure"
                for b in ids:
                    if b in alive:
                        refused = f"Broker [{name}, {b}] is still alive, clean up failure"
            if refused:
                return self._answer(request, Result(INVALID_CLEAN_BROKER_METADATA, refused))
        result = await raft.propose({"op": "clean", "brokerName": name, "brokerIds": ids})
        return self._answer(request, result)

    # -- this controller's own settings (mqadmin getControllerConfig / updateControllerConfig) ----

    def config(self) -> dict[str, str]:
        """This controller's settings under Java's ControllerConfig names where it has one."""
        return {"controllerAddr": self.address, "controllerPeers": ";".join(self.peers),
                "controllerStorePath": self.data_dir or "", "controllerType": "pysyncobj-raft",
                "enableElectUncleanMaster": str(self.unclean_elect).lower(),
                "scanNotActiveBrokerInterval": str(int(SCAN_INTERVAL * 1000))}

    def get_controller_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_CONTROLLER_CONFIG: properties text, as Java's (any controller answers, leader or not)."""
        body = "".join(f"{k}={v}\n" for k, v in self.config().items()).encode()
        return request.make_response(0, None, {}, body)

    def update_controller_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """UPDATE_CONTROLLER_CONFIG: the keys that apply at once on this controller (each controller
        is sent its own); others are refused (NO_PERMISSION, as Java's for a key it will not
        change) and nothing is changed."""
        props: dict[str, str] = {}
        for line in (request.body_bytes() or b"").decode("utf-8", "replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() and not key.lstrip().startswith("#"):
                props[key.strip()] = value.strip()
        fixed = sorted(set(props) - set(_UPDATABLE))
        if fixed:
            remark = f"Can not update config {', '.join(fixed)} at runtime (only {', '.join(_UPDATABLE)})"
            return request.make_response(ResponseCode.NO_PERMISSION, remark)
        unclean = props.get("enableElectUncleanMaster")
        if unclean is not None:
            if unclean.lower() not in ("true", "false"):
                return request.make_response(INVALID_REQUEST,
                                             f"enableElectUncleanMaster={unclean} is not true or false")
            self.unclean_elect = unclean.lower() == "true"
        log.info("controller config updated: %s", props)
        return request.make_response(0)


_UPDATABLE = ("enableElectUncleanMaster",)


def _member_group(g: ReplicasInfo) -> dict[str, Any]:
    """Java's BrokerMemberGroup."""
    return {"cluster": g.cluster, "brokerName": g.broker_name,
            "brokerAddrs": {str(b): a for b, a in sorted(g.brokers.items())}}
