"""The controller's replicated state (RocketMQ 5's ReplicasInfoManager), sans-I/O.

One `ReplicasInfo` per broker group (brokerName): the members' ids and addresses, the master, the
master epoch and the SyncStateSet with its own epoch. Every change is a plain-dict *command* that
`apply` executes; the Raft layer (`raft.py`) replicates the commands in one order to every
controller, so `apply` must be deterministic: it reads nothing but the command and the state (no
clock, no randomness). Whether a broker is alive is not replicated (Java keeps it per controller
too): `heartbeats.py` holds it on the leader, which turns what it sees into commands.

The elect policy (Java's DefaultElectPolicy) is a pure function of the candidates' live info.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# Java's ResponseCode values for the controller (2000-2016).
FENCED_MASTER_EPOCH = 2000
FENCED_SYNC_STATE_SET_EPOCH = 2001
INVALID_MASTER = 2002
INVALID_REPLICAS = 2003
MASTER_NOT_AVAILABLE = 2004
INVALID_REQUEST = 2005
BROKER_NOT_ALIVE = 2006
NOT_LEADER = 2007
BROKER_METADATA_NOT_EXIST = 2008
INVALID_CLEAN_BROKER_METADATA = 2009
BROKER_NEED_TO_BE_REGISTERED = 2010
MASTER_STILL_EXIST = 2011
ELECT_MASTER_FAILED = 2012
BROKER_ID_INVALID = 2014


@dataclass
class ReplicasInfo:
    """One broker group: Java's BrokerReplicaInfo + SyncStateInfo."""

    cluster: str
    broker_name: str
    brokers: dict[int, str] = field(default_factory=dict)  # brokerId -> broker address
    ha_addrs: dict[int, str] = field(default_factory=dict)  # brokerId -> HA address (rocketq's)
    check_codes: dict[int, str] = field(default_factory=dict)  # who applied for each id
    next_id: int = 1
    master: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    @property
    def first_time_for_elect(self) -> bool:
        return self.master_epoch == 0

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokerName": self.broker_name,
                "brokers": {str(k): v for k, v in self.brokers.items()},
                "haAddrs": {str(k): v for k, v in self.ha_addrs.items()},
                "checkCodes": {str(k): v for k, v in self.check_codes.items()},
                "nextId": self.next_id, "master": self.master, "masterEpoch": self.master_epoch,
                "syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReplicasInfo:
        def ids(m: dict[str, str]) -> dict[int, str]:
            return {int(k): v for k, v in m.items()}

        return cls(d["cluster"], d["brokerName"], ids(d["brokers"]), ids(d["haAddrs"]), ids(d["checkCodes"]),
                   d["nextId"], d["master"], d["masterEpoch"], set(d["syncStateSet"]), d["syncStateSetEpoch"])


@dataclass(frozen=True, slots=True)
class Result:
    """What a command answered: a Java response code (0 = success), a remark and the values."""

    code: int = 0
    remark: str = ""
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == 0


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What the elect policy knows of a candidate (Java's BrokerLiveInfo)."""

    broker_id: int
    epoch: int = 0
    max_offset: int = 0
    election_priority: int = 0


def elect(candidates: Iterable[int], old_master: int | None, prefer: int | None,
          live: dict[int, LiveInfo]) -> int | None:
    """DefaultElectPolicy.tryElect over the alive `candidates` (the caller filters liveness):
    the old master if it is still a candidate, else the preferred one, else the most advanced
    (highest epoch, then max offset, then the lowest election priority, then the lowest id)."""
    brokers = set(candidates)
    if not brokers:
        return None
    if old_master in brokers and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in brokers else None

    def rank(b: int) -> tuple[int, int, int, int]:
        info = live.get(b, LiveInfo(b))
        return (-info.epoch, -info.max_offset, info.election_priority, b)

    return min(brokers, key=rank)


class ControllerState:
    """Every broker group; `apply(command)` is the only mutator."""

    def __init__(self) -> None:
        self.groups: dict[str, ReplicasInfo] = {}

    # -- reading ---------------------------------------------------------------------------------

    def group(self, broker_name: str) -> ReplicasInfo | None:
        return self.groups.get(broker_name)

    def replica_info(self, broker_name: str) -> Result:
        g = self.groups.get(broker_name)
        if g is None:
            return Result(BROKER_METADATA_NOT_EXIST, f"broker group {broker_name} is not known")
        return Result(0, "", _master_values(g))

    def next_broker_id(self, broker_name: str) -> int:
        g = self.groups.get(broker_name)
        return g.next_id if g is not None else 1

    def to_dict(self) -> dict[str, Any]:
        return {name: g.to_dict() for name, g in self.groups.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ControllerState:
        s = cls()
        s.groups = {name: ReplicasInfo.from_dict(g) for name, g in d.items()}
        return s

    # -- commands --------------------------------------------------------------------------------

    def apply(self, command: dict[str, Any]) -> Result:
        op = command.get("op")
        handler = getattr(self, f"_apply_{op}", None)
        if handler is None:
            return Result(INVALID_REQUEST, f"unknown controller command {op!r}")
        result: Result = handler(command)
        return result

    def _apply_apply_broker_id(self, c: dict[str, Any]) -> Result:
        """CONTROLLER_APPLY_BROKER_ID: a broker claims an id; the same check code may claim again."""
        name, broker_id, code = c["brokerName"], int(c["brokerId"]), c.get("checkCode", "")
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = ReplicasInfo(c["cluster"], name)
        owner = g.check_codes.get(broker_id)
        if broker_id < 1 or (owner is not None and owner != code):
            return Result(BROKER_ID_INVALID, f"broker id {broker_id} of {name} is taken or invalid")
        g.check_codes[broker_id] = code
        g.next_id = max(g.next_id, broker_id + 1)
        return Result(0, "", {"brokerId": broker_id})

    def _apply_register(self, c: dict[str, Any]) -> Result:
        """CONTROLLER_REGISTER_BROKER: the broker's (new) address; answers the master."""
        name, broker_id = c["brokerName"], int(c["brokerId"])
        g = self.groups.get(name)
        if g is None or broker_id not in g.check_codes:
            return Result(BROKER_NEED_TO_BE_REGISTERED, f"{name}/{broker_id} has not applied for its id")
        g.brokers[broker_id] = c["address"]
        if c.get("haAddress"):
            g.ha_addrs[broker_id] = c["haAddress"]
        return Result(0, "", _master_values(g))

    def _apply_elect(self, c: dict[str, Any]) -> Result:
        """CONTROLLER_ELECT_MASTER, and the leader's own election when a master stops heartbeating.

        `alive` is the leader's view of the live members and `live` their offsets and epochs, both
        taken into the command, so every controller applies the same choice."""
        name = c["brokerName"]
        g = self.groups.get(name)
        if g is None:
            return Result(BROKER_NEED_TO_BE_REGISTERED, f"broker group {name} is not registered")
        alive = {int(b) for b in c.get("alive", [])}
        live = {int(k): LiveInfo(int(k), *v) for k, v in c.get("live", {}).items()}
        requester = c.get("brokerId")
        requester = int(requester) if requester is not None and int(requester) >= 0 else None
        new_master: int | None = None
        if g.first_time_for_elect and requester is not None and requester in g.brokers:
            new_master = requester
        if new_master is None:
            prefer = requester if c.get("designate") else None
            new_master = elect(g.sync_state_set & alive, g.master, prefer, live)
            if new_master is None and c.get("unclean"):
                new_master = elect(set(g.brokers) & alive, g.master, prefer, live)
        if new_master is not None and new_master == g.master:
            return Result(MASTER_STILL_EXIST, f"master {new_master} of {name} is alive", _master_values(g))
        if new_master is not None:
            g.master = new_master
            g.master_epoch += 1
            g.sync_state_set = {new_master}
            g.sync_state_set_epoch += 1
            return Result(0, "", _master_values(g))
        if requester is None:  # the leader's own election: the master is gone, no one can follow
            g.master = None
            return Result(MASTER_NOT_AVAILABLE, f"master of {name} is down and no replica can take over")
        return Result(ELECT_MASTER_FAILED, f"failed to elect a master for {name}")

    def _apply_alter_sync_state_set(self, c: dict[str, Any]) -> Result:
        """CONTROLLER_ALTER_SYNC_STATE_SET: only the current master, with the current epochs."""
        name = c["brokerName"]
        g = self.groups.get(name)
        if g is None:
            return Result(BROKER_NEED_TO_BE_REGISTERED, f"broker group {name} is not registered")
        new_set = {int(b) for b in c["syncStateSet"]}
        if g.master is None or int(c["masterBrokerId"]) != g.master:
            return Result(INVALID_MASTER, f"{c['masterBrokerId']} is not the master of {name}")
        if int(c["masterEpoch"]) != g.master_epoch:
            return Result(FENCED_MASTER_EPOCH, f"master epoch {c['masterEpoch']} is not {g.master_epoch}")
        if int(c["syncStateSetEpoch"]) != g.sync_state_set_epoch:
            return Result(FENCED_SYNC_STATE_SET_EPOCH,
                          f"sync state set epoch {c['syncStateSetEpoch']} is not {g.sync_state_set_epoch}")
        if g.master not in new_set or not new_set <= set(g.brokers):
            return Result(INVALID_REPLICAS, f"{sorted(new_set)} is not a valid SyncStateSet of {name}")
        if new_set != g.sync_state_set:
            g.sync_state_set = new_set
            g.sync_state_set_epoch += 1
        return Result(0, "", {"syncStateSet": sorted(g.sync_state_set),
                              "syncStateSetEpoch": g.sync_state_set_epoch})

    def _apply_clean(self, c: dict[str, Any]) -> Result:
        """CLEAN_BROKER_DATA: forget a group, or some of its members."""
        name = c["brokerName"]
        g = self.groups.get(name)
        if g is None:
            return Result(INVALID_CLEAN_BROKER_METADATA, f"Broker {name} is not known: nothing to clean")
        ids = c.get("brokerIds")
        if not ids:
            del self.groups[name]
            return Result()
        for b in map(int, ids):
            g.brokers.pop(b, None)
            g.ha_addrs.pop(b, None)
            g.check_codes.pop(b, None)
            g.sync_state_set.discard(b)
            if g.master == b:
                g.master = None
        return Result()


def _master_values(g: ReplicasInfo) -> dict[str, Any]:
    m = g.master
    return {"masterBrokerId": m, "masterAddress": g.brokers.get(m, "") if m is not None else "",
            "masterHaAddress": g.ha_addrs.get(m, "") if m is not None else "",
            "masterEpoch": g.master_epoch, "syncStateSet": sorted(g.sync_state_set),
            "syncStateSetEpoch": g.sync_state_set_epoch}
