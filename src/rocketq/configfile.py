"""The JSON tables the servers keep under their data dir (topics.json, consumerOffset.json,
subscriptionGroup.json, delayOffset.json, kvConfig.json, ...): how one is replaced on disk, how it
is read back, and the one writer each file has.

RocketMQ's `MixAll.string2File` writes `<file>.tmp`, copies the previous content to `<file>.bak`,
deletes the file and renames the temp over it; `ConfigManager.load` falls back to the `.bak` when
the file is missing, empty or does not decode. Here the same files appear, made crash-safe: the
temp file has a unique name (a second writer, or the leftover of a killed one, can never rename
someone else's half-written temp), the `.bak` is a hard link to the previous file (so the file
itself never disappears), and the data and the directory entry are fsynced.

`ConfigFileWriter` is the only writer of its file: requests coalesce, and each write snapshots the
newest state on the event loop, so writes land in the order of the states they carry and the
last one is always the latest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.errors import SystemError_

log = logging.getLogger("rocketq.configfile")

_TMP_SUFFIX = ".tmp"
SLOW_WRITE = 0.5  # seconds: a write this slow is worth a warning


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def _unique_temp(path: Path) -> tuple[int, Path]:
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{_TMP_SUFFIX}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), tmp
        except FileExistsError:
            continue


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _keep_backup(path: Path) -> None:
    """Make `<path>.bak` the current file: a hard link (nothing copied), or a copy where the
    file system has no links."""
    bak = backup_path(path)
    while True:
        tmp = bak.with_name(f".{bak.name}.{secrets.token_hex(6)}{_TMP_SUFFIX}")
        try:
            os.link(path, tmp)
            break
        except FileNotFoundError:
            return  # no previous file: nothing to keep
        except FileExistsError:
            continue
        except OSError:
            try:
                previous = path.read_bytes()
            except FileNotFoundError:
                return
            fd, tmp = _unique_temp(bak)
            try:
                _write_fd(fd, previous)
            finally:
                os.close(fd)
            break
    try:
        os.replace(tmp, bak)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_atomically(path: Path, data: bytes, *, backup: bool = True) -> None:
    """Replace `path` with `data` so that a crash at any moment leaves either the old or the new
    content under `path` (blocking: two fsyncs; run it in a worker thread on a live server).

    With `backup`, the previous content stays readable as `<path>.bak` (RocketMQ's string2File).
    """
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = _unique_temp(path)
    try:
        try:
            _write_fd(fd, data)
        finally:
            os.close(fd)
        if backup:
            _keep_backup(path)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def remove_stale_temps(path: Path) -> None:
    """Delete the temp files a killed writer of `path` (or of its .bak) left behind, and the fixed
    `<name>.tmp` older versions used. Only at load: no writer of `path` may be running."""
    directory = path.parent
    if not directory.is_dir():
        return
    names = (path.name, backup_path(path).name)
    for entry in directory.iterdir():
        n = entry.name
        stale = n.endswith(_TMP_SUFFIX) and (
            any(n.startswith(f".{name}.") for name in names) or n == path.name + _TMP_SUFFIX)
        if stale:
            with contextlib.suppress(OSError):
                entry.unlink()


def read_candidates(path: Path) -> list[tuple[Path, bytes]]:
    """What to try loading, in order: the file, then its .bak (the non-empty ones).

    The caller decodes each in turn and keeps the first that decodes (ConfigManager.load).
    """
    out = []
    for candidate in (path, backup_path(path)):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if data.strip():
            out.append((candidate, data))
    return out


class ConfigFileWriter:
    """The one writer of one file.

    `request()` asks for the current state to reach the disk and returns a future that completes
    (with None, or the error of the failed write) once a write that began after the call is
    done. While one write is in a worker thread, further requests wait for the next, which
    snapshots the state when it begins: any number of requests cost at most two writes.
    `snapshot` runs on the event loop, where the state changes, so it never sees half a change.
    """

    def __init__(self, path: Path, snapshot: Callable[[], bytes], *, backup: bool = True) -> None:
        self.path = path
        self._snapshot = snapshot
        self._backup = backup
        self._requested = 0
        self._waiters: list[tuple[int, asyncio.Future[Exception | None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._latest: asyncio.Future[Exception | None] | None = None
        self.writes = 0

    def request(self) -> asyncio.Future[Exception | None]:
        """Schedule a write of the latest state (on the loop). Ignoring the future is fine."""
        loop = asyncio.get_running_loop()
        self._requested += 1
        fut: asyncio.Future[Exception | None] = loop.create_future()
        self._waiters.append((self._requested, fut))
        self._latest = fut
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name=f"persist {self.path.name}")
        return fut

    def changed(self) -> None:
        """The state changed: write it through this writer, or at once where no loop runs."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.write_now()
            return
        self.request()

    async def write(self) -> None:
        """Write the latest state and wait for it; raises the error of a failed write."""
        error = await self.request()
        if error is not None:
            raise error

    async def settled(self) -> None:
        """Wait for the newest write requested so far (whoever acknowledges a change awaits
        this first); SystemError_ (SYSTEM_ERROR on the wire) when that write failed."""
        latest = self._latest
        if latest is None:
            return
        error = await asyncio.shield(latest)
        if error is not None:
            raise SystemError_(f"persist {self.path} failed: {error}") from error

    async def _run(self) -> None:
        while self._waiters:
            covered = self._requested
            error: Exception | None = None
            try:
                data = self._snapshot()
                began = time.monotonic()
                await asyncio.to_thread(write_atomically, self.path, data, backup=self._backup)
                took = time.monotonic() - began
                if took >= SLOW_WRITE:
                    log.warning("persist %s took %.1f s (a slow disk delays the answers waiting for it)",
                                self.path, took)
                self.writes += 1
            except OSError as exc:
                log.error("persist %s failed: %s", self.path, exc)
                error = exc
            except Exception as exc:  # a bug in snapshot must not leave the waiters hanging
                log.exception("persist %s failed", self.path)
                error = exc
            keep = []
            for number, fut in self._waiters:
                if number > covered:
                    keep.append((number, fut))
                elif not fut.done():
                    fut.set_result(error)
            self._waiters = keep

    async def idle(self) -> None:
        """Wait until no write is queued or running."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.shield(task)

    def write_now(self) -> None:
        """Write synchronously (start-up, tools and tests: no loop writer may be running)."""
        if self._task is not None and not self._task.done():
            raise RuntimeError(f"{self.path} has a write in progress: await idle() first")
        write_atomically(self.path, self._snapshot(), backup=self._backup)
        self.writes += 1
