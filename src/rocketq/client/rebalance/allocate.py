"""Queue allocation strategies for client-side rebalancing (PROTOCOL.md §4.7).

Every consumer of a group runs the same strategy over the same sorted inputs (all queues of a
topic, all consumer ids of the group) and keeps its own share, so the group agrees on an
assignment without talking to each other. The results must therefore match RocketMQ's Java
strategies exactly, or a mixed Java/Python group would double- or under-consume.

Pure functions of their inputs: no I/O, no clock.
"""

from __future__ import annotations

import abc
import bisect
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Protocol

from rocketq.codec.bodies import MessageQueue

__all__ = [
    "AVG",
    "AVG_BY_CIRCLE",
    "CONFIG",
    "CONSISTENT_HASH",
    "MACHINE_ROOM",
    "MACHINE_ROOM_NEARBY",
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "MachineRoomResolver",
    "allocate_strategy",
    "md5_hash",
    "register_strategy",
]

log = logging.getLogger("rocketq.client")

AVG = "AVG"
AVG_BY_CIRCLE = "AVG_BY_CIRCLE"
CONSISTENT_HASH = "CONSISTENT_HASH"
CONFIG = "CONFIG"
MACHINE_ROOM = "MACHINE_ROOM"
MACHINE_ROOM_NEARBY = "MACHINE_ROOM_NEARBY"


class AllocateMessageQueueStrategy(abc.ABC):
    """Base of every strategy: argument checks shared, ``_allocate`` per strategy."""

    name: ClassVar[str]

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        """This consumer's queues. ``mq_all`` and ``cid_all`` come sorted from the rebalancer."""
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all:
            raise ValueError("mqAll is null or mqAll empty")
        if not cid_all:
            raise ValueError("cidAll is null or cidAll empty")
        if current_cid not in cid_all:
            # Our heartbeat has not reached the broker yet (or we were expired): take nothing
            # rather than overlap with consumers the others know about.
            log.info(
                "[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s",
                consumer_group,
                current_cid,
                list(cid_all),
            )
            return []
        return self._allocate(consumer_group, current_cid, mq_all, cid_all)

    @abc.abstractmethod
    def _allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Contiguous ranges; the first ``n mod c`` consumers get one queue more (the default)."""

    name = AVG

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        n, c = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n % c
        if n <= c:
            size = 1
        elif mod > 0 and index < mod:
            size = n // c + 1
        else:
            size = n // c
        start = index * size if mod > 0 and index < mod else index * size + mod
        take = min(size, n - start)
        return list(mq_all[start : start + take]) if take > 0 else []


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Round robin: queue j goes to consumer j mod c."""

    name = AVG_BY_CIRCLE

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        index = list(cid_all).index(current_cid)
        return list(mq_all[index :: len(cid_all)])


def md5_hash(key: str) -> int:
    """RocketMQ's default ring hash: the first 4 bytes of MD5(key) as an unsigned big-endian int."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4], "big")


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """A hash ring with ``virtual_node_cnt`` nodes per consumer: adding or removing one consumer
    moves only the queues next to its nodes."""

    name = CONSISTENT_HASH

    def __init__(self, virtual_node_cnt: int = 10, hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt: {virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function or md5_hash

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        ring: dict[int, str] = {}
        for cid in cid_all:
            for k in range(self.virtual_node_cnt):
                # Java's TreeMap.put: a later node with the same hash replaces the earlier one.
                ring[self.hash_function(f"{cid}-{k}")] = cid
        if not ring:
            return []
        points = sorted(ring)
        owners = [ring[p] for p in points]
        out: list[MessageQueue] = []
        for mq in mq_all:
            i = bisect.bisect_left(points, self.hash_function(str(mq)))
            if owners[i if i < len(points) else 0] == current_cid:
                out.append(mq)
        return out

    def __repr__(self) -> str:
        return f"AllocateMessageQueueConsistentHash(virtual_node_cnt={self.virtual_node_cnt})"


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """A fixed list of queues, whatever the group looks like (each consumer configures its own)."""

    name = CONFIG

    def __init__(self, message_queue_list: Iterable[MessageQueue] = ()) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)


def _java_split_at(text: str) -> list[str]:
    # Java's String.split drops trailing empty strings; the machine-room rule depends on it.
    parts = text.split("@")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class AllocateMessageQueueByMachineRoom(AllocateMessageQueueStrategy):
    """Only queues of brokers named ``<room>@<broker>`` whose room this consumer serves, averaged."""

    name = MACHINE_ROOM

    def __init__(self, consume_idcs: Iterable[str] = ()) -> None:
        self.consume_idcs = set(consume_idcs)

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        index = list(cid_all).index(current_cid)
        mine: list[MessageQueue] = []
        for mq in mq_all:
            parts = _java_split_at(mq.broker_name)
            if len(parts) == 2 and parts[0] in self.consume_idcs:
                mine.append(mq)
        c = len(cid_all)
        mod, rem = divmod(len(mine), c)
        out = mine[mod * index : mod * index + mod]
        if rem > index:
            out.append(mine[index + mod * c])
        return out


class MachineRoomResolver(Protocol):
    def broker_deploy_in(self, message_queue: MessageQueue) -> str: ...

    def consumer_deploy_in(self, client_id: str) -> str: ...


class AllocateMachineRoomNearby(AllocateMessageQueueStrategy):
    """Queues of a room go to the consumers of that room (by ``inner``); the queues of rooms with no
    consumer alive are shared by everybody (by ``inner`` too)."""

    name = MACHINE_ROOM_NEARBY

    def __init__(self, inner: AllocateMessageQueueStrategy, resolver: MachineRoomResolver) -> None:
        self.inner = inner
        self.resolver = resolver

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        mqs_by_room: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {mq}")
            mqs_by_room.setdefault(room, []).append(mq)
        cids_by_room: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.resolver.consumer_deploy_in(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            cids_by_room.setdefault(room, []).append(cid)
        out: list[MessageQueue] = []
        here = self.resolver.consumer_deploy_in(current_cid)
        local = mqs_by_room.pop(here, None)
        if local:
            out += self.inner.allocate(consumer_group, current_cid, local, cids_by_room[here])
        for room in sorted(mqs_by_room):
            if room not in cids_by_room:
                out += self.inner.allocate(consumer_group, current_cid, mqs_by_room[room], cid_all)
        return out

    def __repr__(self) -> str:
        return f"AllocateMachineRoomNearby(inner={self.inner!r})"


_REGISTRY: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    AVG: AllocateMessageQueueAveragely,
    AVG_BY_CIRCLE: AllocateMessageQueueAveragelyByCircle,
    CONSISTENT_HASH: AllocateMessageQueueConsistentHash,
    CONFIG: AllocateMessageQueueByConfig,
    MACHINE_ROOM: AllocateMessageQueueByMachineRoom,
}


def register_strategy(name: str, factory: Callable[[], AllocateMessageQueueStrategy]) -> None:
    """Make ``name`` usable as ``allocate_message_queue_strategy="<name>"``."""
    _REGISTRY[name] = factory


def allocate_strategy(spec: AllocateMessageQueueStrategy | str | None) -> AllocateMessageQueueStrategy:
    """A strategy from an instance, a registered name (``"AVG"``, ...) or None (averagely)."""
    if spec is None:
        return AllocateMessageQueueAveragely()
    if isinstance(spec, AllocateMessageQueueStrategy):
        return spec
    if isinstance(spec, str):
        factory = _REGISTRY.get(spec.upper())
        if factory is None:
            raise ValueError(f"unknown allocate strategy {spec!r}; known: {sorted(_REGISTRY)}")
        return factory()
    if callable(getattr(spec, "allocate", None)):
        return spec  # duck-typed strategy object
    raise TypeError(f"not an allocate strategy: {spec!r}")
