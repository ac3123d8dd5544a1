"""A full disk, simulated: every block a write would need is reserved first, so no space is a
refused put (SERVICE_NOT_AVAILABLE) with nothing of it stored, never a SIGBUS from writing a
sparse page the filesystem cannot back. (tests/fault/test_disk_full.py does it on a real one.)"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from store_testlib import msg

from rocketq.store import MessageStore, PutMessageStatus, SingleEntry, mapped_file
from rocketq.store.services import ServiceTask


@contextmanager
def no_space(monkeypatch: pytest.MonkeyPatch, only: str = "") -> Iterator[None]:
    """Reservations of files whose path contains `only` find the disk full."""
    real = mapped_file._allocate

    def allocate(fd: int, path: str, offset: int, length: int, fresh_from: int) -> bool:
        return False if only in path else real(fd, path, offset, length, fresh_from)

    with monkeypatch.context() as m:
        m.setattr(mapped_file, "_allocate", allocate)
        yield


def entry(i: int, queue_id: int = 0) -> SingleEntry:
    m = msg(queue_id=queue_id, body=b"r%d" % i)
    # a plain tuple, as the broker hands it over: the store must never read `entry.field`
    return tuple(SingleEntry(m.topic, m.queue_id, m.body, m.flag, m.properties, m.tags_code, m.keys,  # type: ignore[return-value]
                             m.sys_flag, m.born_timestamp, m.born_host, m.reconsume_times))


def test_no_space_refuses_puts_and_space_returning_resumes(
        make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    assert store.append_message(msg()).ok
    with no_space(monkeypatch):
        statuses = [store.append_message(msg(body=b"x" * 3000)).status for _ in range(80)]
        assert PutMessageStatus.SERVICE_NOT_AVAILABLE in statuses
        assert store.disk_full
        refused_from = statuses.index(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        assert set(statuses[refused_from:]) == {PutMessageStatus.SERVICE_NOT_AVAILABLE}
    stored = store.get_max_offset_in_queue("TopicA", 0)
    assert stored == 1 + refused_from  # each acknowledged put, no refused one
    store.clean_expired_files(disk_ratio=0.5)  # retention sees space again
    assert not store.disk_full
    assert store.append_message(msg(body=b"x" * 3000)).ok


@pytest.mark.parametrize("path", ["append_message", "append_many", "append_messages"])
def test_no_room_for_the_consume_queue_entry_stores_nothing(
        make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The put checks the consume queue's space before the commit log is appended: a record
    refused is never kept (the fail-then-keep that made three retries store three copies)."""
    from rocketq.store import MessageBatchToStore

    store = make_store()
    before = store.max_phy_offset
    with no_space(monkeypatch, only="/store/consumequeue/"):
        if path == "append_message":
            statuses = [store.append_message(msg(queue_id=3)).status]
        elif path == "append_many":
            statuses = list(store.append_many([entry(i, 3) for i in range(5)]))  # type: ignore[arg-type]
        else:
            batch = MessageBatchToStore("TopicA", 3, [(0, b"b", "UNIQ_KEY\x01U1", 0, ("U1",))])
            statuses = [store.append_messages(batch).status]
    assert statuses and all(s is PutMessageStatus.SERVICE_NOT_AVAILABLE for s in statuses)
    assert store.max_phy_offset == before
    assert store.get_max_offset_in_queue("TopicA", 3) == 0


def test_a_run_refused_part_way_keeps_what_was_acknowledged(
        make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    out = store.append_many([entry(i) for i in range(4)])
    assert all(type(r) is tuple for r in out)
    with no_space(monkeypatch):
        big = [entry(i) for i in range(4, 400)]
        out = store.append_many(big)
    acked = [r for r in out if type(r) is tuple]
    assert out[len(acked):] == [PutMessageStatus.SERVICE_NOT_AVAILABLE] * (len(out) - len(acked))
    assert store.get_max_offset_in_queue("TopicA", 0) == 4 + len(acked)


def test_index_keys_wait_for_space_and_are_never_dropped(
        make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    store = make_store()
    assert store.index is not None
    with no_space(monkeypatch, only="/store/index/"), caplog.at_level(logging.INFO, "rocketq.store"):
        for i in range(3):
            assert store.append_message(msg(keys=f"k{i}")).ok
        store.drain_index()
        store.drain_index()
        assert store.index.stalled_keys == 6  # UNIQ_KEY and KEYS of each
        assert store.disk_full  # puts stop until space returns
        assert sum("keys wait for space" in r.message for r in caplog.records) == 1
    store.disk_full = False
    store.drain_index()
    assert store.index.stalled_keys == 0
    assert len(store.query_message("TopicA", "k1", 10, 0, 2**62).buffers) == 1


def test_a_filesystem_without_fallocate_falls_back_to_a_free_space_check(
        tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.path.join(tmp_path, "00000000000000000000")
    mf = mapped_file.MappedFile(path, 1 << 20)  # not zero-filled: only fallocate is tried

    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    class Full:
        f_bavail, f_frsize, f_fsid = 10, 4096, 12345

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    assert mf.reserve(64 << 10)  # plenty of room on the real disk
    monkeypatch.setattr(os, "fstatvfs", lambda fd: Full)
    assert not mf.reserve(512 << 10)
    assert mf.reserved == 64 << 10
    mf.close()


async def test_a_failing_service_logs_once_and_says_when_it_recovers(
        caplog: pytest.LogCaptureFixture) -> None:
    failures = [OSError(errno.ENOSPC, "No space left on device")] * 5
    done = asyncio.Event()

    async def step() -> None:
        if failures:
            raise failures.pop()
        done.set()

    task = ServiceTask("FlushConsumeQueueService", lambda: 1, step)
    with caplog.at_level(logging.INFO, "rocketq.store"):
        task.start()
        await asyncio.wait_for(done.wait(), 10)
        await task.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert any("recovered after 5 failed rounds" in r.message for r in caplog.records)


def test_reserving_a_reloaded_index_file_keeps_its_keys(make_store: Callable[..., MessageStore]) -> None:
    """Index files reserve by writing zeros, but never over what a loaded file holds."""
    store = make_store()
    for i in range(20):
        assert store.append_message(msg(keys=f"old{i}")).ok
    store.close()
    store = make_store()
    assert store.index is not None and store.index.files
    for i in range(20):
        assert store.append_message(msg(keys=f"new{i}")).ok
    store.drain_index()
    for key in ("old0", "old19", "new0", "new19"):
        assert len(store.query_message("TopicA", key, 10, 0, 2**62).buffers) == 1, key
