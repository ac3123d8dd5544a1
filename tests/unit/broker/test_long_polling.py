"""PullRequestHoldService on its own: parking, waking on arrival, tag matching, timeouts, closed channels."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rocketq.broker.filter import build_subscription
from rocketq.broker.long_polling import PullRequest, PullRequestHoldService
from rocketq.codec.message import tags_code


class QueueMax:
    """The one store call the hold service makes: the queue's max offset."""

    def __init__(self) -> None:
        self.max: dict[tuple[str, int], int] = {}

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max.get((topic, queue_id), 0)


class Channel:
    def __init__(self) -> None:
        self.is_active = True


def _service(**cfg: Any) -> tuple[PullRequestHoldService, QueueMax]:
    store = QueueMax()
    bc = SimpleNamespace(long_polling_enable=True, short_polling_time_mills=1000, **cfg)
    return PullRequestHoldService(SimpleNamespace(store=store, broker_config=bc)), store  # type: ignore[arg-type]


def _park(svc: PullRequestHoldService, woken: list[PullRequest], offset: int, sub: str = "*",
          timeout_ms: int = 10_000, channel: Any = None, queue_id: int = 0) -> PullRequest:
    pr = PullRequest(None, channel or Channel(), "t", queue_id, offset,  # type: ignore[arg-type]
                     build_subscription("t", sub), timeout_ms, woken.append)
    svc.suspend_pull_request("t", queue_id, pr)
    return pr


async def _turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_arrival_wakes_waiters_below_new_max() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    a = _park(svc, woken, 5)
    b = _park(svc, woken, 7)
    svc.notify_message_arriving("t", 0, 6, 0)
    assert woken == []  # deferred to the next loop turn
    await _turn()
    assert woken == [a]
    assert svc.held_count() == 1
    svc.notify_message_arriving("t", 0, 8, 0)
    await _turn()
    assert woken == [a, b]
    assert svc.held_count() == 0
    svc.shutdown()


class FlushedChannel(Channel):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


async def test_wake_now_answers_within_the_turn_and_flushes_each_channel_once() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    ch = FlushedChannel()
    a = _park(svc, woken, 0, channel=ch, queue_id=0)
    b = _park(svc, woken, 0, channel=ch, queue_id=1)
    svc.notify_message_arriving("t", 0, 1, 0)
    svc.notify_message_arriving("t", 1, 1, 0)
    svc.wake_now()
    assert woken == [a, b]  # not deferred to the next loop turn
    assert ch.flushes == 1  # one write for both answers on that connection
    await _turn()  # the drain scheduled by the arrivals finds nothing left to do
    assert woken == [a, b] and ch.flushes == 1
    svc.wake_now()  # nothing arrived since: a no-op
    assert ch.flushes == 1
    svc.shutdown()


async def test_other_queue_does_not_wake() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 0, queue_id=1)
    svc.notify_message_arriving("t", 0, 5, 0)
    svc.notify_message_arriving("other", 1, 5, 0)
    await _turn()
    assert woken == []
    svc.shutdown()


async def test_tag_filter_decides() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    pr = _park(svc, woken, 0, sub="A || B")
    svc.notify_message_arriving("t", 0, 1, tags_code("C"))
    await _turn()
    assert woken == [] and svc.held_count() == 1
    svc.notify_message_arriving("t", 0, 2, tags_code("C"))
    svc.notify_message_arriving("t", 0, 3, tags_code("B"))  # same turn: the burst is folded
    await _turn()
    assert woken == [pr]
    svc.shutdown()


async def test_unknown_tags_code_wakes_everyone() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 0, sub="A")
    svc.notify_message_arriving("t", 0, 1, None)
    await _turn()
    assert len(woken) == 1
    svc.shutdown()


async def test_stale_max_rechecks_the_store() -> None:
    svc, store = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 10)
    store.max[("t", 0)] = 11
    svc.notify_message_arriving("t", 0, 3, 0)  # an old notification, but the queue has moved on
    await _turn()
    assert len(woken) == 1
    svc.shutdown()


async def test_timeout_reruns_the_pull() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    pr = _park(svc, woken, 0, timeout_ms=30)
    await asyncio.sleep(0.01)
    assert woken == []
    await asyncio.sleep(0.06)
    assert woken == [pr]
    assert svc.held_count() == 0
    svc.shutdown()


async def test_woken_request_does_not_fire_again_at_timeout() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 0, timeout_ms=30)
    svc.notify_message_arriving("t", 0, 1, 0)
    await _turn()
    await asyncio.sleep(0.06)
    assert len(woken) == 1
    svc.shutdown()


async def test_closed_channel_drops_its_pulls() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    gone, alive = Channel(), Channel()
    _park(svc, woken, 0, channel=gone, timeout_ms=30)
    _park(svc, woken, 0, channel=gone, queue_id=1, timeout_ms=30)
    keep = _park(svc, woken, 0, channel=alive, timeout_ms=30)
    assert svc.do_channel_close_event(gone) == 2
    assert svc.held_count() == 1
    await asyncio.sleep(0.06)
    assert woken == [keep]
    svc.shutdown()


async def test_inactive_channel_is_not_answered() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    ch = Channel()
    _park(svc, woken, 0, channel=ch)
    ch.is_active = False
    svc.notify_message_arriving("t", 0, 1, 0)
    await _turn()
    assert woken == [] and svc.held_count() == 0
    svc.shutdown()


async def test_periodic_check_catches_missed_arrivals() -> None:
    svc, store = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 0)
    store.max[("t", 0)] = 1  # arrived without a callback
    svc.check_hold_request()
    assert len(woken) == 1
    svc.shutdown()


async def test_notify_from_another_thread() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 0)
    await asyncio.to_thread(svc.notify_message_arriving, "t", 0, 1, 0)
    for _ in range(5):
        await _turn()
    assert len(woken) == 1
    svc.shutdown()


async def test_shutdown_cancels_timers() -> None:
    svc, _ = _service()
    woken: list[PullRequest] = []
    _park(svc, woken, 0, timeout_ms=20)
    svc.shutdown()
    await asyncio.sleep(0.05)
    assert woken == [] and svc.held_count() == 0


def test_notify_without_waiters_is_a_no_op() -> None:
    svc, _ = _service()
    svc.notify_message_arriving("t", 0, 1, 0)  # no loop, no waiters: nothing to do, nothing raised
