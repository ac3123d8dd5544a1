"""Controller mode, the broker's side (RocketMQ 5's ReplicasManager): the controllers decide
which member of the group is master; this broker follows what they say.

Every brokerHeartbeatInterval it finds the controller leader (GET_METADATA_INFO), claims a
brokerId once (GET_NEXT_BROKER_ID + APPLY_BROKER_ID, kept in the store root), registers its
address and HA address (REGISTER_BROKER), heartbeats (BROKER_HEARTBEAT with its epoch and max
offset) and asks who is master (GET_REPLICA_INFO). When nobody is, it asks to be elected
(ELECT_MASTER). Then it switches role when the answer changed:

* master: cut a partial record off the tail, append (epoch, max offset) to the epoch file, take
  writes, run the delay-level and transaction-check services, pop (revive) and timer delivery,
  register as brokerId 0;
* slave: refuse writes, stop those services (the timer wheel keeps filing, following the
  master's read time), drop its own slaves, compare its epoch file with the new master's
  (GET_BROKER_EPOCH_CACHE) and cut its log where they part (an old master's unreplicated tail),
  then replicate from the master's HA address and register with its own brokerId.

rocketq's controller also takes the HA address in the registration (an extField Java ignores) and
answers it as `masterHaAddress`, so a slave needs no name server round to find its master's port.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import RocketQError
from rocketq.store.ha import EpochEntry, EpochFileCache, ReplicaWriter, consistent_point

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.ha")

TIMEOUT = 3.0
# ELECT_MASTER answers that are not errors here: elected, CONTROLLER_MASTER_NOT_AVAILABLE (2004),
# CONTROLLER_MASTER_STILL_EXIST (2011), CONTROLLER_ELECT_MASTER_FAILED (2012): ask again next round.
_ELECT_ANSWERS = (0, 2004, 2011, 2012)
ID_FILE = "controllerBrokerId"


class ControllerModeError(RocketQError):
    """A controller answered with an error code."""


class ReplicasManager:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        bc = controller.broker_config
        self.controllers = bc.controller_addr_list
        self.master_role = bc.broker_role if bc.broker_role != "SLAVE" else "ASYNC_MASTER"
        self.epoch_cache = EpochFileCache(controller.store_config.store_path_root_dir)
        self.leader: str | None = None
        self.broker_id: int | None = None
        self.registered = False
        self.role = ""  # "", "MASTER" or "SLAVE"
        self.master_id: int | None = None
        self.master_addr = ""
        self.master_epoch = 0
        self.in_sync_state_set = False  # per the controllers' last answer (a Prometheus gauge)
        self._task: asyncio.Future[None] | None = None
        self._beat_task: asyncio.Future[None] | None = None
        self._id_path = Path(controller.store_config.store_path_root_dir) / ID_FILE

    @property
    def role_known(self) -> bool:
        return bool(self.role)

    async def start(self) -> None:
        self.epoch_cache.load()
        with contextlib.suppress(FileNotFoundError, ValueError):
            self.broker_id = int(self._id_path.read_text().strip())
        self._task = asyncio.ensure_future(self._run())
        self._beat_task = asyncio.ensure_future(self._beat_loop())

    async def shutdown(self) -> None:
        tasks = [t for t in (self._task, self._beat_task) if t is not None]
        self._task = self._beat_task = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _beat_loop(self) -> None:
        """Heartbeats on their own beat: a round stuck on a frozen master (a 3 s timeout) must
        not make the controller think this broker is dead."""
        period = self._ctl.broker_config.broker_heartbeat_interval / 1000
        while True:
            await asyncio.sleep(period)
            if self.leader is not None and self.registered:
                self._heartbeat()

    async def _run(self) -> None:
        period = self._ctl.broker_config.broker_heartbeat_interval / 1000
        failures = 0
        while True:
            try:
                await self.tick()
                failures = 0
            except asyncio.CancelledError:
                raise
            except (RocketQError, OSError, ValueError, KeyError) as exc:
                failures += 1
                (log.warning if failures == 1 else log.debug)("controller mode: %s", exc)
                self.leader = None
            except Exception:  # the loop is this broker's only link to its role: never let it die
                log.exception("controller mode: round failed")
                self.leader = None
            await asyncio.sleep(period)

    # -- talking to the controller ------------------------------------------------------------

    async def _invoke(self, addr: str, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        request = RemotingCommand.request(code, ext, body)
        return await self._ctl.outer_api.client.invoke(addr, request, TIMEOUT)

    async def _call(self, code: int, ext: dict[str, str], body: bytes = b"",
                    ok: tuple[int, ...] = (0,)) -> RemotingCommand:
        if self.leader is None:
            self.leader = await self._find_leader()
        response = await self._invoke(self.leader, code, ext, body)
        if response.code not in ok:
            raise ControllerModeError(f"controller {self.leader} answered {code} with {response.code}: "
                                      f"{response.remark}", code=response.code)
        return response

    async def _find_leader(self) -> str:
        for addr in self.controllers:
            try:
                r = await self._invoke(addr, RequestCode.CONTROLLER_GET_METADATA_INFO, {})
            except (RocketQError, OSError):
                continue
            leader = r.ext("controllerLeaderAddress")
            if r.code == 0 and leader:
                return leader
        raise ControllerModeError(f"no controller leader among {', '.join(self.controllers)}")

    def _ids(self) -> dict[str, str]:
        bc = self._ctl.broker_config
        return {"clusterName": bc.broker_cluster_name, "brokerName": bc.broker_name}

    async def _claim_id(self) -> int:
        r = await self._call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, self._ids())
        wanted = int(r.ext("nextBrokerId") or "1")
        code = f"{self._ctl.address};{secrets.token_hex(8)}"
        await self._call(RequestCode.CONTROLLER_APPLY_BROKER_ID,
                         {**self._ids(), "appliedBrokerId": str(wanted), "registerCheckCode": code})
        self._id_path.parent.mkdir(parents=True, exist_ok=True)
        self._id_path.write_text(f"{wanted}\n")
        log.info("controller mode: this broker is brokerId %d of %s", wanted, self._ctl.broker_name)
        return wanted

    async def tick(self) -> None:
        ctl = self._ctl
        if self.leader is None:
            self.leader = await self._find_leader()
        if self.broker_id is None:
            self.broker_id = await self._claim_id()
        ha_addr = ctl.replication.ha_server_addr() if ctl.replication is not None else ""
        if not self.registered:
            r = await self._call(RequestCode.CONTROLLER_REGISTER_BROKER, {
                **self._ids(), "brokerId": str(self.broker_id), "brokerAddress": ctl.address,
                "invokeTime": str(int(time.time() * 1000)), "haServerAddr": ha_addr})
            self.registered = True
        self._heartbeat()
        r = await self._call(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": ctl.broker_name})
        if not r.ext("masterBrokerId"):
            r = await self._call(RequestCode.CONTROLLER_ELECT_MASTER, {
                **self._ids(), "brokerId": str(self.broker_id), "designateElect": "false",
                "invokeTime": str(int(time.time() * 1000))},
                ok=_ELECT_ANSWERS)
        self._note_sync_state_set(r)
        await self._apply(r)
        if self.role == "SLAVE":
            await self._learn_epochs()

    def _note_sync_state_set(self, r: RemotingCommand) -> None:
        """GET_REPLICA_INFO and ELECT_MASTER answers carry the group's SyncStateSet in their body."""
        body = r.body_bytes()
        if not body:
            return
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            ids = {int(b) for b in orjson.loads(body).get("syncStateSet") or ()}
            self.in_sync_state_set = self.broker_id in ids
            if self._ctl.replication is not None:
                self._ctl.replication.set_sync_peers(bool(ids - {self.broker_id}))

    def gauges(self) -> list[tuple[bool, str, str, float]]:
        """Series for broker/metrics.py: (counter?, name, help, value). RocketMQ 5's broker exports
        no controller-mode state, hence rocketq's names."""
        return [
            (False, "rocketq_controller_mode_is_master",
             "1 while the controllers have this broker master of its group", int(self.role == "MASTER")),
            (False, "rocketq_controller_mode_is_slave",
             "1 while this broker follows its group's master (both 0: role not known yet)",
             int(self.role == "SLAVE")),
            (False, "rocketq_controller_mode_master_epoch",
             "Epoch of the master this broker is or follows (0: none yet)", max(0, self.master_epoch)),
            (False, "rocketq_controller_mode_in_sync_state_set",
             "1 when the controllers' last answer listed this broker in its group's SyncStateSet",
             int(self.in_sync_state_set)),
        ]

    def _heartbeat(self) -> None:
        ctl = self._ctl
        bc = ctl.broker_config
        if self.leader is None:
            return
        ext = {**self._ids(), "brokerAddr": ctl.address, "brokerId": str(self.broker_id),
               "epoch": str(self.epoch_cache.last_epoch), "maxOffset": str(ctl.store.max_phy_offset),
               "confirmOffset": str(ctl.store.max_phy_offset),
               "heartbeatTimeoutMills": str(bc.controller_heart_beat_timeout_mills), "electionPriority": "0"}
        fut = ctl.outer_api.client.invoke_oneway(self.leader, RemotingCommand.request(
            RequestCode.BROKER_HEARTBEAT, ext, oneway=True), TIMEOUT)
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    # -- role changes ---------------------------------------------------------------------------

    async def _apply(self, r: RemotingCommand) -> None:
        raw_id = r.ext("masterBrokerId")
        if not raw_id:
            return  # no master and none could be elected: wait for the next round
        master_id = int(raw_id)
        epoch = int(r.ext("masterEpoch") or "0")
        addr = r.ext("masterAddress") or ""
        if master_id == self.broker_id:
            if self.role != "MASTER" or epoch != self.master_epoch:
                await self.change_to_master(epoch)
        elif self.role != "SLAVE" or epoch != self.master_epoch or addr != self.master_addr:
            await self.change_to_slave(master_id, addr, r.ext("masterHaAddress") or "", epoch)

    def _set_identity(self, broker_id: int, role: str) -> None:
        ctl = self._ctl
        new = dataclasses.replace(ctl.broker_config, broker_id=broker_id, broker_role=role)  # type: ignore[arg-type]
        ctl.broker_config = new
        ctl.runtime_config.replace(new)

    async def change_to_master(self, epoch: int) -> None:
        ctl = self._ctl
        assert ctl.replication is not None
        log.warning("controller mode: %s becomes MASTER of %s at epoch %d", ctl.address, ctl.broker_name,
                    epoch)
        await ctl.replication.become_master(self.master_role)
        self.epoch_cache.append(epoch, ctl.store.max_phy_offset)
        self._set_identity(0, self.master_role)
        self.role, self.master_id, self.master_epoch = "MASTER", self.broker_id, epoch
        self.master_addr = ctl.address
        await self._master_services(True)
        # Java's controller-mode master registers with stateVersion = its epoch: a name server
        # still holding the old master as id 0 takes the newer epoch's registration over it
        ctl.topic_manager._state_version = epoch
        ctl.topic_manager.next_version()
        await ctl.register_broker_all()

    async def _master_services(self, on: bool) -> None:
        """What only a master runs (Java's changeSpecialServiceStatus): the delay levels, the
        transaction check, pop (its checkpoints and revive) and timer delivery. A slave's wheel
        still files timers, and its pop view is rebuilt from the revive topic at promotion."""
        ctl = self._ctl
        if ctl.timer_service is not None:
            ctl.timer_service.set_delivering(on)
        if on:
            if ctl.schedule_service is not None:
                await ctl.schedule_service.start()
            await ctl.transaction_check_service.start()
            if ctl.pop_service is not None:
                await ctl.pop_service.start()
            return
        if ctl.pop_service is not None:
            await ctl.pop_service.shutdown()
        if ctl.schedule_service is not None:
            await ctl.schedule_service.shutdown()
        await ctl.transaction_check_service.shutdown()

    async def change_to_slave(self, master_id: int, master_addr: str, ha_addr: str, epoch: int) -> None:
        ctl = self._ctl
        assert ctl.replication is not None and self.broker_id is not None
        log.warning("controller mode: %s becomes SLAVE of %s (%s) at epoch %d", ctl.address, master_addr,
                    ctl.broker_name, epoch)
        was_master = self.role == "MASTER"
        await ctl.replication.become_slave()
        self._set_identity(self.broker_id, "SLAVE")
        if was_master or self.role == "":
            await self._master_services(False)
        self.role = "SLAVE"  # the role is known even if the truncation below must wait a round
        self.master_epoch, self.master_addr, self.master_id = -1, "", master_id
        await self._truncate_to_master(master_addr)
        ctl.replication.follow(master_addr, ha_addr)
        self.master_epoch, self.master_addr = epoch, master_addr
        await ctl.register_broker_all()

    async def _master_epochs(self, master_addr: str) -> tuple[list[EpochEntry], int]:
        r = await self._invoke(master_addr, RequestCode.GET_BROKER_EPOCH_CACHE, {})
        if r.code != 0:
            raise ControllerModeError(f"master {master_addr} answered GET_BROKER_EPOCH_CACHE with {r.code}")
        body = orjson.loads(r.body_bytes())
        entries = [EpochEntry(int(e["epoch"]), int(e["startOffset"])) for e in body.get("epochList") or []]
        return entries, int(body.get("maxOffset") or 0)

    async def _truncate_to_master(self, master_addr: str) -> None:
        """Cut what this log holds past the point where it and the master's part (RocketMQ's
        AutoSwitchHAClient handshake, done here over the broker port)."""
        store = self._ctl.store
        remote, remote_max = await self._master_epochs(master_addr)
        local_max = store.max_phy_offset
        if not self.epoch_cache.entries or not remote:
            return
        point = consistent_point(self.epoch_cache.entries, local_max, remote, remote_max)
        if point < 0:
            point = store.commit_log.min_offset
            log.error("controller mode: this log shares no epoch with master %s: dropping it", master_addr)
        if point < local_max:
            log.warning("controller mode: truncating the commit log from %d to %d (the epoch boundary of "
                        "master %s)", local_max, point, master_addr)
            ReplicaWriter(store).truncate(point)
        # epochs from the cut on were another master's (or this one's, that nobody followed)
        self.epoch_cache.truncate_suffix_by_offset(point)

    async def _learn_epochs(self) -> None:
        """Take the master's epochs whose start this log has reached (Java's slave learns them in
        the HA handshake): the epoch this broker heartbeats says how current it is."""
        if not self.master_addr:
            return
        remote, _ = await self._master_epochs(self.master_addr)
        local_max = self._ctl.store.max_phy_offset
        for e in remote:
            if e.epoch > self.epoch_cache.last_epoch and e.start_offset <= local_max:
                self.epoch_cache.append(e.epoch, e.start_offset)

    # -- served to slaves -----------------------------------------------------------------------

    def get_epoch_cache(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): Java's EpochEntryCache body."""
        ctl = self._ctl
        max_offset = ctl.store.max_phy_offset
        body = {**self._ids(), "brokerId": self.broker_id or 0, "maxOffset": max_offset,
                "epochList": [e.to_json() for e in self.epoch_cache.with_ends(max_offset)]}
        return request.make_response(0, None, {}, orjson.dumps(body))
