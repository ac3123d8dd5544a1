"""Where a topic can be written and read: TopicPublishInfo and the route -> queues conversions
(RocketMQ's MQClientInstance.topicRouteData2TopicPublishInfo / ...SubscribeInfo), and the
rate-limited route refresh a client runs when a broker of a route cannot be reached."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from rocketq.codec.bodies import MessageQueue, QueueData, TopicRouteData

__all__ = [
    "PERM_READ",
    "PERM_WRITE",
    "RouteRefresher",
    "TopicPublishInfo",
    "clip_default_route",
    "publish_info_from_route",
    "subscribe_queues_from_route",
]

PERM_WRITE = 0x2
PERM_READ = 0x4
MASTER_ID = 0


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of a topic plus the round-robin position of one producer.

    Mutable on purpose: the position advances on every send (Java's ThreadLocalIndex; one event
    loop needs no thread-local).
    """

    message_queue_list: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_topic_router_info: bool = False
    route_data: TopicRouteData | None = None
    send_which_queue: int = field(default_factory=lambda: random.randrange(1 << 16))

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def next_index(self) -> int:
        self.send_which_queue = index = (self.send_which_queue + 1) & 0x7FFFFFFF
        return index

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin; on a retry, a queue of another broker than the one that just failed."""
        mqs = self.message_queue_list
        if last_broker_name is not None:
            for _ in range(len(mqs)):
                mq = mqs[self.next_index() % len(mqs)]
                if mq.broker_name != last_broker_name:
                    return mq
        return mqs[self.next_index() % len(mqs)]

    def queue_nums_of_broker(self, broker_name: str) -> int:
        """How many write queues the broker has for this topic (0 if it has none)."""
        if self.route_data is None:
            return 0
        for qd in self.route_data.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return 0


def _order_topic_queues(topic: str, conf: str) -> list[MessageQueue]:
    # "brokerA:4;brokerB:4": an ordered topic keeps these exact queues whatever else the route says.
    out: list[MessageQueue] = []
    for item in conf.split(";"):
        name, sep, nums = item.partition(":")
        if sep and nums.strip().isdigit():
            out.extend(MessageQueue(topic, name.strip(), i) for i in range(int(nums)))
    return out


def publish_info_from_route(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """Writable queues: per QueueData with the write perm whose broker has a master, 0..n-1."""
    info = TopicPublishInfo(route_data=route, have_topic_router_info=True)
    if route.order_topic_conf:
        info.message_queue_list = _order_topic_queues(topic, route.order_topic_conf)
        info.order_topic = True
        return info
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not qd.perm & PERM_WRITE or qd.broker_name not in masters:
            continue
        info.message_queue_list.extend(
            MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
        )
    return info


def subscribe_queues_from_route(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues, sorted (topic, broker name, queue id) as rebalancing expects."""
    out = [
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for i in range(qd.read_queue_nums)
    ]
    out.sort()
    return out


def clip_default_route(route: TopicRouteData, default_topic_queue_nums: int) -> TopicRouteData:
    """The auto-create template's route (TBW102) cut to the producer's defaultTopicQueueNums."""
    queue_datas = []
    for qd in route.queue_datas:
        nums = min(default_topic_queue_nums, qd.read_queue_nums)
        queue_datas.append(QueueData(qd.broker_name, nums, nums, qd.perm, qd.topic_sys_flag))
    return TopicRouteData(
        queue_datas=tuple(queue_datas),
        broker_datas=route.broker_datas,
        filter_server_table=route.filter_server_table,
    )


class RouteRefresher:
    """Fetches a topic's route in the background at once, at most once per `interval` seconds per
    topic: a producer or consumer could not reach the broker its route names (a controller-mode
    failover promotes a slave to master at another address), so waiting for the 30 s poll would
    stall it that long."""

    def __init__(self, fetch: Callable[[str], Coroutine[Any, Any, bool]], interval: float = 1.0) -> None:
        self._fetch = fetch
        self._interval = interval
        self._last: dict[str, float] = {}
        self._running: set[asyncio.Task[bool]] = set()

    def request(self, topic: str) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self._last.get(topic, -self._interval) < self._interval:
            return
        self._last[topic] = now
        task = loop.create_task(self._fetch(topic))
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[bool]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # the fetch logs its own failures
