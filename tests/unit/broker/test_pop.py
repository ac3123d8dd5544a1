"""Pop's bookkeeping with plain values (the live checkpoints, orderly locks), and the pop family on an
in-process broker under SYNC_FLUSH (each answer waits for the checkpoint's fsync)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.harness import wait_until
from tests.wire import (
    BrokerOptions,
    ack,
    change_invisible,
    create_topic,
    in_process_cluster,
    invoke,
    pop,
    popped,
    send_message,
)

from rocketq.broker.pop.checkpoints import CheckpointTable
from rocketq.broker.pop.order import OrderInfoTable
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.pop import AckMsg, PopCheckPoint


def _ck(start: int, pop_time: int, diffs: list[int], invisible: int = 1000) -> PopCheckPoint:
    return PopCheckPoint(start, pop_time, invisible, len(diffs), 0, "T", "G", "b", diffs)


def test_checkpoints_complete_by_acks_and_come_due_by_time() -> None:
    table = CheckpointTable()
    a, b = _ck(0, 100, [0, 1, 3]), _ck(4, 200, [0, 1])
    table.add(a, 2, 10)
    table.add(b, 2, 11)
    assert table.revive_offset(2) == 10 and table.next_due_time() == 1100
    assert not table.ack(AckMsg(0, 0, "G", "T", 0, 100, "b"))
    assert not table.ack(AckMsg(-1, 0, "G", "T", 0, 999, "b", (1, 3)))  # another pop: not this checkpoint
    assert table.ack(AckMsg(-1, 0, "G", "T", 0, 100, "b", (1, 3)))  # completes a
    assert len(table) == 1 and table.revive_offset(2) == 11
    assert table.next_due_time() == 1200 and table.pop_due(1199) == []
    due = table.pop_due(1200)
    assert due == [b] and due[0].unacked_offsets() == [4, 5]
    table.remove(b)
    assert table.revive_offset(2) == 12  # past everything seen
    assert table.next_due_time() is None


def test_pop_state_counts_unacked_and_due_messages_per_queue() -> None:
    table = CheckpointTable()
    table.add(_ck(0, 100, [0, 1, 3]), 0, 0)  # due at 1100
    table.add(_ck(4, 500, [0, 1]), 0, 1)  # due at 1500
    table.ack(AckMsg(-1, 0, "G", "T", 0, 100, "b", (1,)))
    assert table.pop_state(1000) == {("G", "T", 0): (4, 0)}
    assert table.pop_state(1100) == {("G", "T", 0): (4, 2)}
    assert table.pop_state(1500) == {("G", "T", 0): (4, 4)}
    assert table.pop_state(1500, group="other") == {}


def test_a_deferred_checkpoint_is_due_again_later() -> None:
    table = CheckpointTable()
    ck = _ck(0, 0, [0])
    table.add(ck, 0, 0)
    assert table.pop_due(1000) == [ck]
    table.defer(ck, 2000)
    assert table.pop_due(1999) == [] and table.pop_due(2000) == [ck]


def test_orderly_queue_blocks_until_the_batch_is_acked_or_expires() -> None:
    t = OrderInfoTable()
    key = ("T", "G", 0)
    assert t.update(key, "a1", 1000, 500, [5, 6]) == {5: 0, 6: 0}
    assert t.check_block("other", key, 1200) and not t.check_block("a1", key, 1200)
    assert not t.check_block(None, key, 1500)  # expired
    counts = t.update(key, None, 1600, 500, [5, 6])  # popped again after expiry
    assert counts == {5: 1, 6: 1}
    assert t.commit_and_next(key, 5, 1000) == -2  # an ack of the old pop
    assert t.commit_and_next(key, 5, 1600) == -1
    assert t.commit_and_next(key, 6, 1600) == 7
    assert not t.check_block(None, key, 1700)


async def test_pop_ack_and_change_invisible_under_sync_flush(tmp_path: Path) -> None:
    opts = BrokerOptions(store={"flush_disk_type": "SYNC_FLUSH"})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        assert (await create_topic(client, broker.address, "SyncPop", read=1, write=1)).code == 0
        for body in (b"a", b"b"):
            assert (await send_message(client, broker.address, "SyncPop", body)).code == ResponseCode.SUCCESS
        r = await pop(client, broker.address, "G", "SyncPop", invisible_ms=5_000)
        assert r.code == ResponseCode.SUCCESS
        a, b = popped(r, broker.broker_name)
        assert (await ack(client, broker.address, "G", a)).code == ResponseCode.SUCCESS
        assert (await change_invisible(client, broker.address, "G", b, 10_000)).code == ResponseCode.SUCCESS
        assert (await ack(client, broker.address, "G", b)).code == ResponseCode.SUCCESS
        assert len(broker.pop_service.checkpoints) == 0


def test_allocation_for_pop_shares_queues_as_java() -> None:
    from rocketq.broker.pop.assignment import allocate, allocate_for_pop

    mqs = [("T", "b", q) for q in range(4)]
    cids = ["c0", "c1", "c2", "c3"]
    assert allocate("AVG", "c1", mqs, cids[:2]) == mqs[2:]
    assert allocate("AVG_BY_CIRCLE", "c1", mqs, cids[:2]) == [mqs[1], mqs[3]]
    assert allocate("NOPE", "c1", mqs, cids) is None
    assert allocate_for_pop("AVG", "c0", mqs, cids, 0) == [("T", "b", -1)]
    # popShareQueueNum 1 of 4 clients: its own queue and the next client's
    assert allocate_for_pop("AVG", "c3", mqs, cids, 1) == [mqs[3], mqs[0]]


async def test_a_demotion_answers_parked_pops_at_once(tmp_path: Path) -> None:
    """Stopping pop (what a controller-mode demotion does) answers each parked pop with the
    slave's refusal and each parked notification with what it finds, long before their pollTime."""
    async with in_process_cluster(tmp_path, BrokerOptions(), with_namesrv=False) as (_, broker, client):
        assert (await create_topic(client, broker.address, "ParkedPop", read=1, write=1)).code == 0
        polls = [asyncio.ensure_future(pop(client, broker.address, "G", "ParkedPop", poll_ms=120_000)),
                 asyncio.ensure_future(invoke(client, broker.address, RequestCode.NOTIFICATION, {
                     "consumerGroup": "G", "topic": "ParkedPop", "queueId": -1, "pollTime": 120_000,
                     "bornTime": int(time.time() * 1000)}, timeout=130))]
        await wait_until(lambda: broker.pop_service.polling.polling_num == 2, timeout=30)
        await broker.pop_service.shutdown()
        async with asyncio.timeout(60):  # far below the 120 s they would otherwise wait
            popped_answer, notified = await asyncio.gather(*polls)
        assert popped_answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, popped_answer.remark
        assert notified.code == ResponseCode.SUCCESS and notified.ext("hasMsg") == "false"
        assert broker.pop_service.polling.polling_num == 0
        # and pop stays refused until the broker serves it again
        again = await pop(client, broker.address, "G", "ParkedPop")
        assert again.code == ResponseCode.SERVICE_NOT_AVAILABLE
