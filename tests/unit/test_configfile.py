"""rocketq.configfile: atomic replacement with a .bak, loading candidates, one coalescing writer."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from rocketq.configfile import (
    ConfigFileWriter,
    backup_path,
    read_candidates,
    remove_stale_temps,
    write_atomically,
)
from rocketq.errors import SystemError_


def test_write_keeps_the_previous_content_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    write_atomically(path, b'{"v":1}')
    assert path.read_bytes() == b'{"v":1}' and not backup_path(path).exists()
    write_atomically(path, b'{"v":2}')
    write_atomically(path, b'{"v":3}')
    assert path.read_bytes() == b'{"v":3}'
    assert backup_path(path).read_bytes() == b'{"v":2}'  # RocketMQ's string2File: the one before
    assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json", "topics.json.bak"]
    write_atomically(path, b'{"v":4}', backup=False)
    assert backup_path(path).read_bytes() == b'{"v":2}'


def test_candidates_fall_back_to_the_bak(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    assert read_candidates(path) == []
    backup_path(path).write_bytes(b"old")
    assert read_candidates(path) == [(backup_path(path), b"old")]
    path.write_bytes(b"  \n")  # empty counts as missing, as in ConfigManager.load
    assert read_candidates(path) == [(backup_path(path), b"old")]
    path.write_bytes(b"new")
    assert [data for _, data in read_candidates(path)] == [b"new", b"old"]


def test_stale_temps_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    leftovers = [".topics.json.0a1b2c.tmp", ".topics.json.bak.0a1b2c.tmp", "topics.json.tmp"]
    for name in [*leftovers, ".other.json.0a1b2c.tmp", "topics.json"]:
        (tmp_path / name).write_bytes(b"x")
    remove_stale_temps(path)
    assert sorted(os.listdir(tmp_path)) == [".other.json.0a1b2c.tmp", "topics.json"]


async def test_requests_coalesce_and_the_last_write_is_the_latest_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = {"n": 0}
    writer = ConfigFileWriter(path, lambda: str(state["n"]).encode())
    futures = []
    for n in range(1, 51):
        state["n"] = n
        futures.append(writer.request())
    assert await asyncio.gather(*futures) == [None] * 50
    assert path.read_bytes() == b"50"
    assert writer.writes <= 2  # one began with the first request, one more covers the other 49


async def test_a_failed_write_is_reported_to_the_waiters(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    writer = ConfigFileWriter(blocker / "sub" / "x.json", lambda: b"{}")  # its directory is a file
    writer.request()
    with pytest.raises(SystemError_, match="persist"):
        await writer.settled()
    with pytest.raises(OSError):
        await writer.write()


async def test_write_now_refuses_while_the_loop_writer_runs(tmp_path: Path) -> None:
    writer = ConfigFileWriter(tmp_path / "x.json", lambda: b"{}")
    fut = writer.request()
    with pytest.raises(RuntimeError):
        writer.write_now()
    await fut
    await writer.idle()
    writer.write_now()
    assert (tmp_path / "x.json").read_bytes() == b"{}"
