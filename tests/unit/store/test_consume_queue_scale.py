"""Consume queues at scale: the page advice of the file being written, the flush's fast answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rocketq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rocketq.store.mapped_file import OS_PAGE_SIZE

PER_FILE = 1024  # entries per file: 5 pages, so a test crosses files quickly
FILE_SIZE = PER_FILE * CQ_STORE_UNIT_SIZE

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


def _cq(root: Path) -> ConsumeQueue:
    cq = ConsumeQueue("TopicA", 0, str(root), FILE_SIZE)
    cq.load()
    cq.recover()
    return cq


def _fill(cq: ConsumeQueue, n: int, single: bool = False) -> None:
    start = cq.max_offset
    cq.reserve_to(start + n)
    if single:
        for i in range(start, start + n):
            cq.append(1000 * i, 100, i % 7)
    else:
        idx = range(start, start + n)
        cq.append_many([1000 * i for i in idx], [100] * n, [i % 7 for i in idx])


def _random_read_advised(path: str) -> bool:
    """Whether the mapping of `path` carries MADV_RANDOM ("rr" in its smaps VmFlags)."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(" " + path):
            for flags in lines[i + 1:]:
                if flags.startswith("VmFlags:"):
                    return "rr" in flags.split()[1:]
    raise AssertionError(f"{path} is not mapped")


@linux_only
def test_only_the_file_being_written_is_advised_random(tmp_path: Path) -> None:
    cq = _cq(tmp_path)
    try:
        _fill(cq, PER_FILE - 2, single=True)
        first = cq.mfq.files[0].path
        assert _random_read_advised(first)
        _fill(cq, 4, single=True)  # into the second file
        second = cq.mfq.files[1].path
        assert _random_read_advised(second)
        assert not _random_read_advised(first)  # readers of the full file keep the read-around
    finally:
        cq.close()


@pytest.mark.parametrize("single", [True, False])
def test_entries_read_back_through_the_mapping_and_after_reopen(tmp_path: Path, single: bool) -> None:
    n = 2 * PER_FILE + 300
    cq = _cq(tmp_path)
    _fill(cq, n, single)
    for cut in (0, PER_FILE - 1, PER_FILE, n - 1):
        assert cq.entry(cut) == (1000 * cut, 100, cut % 7)
    got = cq.entries(PER_FILE - 3, 32)
    assert got is not None and len(got) == 3  # a read stops at its file's end
    assert [int(p) for p in got["phys"]] == [1000 * i for i in range(PER_FILE - 3, PER_FILE)]
    del got
    assert cq.flush(0) == n * CQ_STORE_UNIT_SIZE
    cq.close()

    again = _cq(tmp_path)
    try:
        assert (again.min_offset, again.max_offset) == (0, n)
        assert again.max_physic_offset == 1000 * (n - 1) + 100
        assert again.entry(n - 1) == (1000 * (n - 1), 100, (n - 1) % 7)
        _fill(again, 5, single)  # appends continue where the reopened queue ends
        assert again.entry(n + 4) == (1000 * (n + 4), 100, (n + 4) % 7)
    finally:
        again.close()


def test_flush_syncs_only_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs: list[int] = []
    real = os.fdatasync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counting)
    cq = _cq(tmp_path)
    try:
        assert cq.flush(0) == 0 and not syncs  # nothing written
        _fill(cq, PER_FILE - 10)
        assert cq.flush(0) == (PER_FILE - 10) * CQ_STORE_UNIT_SIZE and len(syncs) == 1
        assert cq.flush(0) == (PER_FILE - 10) * CQ_STORE_UNIT_SIZE and len(syncs) == 1  # clean: no call
        # a block across the file boundary leaves both files dirty: a full flush syncs both
        _fill(cq, 20)
        end = (PER_FILE + 10) * CQ_STORE_UNIT_SIZE
        assert cq.flush(0) == end and len(syncs) == 3
        assert [mf.dirty_bytes() for mf in cq.mfq] == [0, 0]
        # below least_pages in the file being written, the rest flushed: waits for more
        _fill(cq, 3)
        assert cq.flush(2) == end and len(syncs) == 3
        _fill(cq, 2 * OS_PAGE_SIZE // CQ_STORE_UNIT_SIZE)
        assert cq.flush(2) == cq.max_offset * CQ_STORE_UNIT_SIZE and len(syncs) == 4
    finally:
        cq.close()


def test_flush_after_a_block_across_files_with_least_pages(tmp_path: Path) -> None:
    """The fast answer needs the files before the one being written flushed: a block that
    ended in a new file while the old one was dirty takes the full walk (and its sum)."""
    cq = _cq(tmp_path)
    try:
        _fill(cq, PER_FILE - 2)  # 2 entries short of the boundary, nothing flushed
        _fill(cq, 4)  # 2 in each file: the new file alone holds 40 bytes
        assert cq.flush(2) == (PER_FILE + 2) * CQ_STORE_UNIT_SIZE  # the old file's 5 pages count
        assert [mf.dirty_bytes() for mf in cq.mfq] == [0, 0]
    finally:
        cq.close()


def test_recovery_ends_at_the_first_bad_entry_past_a_step(tmp_path: Path) -> None:
    """Recovery reads the last files a step at a time: the end it finds is still the first
    entry with size <= 0, wherever it lies, and the entries after it are cleared."""
    per_file = 3 * 4096 + 100
    n = 4096 + 50
    cq = ConsumeQueue("TopicA", 0, str(tmp_path), per_file * CQ_STORE_UNIT_SIZE)
    cq.load()
    cq.reserve_to(n)
    cq.append_many([1000 * i for i in range(n)], [100] * n, [0] * n)
    cq.close()
    path = os.path.join(str(tmp_path), "TopicA", "0", f"{0:020d}")
    fd = os.open(path, os.O_RDWR)
    try:  # a torn entry in the second step, valid-looking entries behind it
        os.pwrite(fd, bytes(CQ_STORE_UNIT_SIZE), 4100 * CQ_STORE_UNIT_SIZE)
    finally:
        os.close(fd)

    again = ConsumeQueue("TopicA", 0, str(tmp_path), per_file * CQ_STORE_UNIT_SIZE)
    again.load()
    again.recover()
    try:
        assert again.max_offset == 4100
        assert again.max_physic_offset == 1000 * 4099 + 100
        assert again.entry(4099) == (1000 * 4099, 100, 0)
        mf = again.mfq.files[0]
        tail = mf.buf[4100 * CQ_STORE_UNIT_SIZE : n * CQ_STORE_UNIT_SIZE].tobytes()
        assert tail == bytes(len(tail))  # what followed the torn entry is gone
        if sys.platform.startswith("linux"):
            assert _random_read_advised(mf.path)  # the file appends continue in
    finally:
        again.close()
