"""ProcessQueue: cached counts and sizes, the commit offset rule, spans, orderly take/commit/rollback."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.codec.message import MessageExt


def msg(offset: int, body: bytes = b"xx") -> MessageExt:
    return MessageExt(topic="T", body=body, queue_offset=offset)


def batch(start: int, n: int, body: bytes = b"xx") -> list[MessageExt]:
    return [msg(o, body) for o in range(start, start + n)]


def test_put_counts_sizes_and_dispatches_once() -> None:
    pq = ProcessQueue()
    assert pq.put_messages([]) is False
    assert pq.put_messages(batch(0, 3, b"abcd"), max_offset=10) is True  # first batch: start consuming
    assert pq.put_messages(batch(3, 2, b"abcd"), max_offset=10) is False  # already consuming
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (5, 20, 4)
    assert pq.msg_acc_cnt == 6  # maxOffset 10 - last offset 4
    assert (pq.min_offset(), pq.max_offset(), pq.max_span()) == (0, 4, 4)
    assert pq.has_temp_message() and pq.contains_message(msg(2)) and not pq.contains_message(msg(7))


def test_duplicates_are_not_counted_twice_and_order_is_kept() -> None:
    pq = ProcessQueue()
    pq.put_messages(batch(5, 5))
    pq.put_messages([msg(3), msg(6), msg(11)])  # an overlapping re-pull
    assert pq.msg_count == 7 and pq.msg_size == 14
    assert [m.queue_offset for m in pq.messages()] == [3, 5, 6, 7, 8, 9, 11]


def test_remove_returns_smallest_remaining_or_one_past_the_max() -> None:
    pq = ProcessQueue()
    assert pq.remove_messages([msg(0)]) == -1  # nothing was ever cached
    pq.put_messages(batch(100, 10))
    # A later batch finishing first does not move the commit offset past the slow one.
    assert pq.remove_messages(batch(105, 5)) == 100
    assert pq.remove_messages([msg(101), msg(100)]) == 102
    assert pq.remove_messages(batch(102, 3)) == 110  # empty: one past the newest ever cached
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    # Messages that are not (or no longer) cached change nothing.
    pq.put_messages(batch(110, 2))
    assert pq.remove_messages([msg(3)]) == 110 and pq.msg_count == 2


@given(st.lists(st.integers(0, 200), min_size=1, max_size=60, unique=True), st.data())
def test_commit_offset_never_passes_an_unconsumed_message(offsets: list[int], data: st.DataObject) -> None:
    offsets.sort()
    pq = ProcessQueue()
    pq.put_messages([msg(o) for o in offsets])
    done = data.draw(st.lists(st.sampled_from(offsets), unique=True))
    result = pq.remove_messages([msg(o) for o in done])
    pending = sorted(set(offsets) - set(done))
    assert result == (pending[0] if pending else offsets[-1] + 1)
    assert pq.msg_count == len(pending) and pq.msg_size == 2 * len(pending)


def test_orderly_take_commit() -> None:
    pq = ProcessQueue()
    pq.put_messages(batch(0, 5))
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    assert pq.msg_count == 5  # taken messages stay counted until committed
    assert pq.commit() == 2
    assert pq.msg_count == 3 and pq.commit() == -1
    assert [m.queue_offset for m in pq.take_messages(10)] == [2, 3, 4]
    assert pq.commit() == 5
    assert pq.take_messages(1) == [] and pq.consuming is False
    # A new pull restarts the orderly consumer of this queue.
    assert pq.put_messages(batch(5, 1)) is True


def test_orderly_rollback_and_consume_again_keep_order() -> None:
    pq = ProcessQueue()
    pq.put_messages(batch(0, 4))
    pq.take_messages(2)
    pq.put_messages(batch(4, 2))
    pq.rollback()
    taken = pq.take_messages(3)
    assert [m.queue_offset for m in taken] == [0, 1, 2]
    again = [MessageExt(topic="T", body=b"xx", queue_offset=m.queue_offset, reconsume_times=1) for m in taken]
    pq.make_message_to_consume_again(again)
    assert [(m.queue_offset, m.reconsume_times) for m in pq.messages()] == [
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 0),
        (4, 0),
        (5, 0),
    ]
    assert pq.commit() == -1 and pq.msg_count == 6
    assert [m.reconsume_times for m in pq.take_messages(2)] == [1, 1]


def test_clear_and_lock_expiry() -> None:
    pq = ProcessQueue()
    pq.put_messages(batch(0, 3))
    pq.clear()
    assert (pq.msg_count, pq.msg_size, pq.has_temp_message()) == (0, 0, False)
    now = pq.last_lock_timestamp
    assert not pq.is_lock_expired(now + 29) and pq.is_lock_expired(now + 31)
    assert not pq.is_pull_expired(pq.last_pull_timestamp + 119) and pq.is_pull_expired(
        pq.last_pull_timestamp + 121
    )
    info = pq.info(commit_offset=7)
    assert info.commit_offset == 7 and info.cached_msg_count == 0 and not info.droped


async def test_space_waiter_wakes_when_messages_leave() -> None:
    pq = ProcessQueue()
    pq.put_messages(batch(0, 3))
    waiter = pq.wait_for_space(1.0)
    assert pq.wait_for_space(1.0) is waiter
    asyncio.get_running_loop().call_soon(pq.remove_messages, [msg(0)])
    await asyncio.wait_for(waiter, 1.0)
