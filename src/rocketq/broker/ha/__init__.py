"""Master/slave replication, the broker's part (RocketMQ 4.x HA; docs/ha.md).

`Replication` is what the controller holds: on a master the HA port (`master.py`) and the
SYNC_MASTER waits, on a slave the replication client (`slave.py`) and the 10 s copy of the
master's tables (`broker/slave_sync.py`). The name server's answer to each registration names a
slave's master (its broker address and HA address), so a slave needs no address of its own
configured, and a master on port 0 announces its live HA port.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.broker.ha.master import HAService
from rocketq.broker.ha.slave import HAClient
from rocketq.broker.slave_sync import SYNC_PERIOD, SlaveSynchronize
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.store.ha import ReplicaWriter

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.outer_api import RegisterBrokerResult

__all__ = ["HAClient", "HAService", "Replication"]

log = logging.getLogger("rocketq.broker.ha")


class Replication:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.is_slave = controller.broker_config.is_slave
        self.service: HAService | None = None
        self.client: HAClient | None = None
        self.slave_sync: SlaveSynchronize | None = None
        self._sync_task: asyncio.Future[None] | None = None  # controller mode's table copy
        # controller mode: how this broker acks as master, and whether the controllers' SyncStateSet
        # holds another broker (a master alone in it acks at once, as RocketMQ 5's does)
        self._master_role = ""
        self.sync_peers = False

    @property
    def sync_master(self) -> bool:
        return self._ctl.broker_config.broker_role == "SYNC_MASTER"

    async def start(self) -> None:
        ctl = self._ctl
        store = ctl.store
        if ctl.broker_config.enable_controller_mode:
            # The controller decides the role (broker/ha/controller_mode.py). Until it has, this
            # broker takes no writes; its HA port listens from the start so that the address it
            # registers with the controller is the one its slaves will use once it is master.
            self.is_slave = True
            store.put.slave = True
            await self._start_service()
            return
        if self.is_slave:
            store.put.slave = True
            self.client = HAClient(store, self._dispatched)
            self.client.start()
            self.slave_sync = SlaveSynchronize(ctl)
            ctl._spawn(ctl._every(SYNC_PERIOD, self.slave_sync.sync_all))
            return
        await self._start_service()
        if self.sync_master:
            store.group_transfer = self.service.group_transfer if self.service is not None else None

    async def _start_service(self) -> None:
        ctl = self._ctl
        self.service = HAService(ctl, self.apply_sync_state)
        configured = ctl.store_config.ha_listen_port
        port = configured if configured is not None else (ctl.listen_port + 1 if ctl.server_config.listen_port
                                                          else 0)
        await self.service.start(ctl.server_config.bind_address, port)

    # -- role changes (controller mode) ------------------------------------------------------

    async def stop_following(self) -> None:
        """Stop replicating and copying tables, cut a partial record off the tail: the log is
        whole records only before this broker writes (as master) or follows another master."""
        client, self.client = self.client, None
        if client is not None:
            await client.shutdown()
            client.replica.dispatch()
        task, self._sync_task = self._sync_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.slave_sync = None
        replica = client.replica if client is not None else ReplicaWriter(self._ctl.store)
        if replica.dispatched < replica.max_offset:
            replica.truncate(replica.dispatched)

    async def become_master(self, role: str) -> None:
        """Take writes as `role`: a SYNC_MASTER's acks wait for its slaves of this epoch.
        (The role is passed: the broker config still says SLAVE until the promotion is done.)"""
        await self.stop_following()
        self.is_slave = False
        store = self._ctl.store
        if self.service is None:
            await self._start_service()
        if self.service is not None:
            self.service.group_transfer.reset()
        store.commit_log.forget_current()
        self._master_role = role
        self.apply_sync_state()

    def set_sync_peers(self, peers: bool) -> None:
        """The controllers' SyncStateSet holds another broker than this one (or no longer does)."""
        if peers != self.sync_peers:
            self.sync_peers = peers
            self.apply_sync_state()

    def apply_sync_state(self) -> None:
        """Controller mode, on a master: a SYNC_MASTER with another broker in its SyncStateSet
        answers a put once a slave has it; while no slave is connected it takes no writes at all
        (refused, not stored: a new master may already count its epoch from its own end, and what
        this broker stored past it would be read by consumers, then cut). Alone in the set, it
        acks at once."""
        ctl = self._ctl
        if self.is_slave or self.service is None or not ctl.broker_config.enable_controller_mode:
            return
        store = ctl.store
        wait = self._master_role == "SYNC_MASTER" and self.sync_peers
        store.group_transfer = self.service.group_transfer if wait else None
        fenced = wait and self.service.group_transfer.connection_count == 0
        if fenced and not store.put.slave:
            log.warning("controller mode: no in-sync slave connected: refusing writes until one is "
                        "or the controllers drop it from the SyncStateSet")
        store.put.slave = fenced

    async def become_slave(self) -> None:
        """Refuse writes and drop this broker's own slaves (they will follow the new master)."""
        store = self._ctl.store
        store.put.slave = True
        self.is_slave = True
        store.group_transfer = None
        if self.service is not None:
            # puts still waiting for a slave's ack fail: past the new master's epoch start
            # this log is cut, so no ack may confirm them any more
            self.service.group_transfer.reset()
            for conn in list(self.service.connections):
                conn.writer.close()
        await self.stop_following()

    def follow(self, master_addr: str, ha_addr: str) -> None:
        """Replicate from `ha_addr` and copy the tables of `master_addr` (after become_slave)."""
        ctl = self._ctl
        self.client = HAClient(ctl.store, self._dispatched)
        self.client.set_master(ha_addr)
        self.client.start()
        self.slave_sync = SlaveSynchronize(ctl)
        self.slave_sync.master_addr = master_addr
        ctl._spawn(self.slave_sync.sync_all())
        self._sync_task = asyncio.ensure_future(ctl._every(SYNC_PERIOD, self.slave_sync.sync_all))

    async def shutdown(self) -> None:
        if self._sync_task is not None:
            self._sync_task.cancel()
            await asyncio.gather(self._sync_task, return_exceptions=True)
        if self.client is not None:
            await self.client.shutdown()
        if self.service is not None:
            await self.service.shutdown()

    def ha_server_addr(self) -> str:
        """What the registration announces: this master's bound HA port."""
        ctl = self._ctl
        port = self.service.port if self.service is not None else ctl.listen_port + 1
        return f"{ctl.broker_config.broker_ip1}:{port}"

    def on_registered(self, results: list[RegisterBrokerResult]) -> None:
        """A slave learns its master from the name servers' answers (in controller mode, from
        the controller only)."""
        if not self.is_slave or self._ctl.broker_config.enable_controller_mode:
            return
        for r in results:
            if r.master_addr and self.slave_sync is not None:
                first = self.slave_sync.master_addr is None
                self.slave_sync.master_addr = r.master_addr
                if first:
                    self._ctl._spawn(self.slave_sync.sync_all())
            if r.ha_server_addr and self.client is not None and not self._ctl.store_config.ha_master_address:
                self.client.set_master(r.ha_server_addr)

    def notify_appended(self) -> None:
        if self.service is not None:
            self.service.notify_appended()

    def _dispatched(self, touched: set[tuple[str, int]]) -> None:
        """Replicated messages arrived: wake the long polls of slave reads."""
        store = self._ctl.store
        for topic, queue_id in touched:
            self._ctl.hold_service.notify_message_arriving(
                topic, queue_id, store.get_max_offset_in_queue(topic, queue_id), None)

    # -- status ------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ 5's HARuntimeInfo (GET_BROKER_HA_STATUS): a master's connections, or a slave's
        client. `haStatus`, clusterList and the metrics read it."""
        ctl = self._ctl
        max_offset = ctl.store.max_phy_offset
        connections = []
        if self.service is not None:
            fallbehind = ctl.store_config.ha_slave_fallbehind_max
            for s in self.service.slaves():
                diff = max(0, max_offset - s.acked_offset)
                connections.append({
                    "addr": s.addr, "slaveAckOffset": s.acked_offset, "diff": diff,
                    "inSync": diff < fallbehind, "transferredByteInSecond": s.bytes_per_second,
                    "transferFromWhere": s.transfer_from})
        client: dict[str, Any] = {
            "masterAddr": "", "transferredByteInSecond": 0, "maxOffset": max_offset, "lastReadTimestamp": 0,
            "lastWriteTimestamp": 0, "masterFlushOffset": 0, "isActivated": False}
        if self.client is not None:
            c = self.client
            client.update(masterAddr=c.master_addr or "", transferredByteInSecond=c.rate.value(),
                          lastReadTimestamp=c.last_transfer_ms, lastWriteTimestamp=c.last_write_ms,
                          masterFlushOffset=c.master_offset, isActivated=c.connected)
        return {
            "master": not self.is_slave,
            "masterCommitLogMaxOffset": max_offset if not self.is_slave else 0,
            "inSyncSlaveNums": sum(1 for c in connections if c["inSync"]),
            "haConnectionInfo": connections,
            "haClientRuntimeInfo": client,
        }

    def get_broker_ha_status(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_BROKER_HA_STATUS (907): HARuntimeInfo as JSON."""
        return request.make_response(ResponseCode.SUCCESS, None, None, orjson.dumps(self.runtime_info()))

    def lag_bytes(self) -> int:
        """The replication lag this broker knows: a master's worst slave, a slave's own."""
        if self.service is not None:
            max_offset = self._ctl.store.max_phy_offset
            slaves = self.service.slaves()
            return max((max(0, max_offset - s.acked_offset) for s in slaves), default=0)
        if self.client is not None:
            return self.client.lag_bytes
        return 0
