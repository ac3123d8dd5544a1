"""Latency fault tolerance (MQFaultStrategy) with a controlled clock."""

from __future__ import annotations

from collections import Counter

import pytest

from rocketq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy
from rocketq.client.route import TopicPublishInfo
from rocketq.codec.bodies import MessageQueue, QueueData, TopicRouteData


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def info(*brokers: str, queues: int = 2) -> TopicPublishInfo:
    mqs = [MessageQueue("T", b, q) for b in brokers for q in range(queues)]
    route = TopicRouteData(queue_datas=tuple(QueueData(b, queues, queues, 6) for b in brokers))
    return TopicPublishInfo(mqs, have_topic_router_info=True, route_data=route)


@pytest.mark.parametrize(("latency", "penalty"), [
    (0, 0), (49, 0), (100, 0), (549, 0), (550, 30_000), (999, 30_000), (1000, 60_000),
    (2000, 120_000), (3000, 180_000), (14_999, 180_000), (15_000, 600_000), (99_999, 600_000),
])
def test_penalty_table(latency: int, penalty: int) -> None:
    assert MQFaultStrategy(True).not_available_for(latency) == penalty


def test_disabled_strategy_only_avoids_the_last_broker() -> None:
    s = MQFaultStrategy(False)
    i = info("a", "b")
    s.update_fault_item("a", 99_999, True)  # ignored when disabled
    assert len(s.tolerance) == 0
    picks = [s.select_one_message_queue(i, "a").broker_name for _ in range(20)]
    assert set(picks) == {"b"}
    assert {s.select_one_message_queue(i, None).broker_name for _ in range(20)} == {"a", "b"}


def test_failed_broker_is_avoided_until_its_penalty_ends() -> None:
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock)
    i = info("a", "b", "c")
    s.update_fault_item("b", 10, isolation=True)  # a failure counts as 30 s latency -> 10 min
    assert {s.select_one_message_queue(i, None).broker_name for _ in range(60)} == {"a", "c"}
    clock.now += 599_999
    assert not s.tolerance.is_available("b")
    clock.now += 1
    assert s.tolerance.is_available("b")
    assert "b" in {s.select_one_message_queue(i, None).broker_name for _ in range(60)}


def test_slow_broker_is_avoided_and_fast_answers_clear_it() -> None:
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock)
    i = info("a", "b")
    s.update_fault_item("a", 1500, isolation=False)
    assert {s.select_one_message_queue(i, None).broker_name for _ in range(20)} == {"b"}
    s.update_fault_item("a", 20, isolation=False)
    assert {s.select_one_message_queue(i, None).broker_name for _ in range(20)} == {"a", "b"}


def test_retry_prefers_another_available_broker() -> None:
    s = MQFaultStrategy(True, clock=Clock())
    i = info("a", "b")
    assert {s.select_one_message_queue(i, "a").broker_name for _ in range(20)} == {"b"}
    s.update_fault_item("b", 0, isolation=True)
    # the only available broker is the one that just failed: better than none
    assert {s.select_one_message_queue(i, "a").broker_name for _ in range(20)} == {"a"}


def test_all_unavailable_picks_from_the_better_half() -> None:
    clock = Clock()
    s = MQFaultStrategy(True, clock=clock)
    i = info("a", "b", "c", "d", queues=4)
    s.update_fault_item("a", 600, False)
    s.update_fault_item("b", 1200, False)
    s.update_fault_item("c", 2500, False)
    s.update_fault_item("d", 20_000, False)
    picks = Counter(s.select_one_message_queue(i, None).broker_name for _ in range(200))
    assert set(picks) <= {"a", "b"} and picks["a"] > 0 and picks["b"] > 0
    mq = s.select_one_message_queue(i, None)
    assert mq.topic == "T" and 0 <= mq.queue_id < 4


def test_least_bad_broker_without_queues_is_forgotten() -> None:
    s = MQFaultStrategy(True, clock=Clock())
    i = info("a")
    s.update_fault_item("a", 0, True)
    s.update_fault_item("gone", 0, False)  # known to the tolerance, no longer in the route
    tolerance = LatencyFaultTolerance(Clock())
    assert tolerance.pick_one_at_least() is None
    for _ in range(10):
        assert s.select_one_message_queue(i, None).broker_name == "a"


def test_tables_must_match() -> None:
    with pytest.raises(ValueError):
        MQFaultStrategy(True, latency_max=(1, 2), not_available_duration=(1,))
