"""Durability: SYNC_FLUSH group commit, flush timeouts, the async flush service, checkpoint."""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from store_testlib import msg

from rocketq.store import MessageBatchToStore, MessageStore, PutMessageStatus


async def test_group_commit_one_fsync_for_concurrent_puts(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(flush_disk_type="SYNC_FLUSH")
    await store.start()
    syncs = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    try:
        before = store.commit_log.flush_count
        results = await asyncio.gather(*(store.put_message(msg(body=b"m%d" % i)) for i in range(20)))
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert store.commit_log.flush_count - before == 1
        assert len(syncs) == 1  # one fdatasync of the commit-log segment for all twenty
        assert store.commit_log.flushed_offset == store.max_phy_offset
        batch = MessageBatchToStore("TopicA", 0, [(0, b"b", "", 0, ())] * 5)
        r = await store.put_messages(batch)
        assert r.status is PutMessageStatus.PUT_OK and store.commit_log.flushed_offset == store.max_phy_offset
    finally:
        monkeypatch.undo()
        await store.shutdown()


async def test_flush_timeout_reports_but_keeps_the_message(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=50)
    await store.start()
    real = store.commit_log.flush

    def slow(least: int = 0) -> int:
        time.sleep(0.3)
        return real(least)

    monkeypatch.setattr(store.commit_log, "flush", slow)
    try:
        r = await store.put_message(msg(body=b"slow"))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and r.ok
        assert r.msg_id and r.logical_offset == 0
        assert store.get_max_offset_in_queue("TopicA", 0) == 1
    finally:
        await store.shutdown()


async def test_wait_store_msg_ok_false_skips_the_wait(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(flush_disk_type="SYNC_FLUSH")
    await store.start()
    try:
        r = await store.put_message(msg(wait_store_msg_ok=False))
        assert r.status is PutMessageStatus.PUT_OK
    finally:
        await store.shutdown()


async def test_sync_flush_without_services_flushes_inline(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(flush_disk_type="SYNC_FLUSH")
    r = await store.put_message(msg())
    assert r.status is PutMessageStatus.PUT_OK
    assert store.commit_log.flushed_offset == store.max_phy_offset


async def test_async_flush_service_catches_up(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(flush_interval_commit_log=20, flush_commit_log_least_pages=0,
                       flush_interval_consume_queue=20)
    await store.start()
    try:
        r = await store.put_message(msg())
        assert r.status is PutMessageStatus.PUT_OK
        assert store.commit_log.flushed_offset == 0  # ASYNC_FLUSH answers before the disk
        cp = store.checkpoint
        for _ in range(100):
            if store.commit_log.flushed_offset == store.max_phy_offset and cp.physic_msg_timestamp:
                break
            await asyncio.sleep(0.01)
        assert store.commit_log.flushed_offset == store.max_phy_offset
        assert store.checkpoint.physic_msg_timestamp == r.store_timestamp
        assert store.checkpoint.logics_msg_timestamp == r.store_timestamp
    finally:
        await store.shutdown()


async def test_least_pages_holds_back_small_flushes(make_store: Callable[..., MessageStore]) -> None:
    store = make_store(flush_interval_commit_log=10, flush_commit_log_least_pages=4,
                       flush_commit_log_thorough_interval=60_000)
    await store.start()
    try:
        await store.put_message(msg())
        await asyncio.sleep(0.1)
        assert store.commit_log.flushed_offset == 0  # less than 4 pages dirty
        for _ in range(10):
            await store.put_message(msg(body=b"x" * 2000))
        for _ in range(50):
            if store.commit_log.flushed_offset:
                break
            await asyncio.sleep(0.01)
        assert store.commit_log.flushed_offset == store.max_phy_offset
    finally:
        await store.shutdown()


async def test_shutdown_writes_checkpoint_and_removes_abort(
    make_store: Callable[..., MessageStore], tmp_path: Path
) -> None:
    store = make_store()
    await store.start()
    assert (tmp_path / "store" / "abort").exists()
    r = await store.put_message(msg(keys="k"))
    end = store.max_phy_offset
    await store.shutdown()
    assert not (tmp_path / "store" / "abort").exists()
    raw = (tmp_path / "store" / "checkpoint").read_bytes()
    assert len(raw) == 4096
    physic, logics, index, _flushed, _confirm = struct.unpack_from(">qqqqq", raw, 0)
    assert physic == logics == index == r.store_timestamp
    assert store.commit_log.flushed_offset == end


async def test_clean_stop_logs_the_real_max_offset(
    make_store: Callable[..., MessageStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store()
    await store.start()
    await store.put_message(msg())
    end = store.max_phy_offset
    assert end > 0
    with caplog.at_level("INFO", logger="rocketq.store"):
        await store.shutdown()
    assert f"message store shut down, max offset {end}" in caplog.text  # was 0: read after closing


async def test_idle_flush_services_stay_off_the_worker_threads(
    make_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle broker woke its loop and a worker thread every few ms (issue 9 item 5): rounds that
    have nothing to flush skip the thread, and the index drain slows down while nothing comes."""
    store = make_store(flush_interval_commit_log=10, flush_interval_consume_queue=10,
                       flush_commit_log_least_pages=0)
    calls = {"derived": 0, "log": 0}
    flush_derived, flush_log = store.flush_derived, store.commit_log.flush

    def derived(least: int = 0) -> None:
        calls["derived"] += 1
        flush_derived(least)

    def log_flush(least: int = 0) -> int:
        calls["log"] += 1
        return flush_log(least)

    monkeypatch.setattr(store, "flush_derived", derived)
    monkeypatch.setattr(store.commit_log, "flush", log_flush)
    await store.start()
    try:
        await asyncio.sleep(0.3)  # about 30 rounds of each service
        # at most the one complete derived flush at start, then nothing
        assert calls["derived"] <= 1 and calls["log"] == 0, calls
        await store.put_message(msg())
        for _ in range(2000):
            if store.commit_log.flushed_offset == store.max_phy_offset and calls["derived"] > 1:
                break
            await asyncio.sleep(0.01)
        assert store.commit_log.flushed_offset == store.max_phy_offset
        assert calls["derived"] > 1
    finally:
        await store.shutdown()
