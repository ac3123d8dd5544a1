"""Routes -> publish/subscribe queues, round robin, and the queue selectors (no network)."""

from __future__ import annotations

import random

import pytest

from rocketq.client.message import Message
from rocketq.client.producer.selector import (
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    java_hash_code,
    select_queue,
)
from rocketq.client.route import (
    TopicPublishInfo,
    clip_default_route,
    publish_info_from_route,
    subscribe_queues_from_route,
)
from rocketq.codec.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData
from rocketq.errors import InvalidArgument

ROUTE = TopicRouteData(
    queue_datas=(
        QueueData("b", read_queue_nums=2, write_queue_nums=3, perm=6),
        QueueData("a", read_queue_nums=4, write_queue_nums=2, perm=6),
        QueueData("ro", read_queue_nums=2, write_queue_nums=2, perm=4),  # read only
        QueueData("nomaster", read_queue_nums=1, write_queue_nums=1, perm=6),
    ),
    broker_datas=(
        BrokerData("c", "a", {0: "1.1.1.1:1"}),
        BrokerData("c", "b", {0: "1.1.1.2:1", 1: "1.1.1.3:1"}),
        BrokerData("c", "ro", {0: "1.1.1.4:1"}),
        BrokerData("c", "nomaster", {1: "1.1.1.5:1"}),
    ),
)


def test_publish_queues_need_write_perm_and_a_master() -> None:
    info = publish_info_from_route("T", ROUTE)
    assert info.ok() and info.have_topic_router_info and not info.order_topic
    assert info.message_queue_list == [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1),
                                       MessageQueue("T", "b", 0), MessageQueue("T", "b", 1),
                                       MessageQueue("T", "b", 2)]
    assert info.queue_nums_of_broker("b") == 3 and info.queue_nums_of_broker("zz") == 0


def test_subscribe_queues_need_read_perm_and_are_sorted() -> None:
    queues = subscribe_queues_from_route("T", ROUTE)
    assert queues == sorted(queues)
    assert [(q.broker_name, q.queue_id) for q in queues] == [
        ("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1), ("nomaster", 0), ("ro", 0), ("ro", 1)]


def test_order_topic_conf_fixes_the_queues() -> None:
    route = TopicRouteData(queue_datas=ROUTE.queue_datas, broker_datas=ROUTE.broker_datas,
                           order_topic_conf="a:2;b:1")
    info = publish_info_from_route("T", route)
    assert info.order_topic
    assert info.message_queue_list == [MessageQueue("T", "a", 0), MessageQueue("T", "a", 1),
                                       MessageQueue("T", "b", 0)]


def test_default_route_is_clipped_to_default_topic_queue_nums() -> None:
    tbw = TopicRouteData(queue_datas=(QueueData("a", 8, 8, 7), QueueData("b", 2, 2, 7)),
                         broker_datas=ROUTE.broker_datas[:2])
    clipped = clip_default_route(tbw, 4)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in clipped.queue_datas] == [
        ("a", 4, 4, 7), ("b", 2, 2, 7)]
    assert len(publish_info_from_route("T", clipped).message_queue_list) == 6


def test_round_robin_and_retry_on_another_broker() -> None:
    info = publish_info_from_route("T", ROUTE)
    first = [info.select_one_message_queue() for _ in range(10)]
    assert first[:5] != first[5:] or set(first) == set(info.message_queue_list)
    assert set(first) == set(info.message_queue_list)
    assert {info.select_one_message_queue("a").broker_name for _ in range(10)} == {"b"}
    single = TopicPublishInfo([MessageQueue("T", "a", 0)])
    assert single.select_one_message_queue("a") == MessageQueue("T", "a", 0)  # no other broker: same one
    assert not TopicPublishInfo().ok()


@pytest.mark.parametrize(("arg", "java"), [
    ("hello", 99162322), ("", 0), ("order-1", -1207111310), ("\u00e9t\u00e9", 227742), (42, 42), (-7, -7),
    (2**40 + 5, 261), (True, 1231), (False, 1237),
])
def test_java_hash_code(arg: object, java: int) -> None:
    assert java_hash_code(arg) == java


def test_hash_selector_is_stable_and_java_compatible() -> None:
    mqs = [MessageQueue("T", "a", i) for i in range(8)]
    sel = SelectMessageQueueByHash()
    msg = Message("T", b"x")
    # Java: abs("order-1".hashCode() % 8) == abs(-1207111310 % 8) (Java's % keeps the sign) == 6
    assert sel.select(mqs, msg, "order-1") == mqs[6]
    assert sel.select(mqs, msg, 13) == mqs[5]
    assert all(sel.select(mqs, msg, f"k{i}") == sel.select(mqs, msg, f"k{i}") for i in range(50))
    rnd = SelectMessageQueueByRandom(random.Random(1))
    assert {rnd.select(mqs, msg, None) for _ in range(200)} == set(mqs)
    assert select_queue(lambda m, _msg, a: m[a], mqs, msg, 3) == mqs[3]
    with pytest.raises(InvalidArgument):
        select_queue(lambda m, _msg, a: None, mqs, msg, 3)
