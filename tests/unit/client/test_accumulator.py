"""The automatic batching's bookkeeping with plain values: what goes at once, what is gathered,
when a batch is cut, and how one batch answer becomes one SendResult per message."""

from __future__ import annotations

import pytest

from rocketq.client.message import MessageQueue, SendResult, SendStatus
from rocketq.client.producer.accumulator import MIN_PART, Accumulator, check_limits
from rocketq.client.producer.auto_batch import split_result
from rocketq.client.producer.config import ProducerConfig
from rocketq.errors import InvalidArgument


def test_an_idle_lane_sends_at_once_and_a_busy_one_gathers_until_its_request_ends() -> None:
    acc: Accumulator[str] = Accumulator(max_bytes=1000, total_max_bytes=10_000)
    lane = acc.lane("q0")
    assert not lane.inflight
    acc.start(lane)  # "a" went alone
    assert acc.offer(lane, "b", 10) is None
    assert acc.offer(lane, "c", 10) is None
    assert acc.held == 20
    assert acc.done(lane) == ["b", "c"]  # a's answer: b and c leave together
    assert lane.inflight == 1 and acc.held == 0
    assert acc.done(lane) is None  # nothing gathered meanwhile: the lane is idle again
    assert not lane.inflight
    assert "q0" not in acc.lanes  # and forgotten


def test_lanes_are_independent() -> None:
    acc: Accumulator[str] = Accumulator()
    q0, q1 = acc.lane("q0"), acc.lane("q1")
    acc.start(q0)
    assert not q1.inflight  # q1 would send at once although q0 is busy
    assert acc.offer(q0, "x", 1) is None
    assert q1.items == []


def test_a_lane_reaching_batch_max_bytes_is_cut_while_its_request_is_in_flight() -> None:
    acc: Accumulator[int] = Accumulator(max_bytes=100, total_max_bytes=10_000)
    lane = acc.lane("q")
    acc.start(lane)
    assert acc.offer(lane, 1, 60) is None
    assert acc.offer(lane, 2, 40) == [1, 2]
    assert lane.inflight == 2  # the first request and the cut batch
    assert acc.done(lane) is None and acc.done(lane) is None
    assert not lane.inflight


def test_the_total_bound_makes_a_lane_stop_holding() -> None:
    acc: Accumulator[int] = Accumulator(max_bytes=1000, total_max_bytes=150)
    a, b = acc.lane("a"), acc.lane("b")
    acc.start(a)
    acc.start(b)
    assert acc.offer(a, 1, 100) is None
    assert acc.held == 100
    # b's item brings the producer to its bound: b sends what it has at once (its order kept)
    assert acc.offer(b, 2, 60) == [2]
    assert acc.held == 100
    assert acc.offer(a, 3, 60) == [1, 3]
    assert acc.held == 0


def test_a_batch_never_grows_past_the_request_size_limit() -> None:
    # tiny bodies: the bodies' bound is far, the encoded size reaches the limit first
    acc: Accumulator[int] = Accumulator(max_bytes=1000, total_max_bytes=10_000, max_wire_bytes=250)
    lane = acc.lane("q")
    acc.start(lane)
    assert acc.offer(lane, 1, 1, 100) is None
    assert acc.offer(lane, 2, 1, 100) is None
    assert acc.offer(lane, 3, 1, 100) == [1, 2]  # 3 would make 300: it waits for the next batch
    assert lane.items == [3] and lane.wire == 100 and acc.held == 1


def test_expire_cuts_only_the_batch_its_timer_was_armed_for() -> None:
    acc: Accumulator[str] = Accumulator()
    lane = acc.lane("q")
    acc.start(lane)
    acc.offer(lane, "a", 1)
    armed = lane.generation
    assert acc.expire(lane, armed) == ["a"]
    assert acc.expire(lane, armed) is None  # already gone
    acc.offer(lane, "b", 1)
    assert acc.expire(lane, armed) is None  # b has a timer of its own
    assert acc.expire(lane, lane.generation) == ["b"]


def test_limits_are_javas() -> None:
    check_limits(1, 1, 1)
    check_limits(30_000, 2 * 1024 * 1024, 1)
    for bad in ((0, 1, 1), (30_001, 1, 1), (1, 0, 1), (1, 2 * 1024 * 1024 + 1, 1), (1, 1, 0)):
        with pytest.raises(InvalidArgument):
            check_limits(*bad)
    with pytest.raises(InvalidArgument, match="batch_max_delay_ms"):
        ProducerConfig(batch_max_delay_ms=0)
    config = ProducerConfig()
    assert (config.auto_batch, config.auto_batch_sync) == (True, False)
    assert (config.batch_max_delay_ms, config.batch_max_bytes, config.total_batch_max_bytes) == (
        10, 32 * 1024, 32 * 1024 * 1024)


def test_a_batch_answer_becomes_one_result_per_message() -> None:
    mq = MessageQueue("T", "b", 3)
    batch = SendResult(SendStatus.SEND_OK, "U1,U2,U3", mq, 40, "O1,O2,O3", None, "R", False)
    results = split_result(batch, ["U1", "U2", "U3"])
    assert [(r.msg_id, r.queue_offset, r.offset_msg_id) for r in results] == [
        ("U1", 40, "O1"), ("U2", 41, "O2"), ("U3", 42, "O3")]
    assert all(r.message_queue == mq and r.region_id == "R" and not r.trace_on for r in results)
    assert all(type(r) is SendResult for r in results)


def test_one_offset_id_for_the_whole_batch_is_given_to_every_message() -> None:
    # a broker with a batch consume queue answers one id and one offset for the batch (Java's rule)
    mq = MessageQueue("T", "b", 0)
    batch = SendResult(SendStatus.SEND_OK, "U1,U2", mq, 7, "O", None, None, True)
    results = split_result(batch, ["U1", "U2"])
    assert [(r.msg_id, r.queue_offset, r.offset_msg_id) for r in results] == [("U1", 7, "O"), ("U2", 7, "O")]


def test_a_pipelined_lane_sends_what_it_gathered_while_it_has_room() -> None:
    acc: Accumulator[int] = Accumulator(max_bytes=10_000, total_max_bytes=100_000)
    lane = acc.lane("q", limit=3)
    acc.start(lane)
    assert acc.ready(lane) == []  # nothing gathered
    for i in range(10):
        assert acc.offer(lane, i, 1) is None
    assert acc.ready(lane) == [list(range(10))]  # too few to spread: one request
    assert lane.inflight == 2 and acc.held == 0
    assert acc.offer(lane, 10, 1) is None
    assert acc.ready(lane) == [[10]]
    assert lane.inflight == 3
    assert acc.offer(lane, 11, 1) is None
    assert acc.ready(lane) == []  # full: it waits for an answer (or the delay)
    assert acc.held == 1
    assert acc.done(lane) == [11]
    assert lane.inflight == 3


def test_a_pipelined_lane_spreads_many_gathered_items_over_its_free_requests() -> None:
    acc: Accumulator[int] = Accumulator(max_bytes=10**9, total_max_bytes=10**9)
    lane = acc.lane("q", limit=4)
    acc.start(lane)
    for i in range(MIN_PART * 3 + 5):
        acc.offer(lane, i, 1)
    parts = acc.ready(lane)
    assert [len(p) for p in parts] == [MIN_PART + 2, MIN_PART + 2, MIN_PART + 1]
    assert [x for p in parts for x in p] == list(range(MIN_PART * 3 + 5))  # in order, each once
    assert lane.inflight == 4 and acc.held == 0
    for _ in range(4):
        assert acc.done(lane) is None
    assert not lane.inflight and "q" not in acc.lanes


def test_an_ordered_lane_has_one_request_in_flight() -> None:
    acc: Accumulator[int] = Accumulator()
    lane = acc.lane("q")
    assert lane.limit == 1
    acc.start(lane)
    acc.offer(lane, 1, 1)
    assert acc.ready(lane) == []
    assert acc.done(lane) == [1]
