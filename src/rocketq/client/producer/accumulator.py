"""When the producer's automatic batching sends what: the bookkeeping of RocketMQ 5's
ProduceAccumulator, without I/O, timers or futures (the driver is ``auto_batch.py``).

Messages are gathered per *lane* (one queue of one topic, for one ``waitStoreMsgOK``). Unlike
Java's accumulator, which holds every message up to ``batchMaxDelayMs``, a lane holds nothing
while it has no request in flight: the first message goes out at once, alone, so an idle producer
sends with no added latency. Only messages that arrive while a request of their lane is in flight
are gathered; they go out as one batch when that request ends, when they reach ``batch_max_bytes``,
when the oldest has waited ``batch_max_delay_ms`` (the driver's timer calls ``expire``), or when
the producer holds ``total_batch_max_bytes`` in all lanes together (then a lane stops holding and
sends what it has at once: Java sends directly instead of holding, and a lane sending its own
gathered messages keeps a queue's order where a direct send would overtake them).

A lane of unordered messages may have up to ``PIPELINE`` requests in flight (its ``limit``): with
one, producer and broker take turns (the producer gathers while the broker stores, then waits
while it answers) and neither is ever busy for long; with a few, the producer encodes the next
batch while the broker stores the previous one. The driver calls ``ready`` at the end of the event
loop's turn in which messages were gathered, which sends them while the lane has room, spread over
the free requests (so the messages in flight do not pile into one request and the turns come
back). A lane of ordered messages (a selector or a fixed queue) keeps a limit of one: two requests
in flight to one queue could be stored in either order after a retry.

Everything here is plain values, so the rules are unit-tested without a broker.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final, Generic, TypeVar

from rocketq.errors import InvalidArgument

__all__ = [
    "BATCH_MAX_BYTES",
    "BATCH_MAX_DELAY_MS",
    "PIPELINE",
    "TOTAL_BATCH_MAX_BYTES",
    "Accumulator",
    "Lane",
    "check_limits",
]

# Java's defaults (ProduceAccumulator: holdMs, holdSize, totalHoldSize).
BATCH_MAX_DELAY_MS: Final = 10
BATCH_MAX_BYTES: Final = 32 * 1024
TOTAL_BATCH_MAX_BYTES: Final = 32 * 1024 * 1024
# Requests in flight per lane of unordered messages. Two already let both sides work at once; a
# few more keep the broker busy while the producer's turn is long (a large window).
PIPELINE: Final = 4
# Gathered items are not spread over requests in smaller parts than this: a request costs the
# broker about as much as tens of small messages.
MIN_PART: Final = 32

T = TypeVar("T")


def check_limits(delay_ms: int, max_bytes: int, total_max_bytes: int) -> None:
    """Java's bounds for the three knobs (InvalidArgument, as its IllegalArgumentException)."""
    if not 0 < delay_ms <= 30_000:
        raise InvalidArgument(f"batch_max_delay_ms expect between 1ms and 30s, but get {delay_ms}!")
    if not 0 < max_bytes <= 2 * 1024 * 1024:
        raise InvalidArgument(f"batch_max_bytes expect between 1B and 2MB, but get {max_bytes}!")
    if total_max_bytes <= 0:
        raise InvalidArgument(f"total_batch_max_bytes must bigger then 0, but get {total_max_bytes}!")


class Lane(Generic[T]):
    """One queue's gathering state: requests in flight and the items waiting for the next one.

    ``generation`` counts the batches cut from this lane, so a timer armed for one batch can tell
    that its batch has already gone. ``limit`` is the most requests the lane has in flight at once.
    """

    __slots__ = ("generation", "inflight", "items", "key", "limit", "nbytes", "wire")

    def __init__(self, key: Hashable, limit: int = 1) -> None:
        self.key = key
        self.limit = limit
        self.inflight = 0
        self.items: list[T] = []
        self.nbytes = 0  # the bodies' bytes (what the bounds count, as Java's messagesSize)
        self.wire = 0  # the encoded items' bytes (what the request body will be)
        self.generation = 0


class Accumulator(Generic[T]):
    """The lanes of one producer and the bytes they hold together.

    The driver sends an item at once when its lane is idle (``not lane.inflight``) and calls
    ``start``; otherwise ``offer`` gathers it and returns the lane's items to send now as one
    request when a bound was reached (else None). ``done`` is called when a request of a lane
    ended and returns the gathered items to send next; ``expire`` cuts a lane's batch when its
    oldest item waited too long. Every list returned counts as one request in flight until its
    ``done``, as does every ``start``.
    """

    __slots__ = ("held", "lanes", "max_bytes", "max_wire_bytes", "total_max_bytes")

    def __init__(
        self, max_bytes: int = BATCH_MAX_BYTES, total_max_bytes: int = TOTAL_BATCH_MAX_BYTES,
        max_wire_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.max_bytes = max_bytes
        self.total_max_bytes = total_max_bytes
        # a batch request's body may not pass the producer's max_message_size: tiny bodies
        # with their properties can, long before their bodies reach max_bytes
        self.max_wire_bytes = max_wire_bytes
        self.lanes: dict[Hashable, Lane[T]] = {}
        self.held = 0  # bytes gathered in all lanes, not yet sent

    def lane(self, key: Hashable, limit: int = 1) -> Lane[T]:
        lane = self.lanes.get(key)
        if lane is None:
            lane = self.lanes[key] = Lane(key, limit)
        return lane

    def start(self, lane: Lane[T]) -> None:
        """A request of ``lane`` left without gathering (the lane was idle: ``not lane.inflight``)."""
        lane.inflight += 1

    def offer(self, lane: Lane[T], item: T, size: int, wire: int = 0) -> list[T] | None:
        """Gather ``item`` (a body of ``size`` bytes, ``wire`` bytes encoded) behind the lane's
        request in flight. When ``item`` would take the gathered items past ``max_wire_bytes``,
        they are returned without it and it waits for the next batch."""
        if lane.items and lane.wire + wire > self.max_wire_bytes:
            batch = self.cut(lane)
            self._gather(lane, item, size, wire)
            return batch
        self._gather(lane, item, size, wire)
        if lane.nbytes >= self.max_bytes or self.held >= self.total_max_bytes:
            return self.cut(lane)
        return None

    def _gather(self, lane: Lane[T], item: T, size: int, wire: int) -> None:
        lane.items.append(item)
        lane.nbytes += size
        lane.wire += wire
        self.held += size

    def done(self, lane: Lane[T]) -> list[T] | None:
        lane.inflight -= 1
        if lane.items:
            return self.cut(lane)
        if not lane.inflight:
            # an idle lane is forgotten, so a producer of many topics keeps no state for old ones
            self.lanes.pop(lane.key, None)
        return None

    def ready(self, lane: Lane[T]) -> list[list[T]]:
        """The lane's gathered items as the requests to send now, while it has room for more in
        flight: spread over the free requests, none smaller than ``MIN_PART`` items (each list
        counts as one request in flight). Empty when nothing is gathered or the lane is full."""
        free = lane.limit - lane.inflight
        if not lane.items or free <= 0:
            return []
        parts = min(free, len(lane.items) // MIN_PART) or 1
        items = self.cut(lane)
        if parts == 1:
            return [items]
        lane.inflight += parts - 1
        step, extra = divmod(len(items), parts)
        out = []
        start = 0
        for i in range(parts):
            end = start + step + (i < extra)
            out.append(items[start:end])
            start = end
        return out

    def expire(self, lane: Lane[T], generation: int) -> list[T] | None:
        if lane.generation != generation or not lane.items:
            return None  # that batch went already
        return self.cut(lane)

    def cut(self, lane: Lane[T]) -> list[T]:
        """The lane's gathered items, to send now (one more request in flight)."""
        items = lane.items
        lane.items = []
        self.held -= lane.nbytes
        lane.nbytes = lane.wire = 0
        lane.generation += 1
        lane.inflight += 1
        return items
