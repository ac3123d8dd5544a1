"""PullAPIWrapper: the one pull path of the client (RocketMQ's PullAPIWrapper).

Every reader of a queue goes through it: the push and lite-pull consumers, the admin client's
queue reads and the Spark connector. It

* picks the broker of a queue: the master, or the node the broker's last answer suggested
  (``suggestWhichBrokerId``, remembered per queue), refreshing the route once when the broker
  is unknown;
* builds the PULL_MESSAGE header (the subscription text rides along only with the SUBSCRIPTION
  flag; a slave never gets the COMMIT_OFFSET flag, as it cannot store offsets);
* sends it through ``MQClientAPI.pull_message``, which answers a ``PullResultExt`` with the
  records still undecoded (bulk readers stop here);
* processes the answer: records decoded in bulk, filtered by tag on this side (the broker
  filters by tag hash only), stamped with MIN_OFFSET / MAX_OFFSET, bodies inflated;
* turns a timestamp into the offset of the first message stored at or after it
  (``offset_at_or_after``), whatever the broker's SEARCH_OFFSET_BY_TIMESTAMP answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, Protocol

from rocketq.client.api import (
    PULL_SYS_FLAG_COMMIT_OFFSET,
    PULL_SYS_FLAG_SUBSCRIPTION,
    decode_records,
    decompressed,
)
from rocketq.client.consumer.subscription import build_subscription
from rocketq.client.message import MessageExt, MessageQueue, PullResult, PullResultExt, PullStatus
from rocketq.codec.bodies import SubscriptionData
from rocketq.codec.headers import PullMessageRequestHeader
from rocketq.codec.message import MessageSysFlag
from rocketq.errors import BrokerNotFound

if TYPE_CHECKING:
    from rocketq.client.api import MQClientAPI

__all__ = [
    "BrokerDirectory",
    "PullAPIWrapper",
    "decode_pull_result",
    "one_off_subscription",
    "tag_filter",
]

MASTER_ID: Final = 0
# Messages read on each side of a broker's answer to SEARCH_OFFSET_BY_TIMESTAMP.
TIME_SEARCH_WINDOW: Final = 16
_COMPRESSED: Final = MessageSysFlag.COMPRESSED_FLAG
_SYS_FLAG = attrgetter("sys_flag")
_FOUND: Final = PullStatus.FOUND


class BrokerDirectory(Protocol):
    """Where a pull finds its broker (the MQClientInstance's broker table and route refresh)."""

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, only_this_broker: bool = False
    ) -> str | None: ...

    async def update_topic_route_info_from_name_server(self, topic: str) -> bool: ...


def tag_filter(sub: SubscriptionData) -> frozenset[str] | None:
    """The tags a TAG subscription keeps on the client side; None keeps everything."""
    if not sub.tags_set or sub.class_filter_mode:
        return None
    return frozenset(sub.tags_set)


def one_off_subscription(topic: str, expression: str = "*") -> SubscriptionData:
    """The subscription of a reader outside any consumer group (admin, Spark): sent with every
    pull (SUBSCRIPTION flag), so its version means nothing and stays 0 on the wire."""
    return dataclasses.replace(build_subscription(topic, expression), sub_version=0)


class _PullResultBuilder:
    # As api._SendResultBuilder: a frozen dataclass stores each field through
    # object.__setattr__; filling a twin with the same slots and retagging it gives the same
    # frozen PullResult for a fraction of that, once per pull.
    __slots__ = PullResult.__slots__


def _pull_result(
    status: PullStatus, next_begin: int, min_offset: int, max_offset: int, messages: list[MessageExt],
    suggest: int,
) -> PullResult:
    r: Any = object.__new__(_PullResultBuilder)
    r.status = status
    r.next_begin_offset = next_begin
    r.min_offset = min_offset
    r.max_offset = max_offset
    r.messages = messages
    r.suggest_which_broker_id = suggest
    r.__class__ = PullResult
    return r  # type: ignore[no-any-return]


def decode_pull_result(
    ext: PullResultExt,
    addr: str | None = None,
    tags: Collection[str] | None = None,
    decompress: bool = True,
) -> PullResult:
    """The PullResult of an answer: records decoded, filtered by ``tags``, stamped, inflated."""
    status, next_begin, min_offset, max_offset, suggest, body = ext
    messages: list[MessageExt] = []
    if status is _FOUND:
        if len(body):
            # MIN_OFFSET / MAX_OFFSET ride along as properties text appended to each record's (the
            # later key wins), so no message pays for a dict unless someone reads its properties.
            # The leading separator closes a stored string written without its trailing one.
            stamp = f"\x02MIN_OFFSET\x01{min_offset}\x02MAX_OFFSET\x01{max_offset}\x02"
            messages = decode_records(body, addr, stamp)
        if tags:
            messages = [m for m in messages if m.tags in tags]
        if decompress and any(map(_COMPRESSED.__and__, map(_SYS_FLAG, messages))):
            messages = [decompressed(m) for m in messages]
    return _pull_result(status, next_begin, min_offset, max_offset, messages, suggest)


class PullAPIWrapper:
    """The pulls of one consumer group through one ``MQClientAPI``.

    ``brokers`` (the MQClientInstance) resolves broker names to addresses; without it every pull
    names its ``addr`` (the admin client and Spark plan addresses themselves).
    """

    def __init__(
        self,
        api: MQClientAPI,
        consumer_group: str,
        brokers: BrokerDirectory | None = None,
    ) -> None:
        self.api = api
        self.consumer_group = consumer_group
        self.brokers = brokers
        self.decompress = api.config.decode_decompress_body
        # queue -> broker id the broker suggested pulling it from next (absent: the master)
        self.pull_from_which_node_table: dict[MessageQueue, int] = {}

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        return self.pull_from_which_node_table.get(mq, MASTER_ID)

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        table = self.pull_from_which_node_table
        if broker_id != MASTER_ID:
            table[mq] = broker_id
        elif table:  # the common case, every queue on its master, costs no lookup
            table.pop(mq, None)

    async def find_broker(self, mq: MessageQueue) -> tuple[str, bool]:
        """(address, is a slave) of the node to pull ``mq`` from; ``BrokerNotFound`` if the route
        names no address for its broker even after a refresh."""
        brokers = self.brokers
        if brokers is None:
            raise BrokerNotFound(f"The broker[{mq.broker_name}] not exist", topic=mq.topic)
        broker_id = self.recalculate_pull_from_which_node(mq)
        addr = brokers.find_broker_address_in_subscribe(mq.broker_name, broker_id)
        if addr is None:
            await brokers.update_topic_route_info_from_name_server(mq.topic)
            addr = brokers.find_broker_address_in_subscribe(mq.broker_name, broker_id)
            if addr is None:
                raise BrokerNotFound(f"The broker[{mq.broker_name}] not exist", topic=mq.topic)
        master = addr if broker_id == MASTER_ID else brokers.find_broker_address_in_subscribe(
            mq.broker_name, MASTER_ID, True
        )
        return addr, addr != master

    async def pull_kernel(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        sys_flag: int,
        timeout: float,
        *,
        commit_offset: int = 0,
        suspend_timeout_millis: int = 0,
        max_msg_bytes: int | None = None,
        addr: str | None = None,
    ) -> tuple[str, PullResultExt]:
        """One PULL_MESSAGE of ``mq`` from ``offset``: (the address asked, its undecoded answer).

        ``timeout`` must cover the long-poll hold (``suspend_timeout_millis``) plus the round trip.
        """
        if addr is None:
            addr, slave = await self.find_broker(mq)
            if slave:
                sys_flag &= ~PULL_SYS_FLAG_COMMIT_OFFSET
        header = PullMessageRequestHeader(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=suspend_timeout_millis,
            sub_version=sub.sub_version,
            subscription=sub.sub_string if sys_flag & PULL_SYS_FLAG_SUBSCRIPTION else None,
            expression_type=sub.expression_type,
            max_msg_bytes=max_msg_bytes,
            broker_name=mq.broker_name,
        )
        return addr, await self.api.pull_message(addr, header, timeout)

    def process_pull_result(
        self, mq: MessageQueue, ext: PullResultExt, addr: str | None, tags: Collection[str] | None
    ) -> PullResult:
        """Remember the broker's suggestion for ``mq``, then decode (``decode_pull_result``)."""
        suggest = ext.suggest_which_broker_id
        if suggest or self.pull_from_which_node_table:  # else: on the master, and staying there
            self.update_pull_from_which_node(mq, suggest)
        return decode_pull_result(ext, addr, tags, self.decompress)

    async def pull(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        sys_flag: int,
        timeout: float,
        *,
        tags: Collection[str] | None = None,
        addr: str | None = None,
    ) -> PullResult:
        """One pull that neither holds nor commits (admin reads): ``pull_kernel`` then
        ``process_pull_result``; ``tags`` default to the subscription's."""
        addr, ext = await self.pull_kernel(mq, sub, offset, max_nums, sys_flag, timeout, addr=addr)
        return self.process_pull_result(mq, ext, addr, tag_filter(sub) if tags is None else tags)

    async def offset_at_or_after(self, mq: MessageQueue, addr: str, timestamp: int, timeout: float) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp`` ms (the max
        offset when there is none), read from ``addr``.

        SEARCH_OFFSET_BY_TIMESTAMP is only a guess: a 4.x broker answers the message *nearest*
        the time (one side or the other), any one of several stored in the same millisecond,
        and the last message rather than the end when the time is past it. The messages around
        the guess are read (one pull of ``2 * TIME_SEARCH_WINDOW`` in the common case) and the
        edge is taken from their store timestamps.
        """
        guess = await self.api.search_offset(addr, mq, timestamp, timeout)
        sub = one_off_subscription(mq.topic)
        start = max(guess - TIME_SEARCH_WINDOW, 0)
        floor = 0  # the queue's min offset, once a pull told it
        seen_before = False  # a message stored before ``timestamp`` sits right before ``start``
        while True:
            r = await self.pull(mq, sub, start, 2 * TIME_SEARCH_WINDOW, PULL_SYS_FLAG_SUBSCRIPTION, timeout,
                                tags=(), addr=addr)
            if r.status is PullStatus.OFFSET_ILLEGAL and start < r.min_offset and floor < r.min_offset:
                floor = start = r.min_offset  # the window began below the queue's head
                continue
            if not r.messages:  # past the end, or nothing readable: the end is the answer
                return max(min(r.next_begin_offset, r.max_offset), start)
            first = next((m for m in r.messages if m.store_timestamp >= timestamp), None)
            if first is None:  # everything read is older: go on after it
                seen_before = True
                start = r.next_begin_offset
                continue
            if first is not r.messages[0] or seen_before or start <= max(floor, r.min_offset):
                return first.queue_offset
            # the window opened on a message already late enough: the edge may lie further back
            floor = r.min_offset
            start = max(start - 2 * TIME_SEARCH_WINDOW, floor)
