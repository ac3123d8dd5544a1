"""Which brokers are alive, and what the leader decides from it (Java's BrokerHeartbeatManager plus
the master's SyncStateSet upkeep), sans-I/O: every method takes the time as `now_ms`.

Liveness is the leader's own view and is not replicated: a new leader starts by assuming every
registered broker alive for one heartbeat timeout. `decide` turns the view into commands for the
state machine: elect a master when the master is dead (or missing), and grow or shrink the
SyncStateSet as slaves catch up or fall behind. rocketq keeps the set on the controller rather
than having the master ask for it (Java's ALTER_SYNC_STATE_SET from the broker is still served):
a 4.x HA connection does not say which brokerId the slave is, the heartbeats do.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from rocketq.controller.state import ControllerState, ReplicasInfo

# BrokerConfig.controllerHeartBeatTimeoutMills: a broker silent this long is dead.
DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000
# Java's haMaxTimeSlaveNotCatchup: a slave that did not reach where the master was this long ago
# leaves the SyncStateSet.
MAX_TIME_NOT_CATCHUP_MS = 15_000


@dataclass
class Beat:
    address: str
    last_ms: int
    timeout_ms: int
    epoch: int = 0
    max_offset: int = 0
    priority: int = 0
    channel: Any = None
    closed: bool = False

    def alive(self, now_ms: int) -> bool:
        return not self.closed and now_ms - self.last_ms <= self.timeout_ms


class Heartbeats:
    def __init__(self, default_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS) -> None:
        self.default_timeout_ms = default_timeout_ms
        self.beats: dict[tuple[str, int], Beat] = {}
        # each group's master offsets of the last MAX_TIME_NOT_CATCHUP_MS: (time, offset)
        self._master_offsets: dict[str, deque[tuple[int, int]]] = {}
        self._leader_since_ms = 0

    def become_leader(self, now_ms: int) -> None:
        """Start a fresh view: nobody has had time to heartbeat to us yet."""
        self.beats.clear()
        self._master_offsets.clear()
        self._leader_since_ms = now_ms

    def beat(self, broker_name: str, broker_id: int, address: str, now_ms: int, *, epoch: int = 0,
             max_offset: int = 0, timeout_ms: int | None = None, priority: int = 0,
             channel: Any = None) -> None:
        self.beats[(broker_name, broker_id)] = Beat(address, now_ms, timeout_ms or self.default_timeout_ms,
                                                    epoch, max_offset, priority, channel)

    def channel_closed(self, channel: Any) -> bool:
        """A broker's connection closed (a kill -9 does this at once): dead now, not in 10 s."""
        hit = False
        for b in self.beats.values():
            if b.channel is channel and not b.closed:
                b.closed = hit = True
        return hit

    def is_alive(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        b = self.beats.get((broker_name, broker_id))
        if b is not None:
            return b.alive(now_ms)
        return now_ms - self._leader_since_ms <= self.default_timeout_ms  # grace of a new leader

    def alive(self, g: ReplicasInfo, now_ms: int) -> set[int]:
        return {b for b in g.brokers if self.is_alive(g.broker_name, b, now_ms)}

    def live_info(self, g: ReplicasInfo) -> dict[str, list[int]]:
        """The elect policy's inputs as a command carries them: id -> [epoch, maxOffset, priority]."""
        out: dict[str, list[int]] = {}
        for b in g.brokers:
            beat = self.beats.get((g.broker_name, b))
            if beat is not None:
                out[str(b)] = [beat.epoch, beat.max_offset, beat.priority]
        return out

    def decide(self, state: ControllerState, now_ms: int) -> list[dict[str, Any]]:
        """The commands the leader should propose now."""
        commands: list[dict[str, Any]] = []
        for name, g in state.groups.items():
            alive = self.alive(g, now_ms)
            if g.master is None or g.master not in alive:
                if g.master is None and not g.brokers:
                    continue
                if g.master is None and not (g.sync_state_set & alive):
                    continue  # nothing to elect from; a returning member asks itself
                commands.append({"op": "elect", "brokerName": name, "brokerId": None,
                                 "alive": sorted(alive), "live": self.live_info(g)})
                continue
            wanted = self._sync_state_set(g, alive, now_ms)
            if wanted != g.sync_state_set:
                commands.append({"op": "alter_sync_state_set", "brokerName": name, "masterBrokerId": g.master,
                                 "masterEpoch": g.master_epoch, "syncStateSetEpoch": g.sync_state_set_epoch,
                                 "syncStateSet": sorted(wanted)})
        return commands

    def _sync_state_set(self, g: ReplicasInfo, alive: set[int], now_ms: int) -> set[int]:
        assert g.master is not None
        master = self.beats.get((g.broker_name, g.master))
        if master is None:
            return g.sync_state_set  # no report of the master's offset yet: no change
        history = self._master_offsets.setdefault(g.broker_name, deque())
        if not history or history[-1][1] != master.max_offset:
            history.append((now_ms, master.max_offset))
        while len(history) > 1 and history[1][0] <= now_ms - MAX_TIME_NOT_CATCHUP_MS:
            history.popleft()
        # where the master was MAX_TIME_NOT_CATCHUP_MS ago (or its oldest report since)
        bar = history[0][1]
        wanted = {g.master}
        for b in alive - {g.master}:
            beat = self.beats.get((g.broker_name, b))
            if beat is not None and beat.epoch == g.master_epoch and beat.max_offset >= bar:
                wanted.add(b)
        return wanted
