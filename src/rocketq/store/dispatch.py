"""What follows an append: consume-queue entries, the arrival notification, index keys.
(The one-message put does the same inline in PutService.append_message; runs of one-message puts
go through `Dispatcher.dispatch_run`, batches through `dispatch_batch`.)

RocketMQ tails the commit log with a "reput" thread; here the consume-queue entries are written
inline right after the append (one numpy block for a batch), so a pull issued after the put
returns already sees the message, and the arrival listener (the broker's long-poll wake-up) is
called at once. Index keys are only queued: `IndexService.drain` builds them in bulk.

The same module turns a stored record back into its dispatch facts for recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from rocketq.codec.message import MessageConst, MessageSysFlag, tags_code
from rocketq.codec.properties import get_property_bytes, needle
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.index import IndexService
from rocketq.store.model import SingleEntry

log = logging.getLogger("rocketq.store")

ArrivalListener = Callable[[str, int, int, int], None]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_NO_DISPATCH = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
_NOT_DISPATCHED_BITS = (0x4, 0xC)  # the same two, as the sys-flag bits (prepared / rollback)


def is_dispatched(sys_flag: int) -> bool:
    """Prepared and rollback transaction records never reach a consume queue."""
    return sys_flag & MessageSysFlag.TRANSACTION_MASK not in _NO_DISPATCH


def is_indexed(sys_flag: int) -> bool:
    return sys_flag & MessageSysFlag.TRANSACTION_MASK != MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


class Dispatcher:
    def __init__(self, index: IndexService | None, on_arrival: ArrivalListener | None) -> None:
        self.index = index
        self.on_arrival = on_arrival

    def notify(self, topic: str, queue_id: int, max_offset: int, tags: int) -> None:
        try:
            self.on_arrival(topic, queue_id, max_offset, tags)  # type: ignore[misc]
        except Exception:
            log.exception("message arrival listener failed for %s:%d", topic, queue_id)

    def dispatch_batch(
        self, cq: ConsumeQueue, offsets: list[int], sizes: list[int], tags: Sequence[int],
        keys: Sequence[tuple[str, ...]], sys_flag: int, store_ts: int,
    ) -> None:
        if is_dispatched(sys_flag):
            cq.append_many(offsets, sizes, tags)
            if self.on_arrival is not None:
                # one wake-up per distinct tag: a long poll filtering on any of them must wake
                for t in dict.fromkeys(tags):
                    self.notify(cq.topic, cq.queue_id, cq.max_offset, t)
        if self.index is not None and is_indexed(sys_flag):
            self.index.add_batch(cq.topic, keys, offsets, store_ts)

    def dispatch_run(self, run: Sequence[SingleEntry], queues: Sequence[ConsumeQueue],
                     placed: Sequence[tuple[int, int, int]], store_ts: int) -> None:
        """Consume-queue entries, arrival wake-ups and index keys of a run of one-message puts
        just appended (`placed`: offset, size, queue offset of a prefix of `run`)."""
        woken: dict[tuple[ConsumeQueue, int], None] = {}
        keys: list[tuple[str, ...]] = []
        keyed: list[int] = []
        topics: list[str] = []
        for (e_topic, _, _, _, _, tcode, e_keys, sys_flag, _, _, _), cq, (phys, size, _) in zip(
                run, queues, placed, strict=False):  # placed: a prefix
            if sys_flag & 0xC not in _NOT_DISPATCHED_BITS:
                cq.append(phys, size, tcode)
                woken[(cq, tcode)] = None
            if e_keys and sys_flag & 0xC != 0xC:
                keys.append(e_keys)
                keyed.append(phys)
                topics.append(e_topic)
        index = self.index
        if index is not None and keys:
            # the index builder's bulk form: one pending entry for the whole run
            if topics.count(topics[0]) == len(topics):
                index.add_batch(topics[0], keys, keyed, store_ts)
            else:
                index.add_mixed(topics, keys, keyed, store_ts)
        on_arrival = self.on_arrival
        if on_arrival is not None:
            # one wake-up per queue and tag, at the queue's final offset: long polls coalesce
            # their wake-ups the same way. Round-robin over many topics that is one per
            # message, so the listener is called here rather than through `notify`.
            for cq, tags in woken:
                try:
                    on_arrival(cq.topic, cq.queue_id, cq.max_offset, tags)
                except Exception:
                    log.exception("message arrival listener failed for %s:%d", cq.topic, cq.queue_id)


_TAGS = needle(MessageConst.PROPERTY_TAGS).encode()
_DELAY = needle(MessageConst.PROPERTY_DELAY_TIME_LEVEL).encode()
_UNIQ = needle(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX).encode()
_KEYS = needle(MessageConst.PROPERTY_KEYS).encode()


def tags_code_of(topic: str, props: bytes, store_ts: int, delay_levels_ms: Sequence[int]) -> int:
    """The consume-queue tagsCode of a stored record (recovery re-dispatch)."""
    if topic == SCHEDULE_TOPIC:
        # the schedule topic's tagsCode is the delivery time (ScheduleMessageService)
        level = get_property_bytes(props, _DELAY)
        if level is not None and level.isdigit() and delay_levels_ms:
            lv = min(max(int(level), 1), len(delay_levels_ms))
            return store_ts + delay_levels_ms[lv - 1]
        return store_ts
    tags = get_property_bytes(props, _TAGS)
    return tags_code(tags.decode("utf-8", "replace")) if tags is not None else 0


def index_keys_of(props: bytes) -> list[str]:
    """UNIQ_KEY and each KEYS word of a stored record."""
    keys: list[str] = []
    uniq = get_property_bytes(props, _UNIQ)
    if uniq:
        keys.append(uniq.decode("utf-8", "replace"))
    words = get_property_bytes(props, _KEYS)
    if words:
        keys.extend(w for w in words.decode("utf-8", "replace").split(MessageConst.KEY_SEPARATOR) if w)
    return keys
