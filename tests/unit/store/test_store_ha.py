"""The store's side of replication: a slave store fed the master's commit-log bytes in arbitrary
cuts ends byte-identical, with the same consume queues and index; a slave past the master is
truncated to it; the SYNC_MASTER wait releases on acks and expires on time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from store_testlib import bodies, msg

from rocketq.codec.message import tags_code
from rocketq.store import MessageStore, PutMessageStatus
from rocketq.store.ha import GroupTransfer, ReplicaDiverged, ReplicaWriter, combined_wait, transfer_chunk


def fill(store: MessageStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        assert store.append_message(msg(queue_id=i % 3, body=b"%05d" % i * 40, tags=f"T{i % 2}",
                                        keys=f"k{i}")).ok


def pair(make_store: Callable[..., MessageStore], tmp_path: Path, n: int
         ) -> tuple[MessageStore, MessageStore, ReplicaWriter]:
    """A master with `n` messages and a slave that has copied them."""
    master = make_store(tmp_path / "m")
    fill(master, n)
    slave = make_store(tmp_path / "s")
    writer = ReplicaWriter(slave)
    replicate(master, writer, 4096)
    return master, slave, writer


def replicate(master: MessageStore, writer: ReplicaWriter, cut: int) -> int:
    """Copy the master's log from the slave's end in transfers of at most `cut` bytes."""
    sent = 0
    while True:
        chunk = transfer_chunk(master.commit_log, writer.max_offset, cut)
        if chunk is None:
            return sent
        writer.append(writer.max_offset, chunk)
        writer.dispatch()
        sent += len(chunk)


@pytest.mark.parametrize("cut", [7, 1000, 32 * 1024])
def test_slave_ends_identical_to_master(make_store: Callable[..., MessageStore], tmp_path: Path,
                                        cut: int) -> None:
    master = make_store(tmp_path / "m")
    slave = make_store(tmp_path / "s")
    fill(master, 400)  # several 64 KiB segments, so end markers travel too
    writer = ReplicaWriter(slave)
    replicate(master, writer, cut)
    assert slave.max_phy_offset == master.max_phy_offset
    assert writer.dispatched == master.max_phy_offset
    for q in range(3):
        assert bodies(slave, queue_id=q) == bodies(master, queue_id=q)
        assert slave.get_max_offset_in_queue("TopicA", q) == master.get_max_offset_in_queue("TopicA", q)
    slave.drain_index()
    assert len(slave.query_message("TopicA", "k399", 32, 0, 2**62).phy_offsets) == 1
    tagged = slave.get_message("TopicA", 0, 0, 32, tag_codes=frozenset({tags_code("T1")}))
    assert tagged.message_count > 0


def test_slave_restart_resumes_from_its_own_end(make_store: Callable[..., MessageStore],
        tmp_path: Path) -> None:
    master = make_store(tmp_path / "m")
    fill(master, 100)
    slave = make_store(tmp_path / "s")
    replicate(master, ReplicaWriter(slave), 5000)
    slave.release_without_shutdown()  # as kill -9
    fill(master, 100, start=100)
    slave = make_store(tmp_path / "s")
    writer = ReplicaWriter(slave)
    assert 0 < writer.max_offset < master.max_phy_offset
    replicate(master, writer, 5000)
    assert bodies(slave, queue_id=1) == bodies(master, queue_id=1)


def test_a_slave_past_the_master_is_truncated(make_store: Callable[..., MessageStore],
        tmp_path: Path) -> None:
    master, slave, writer = pair(make_store, tmp_path, 50)
    slave.put.slave = False
    fill(slave, 30, start=1000)  # written while this store was a master of its own: diverged
    ahead = slave.max_phy_offset
    assert ahead > master.max_phy_offset
    writer.truncate(master.max_phy_offset)
    assert slave.max_phy_offset == master.max_phy_offset
    assert bodies(slave, queue_id=0) == bodies(master, queue_id=0)
    fill(master, 10, start=50)
    replicate(master, writer, 4096)
    assert bodies(slave, queue_id=2) == bodies(master, queue_id=2)


def test_bytes_for_another_offset_are_refused(make_store: Callable[..., MessageStore],
        tmp_path: Path) -> None:
    _, _, writer = pair(make_store, tmp_path, 10)
    with pytest.raises(ReplicaDiverged):
        writer.append(writer.max_offset + 20, b"x" * 10)


def test_a_slave_store_refuses_puts(make_store: Callable[..., MessageStore]) -> None:
    s = make_store()
    s.put.slave = True
    r = s.append_message(msg())
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_group_transfer_acks_and_timeouts() -> None:
    gt = GroupTransfer(timeout_ms=200, fallbehind_max=1000)
    assert not gt.is_slave_ok(10)  # nobody connected
    gt.connection_count = 1
    assert gt.is_slave_ok(10) and not gt.is_slave_ok(5000)  # too far behind to wait for
    first, second = gt.request(100), gt.request(200)
    gt.acked(150)
    assert await first is True
    assert not second.done()
    assert await second is False  # slaveTimeout
    assert await gt.request(120) is True  # already acked


async def test_a_role_change_fails_waiting_puts_and_forgets_acks() -> None:
    """A demoted master's waiting puts must not be confirmed later, and a master promoted again
    (its log cut back below what its old slaves reported) counts acks afresh."""
    gt = GroupTransfer(timeout_ms=60_000, fallbehind_max=1 << 30)
    gt.connection_count = 1
    gt.acked(500)
    waiting = gt.request(900)
    gt.reset()
    assert waiting.done() and waiting.result() is False
    fresh = gt.request(400)  # below the old ack: it must wait for a new one
    assert not fresh.done()
    gt.acked(400)
    assert fresh.result() is True
    gt.close()


async def test_combined_wait_reports_the_replica_first() -> None:
    loop = asyncio.get_running_loop()
    gt = GroupTransfer(timeout_ms=50, fallbehind_max=1 << 30)
    assert await combined_wait(None, gt, 10) is PutMessageStatus.SLAVE_NOT_AVAILABLE
    gt.connection_count = 1
    flush: asyncio.Future[bool] = loop.create_future()
    flush.set_result(False)
    assert await combined_wait(flush, gt, 10) is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    flush2: asyncio.Future[bool] = loop.create_future()
    flush2.set_result(False)
    gt.acked(100)
    assert await combined_wait(flush2, gt, 10) is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert await combined_wait(None, None, 10) is PutMessageStatus.PUT_OK
