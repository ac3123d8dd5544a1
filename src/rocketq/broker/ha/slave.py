"""The slave's replication client (RocketMQ 4.x HAClient) on asyncio streams.

It connects to the master's HA address (haMasterAddress, or what the name server answered the
registration with), reports its commit-log max offset at once, after every read that moved it and
every haSendHeartbeatInterval, and appends what the master transfers (`store/ha/replica.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from rocketq.broker.ha.master import RateWindow
from rocketq.codec.ha import TransferDecoder, encode_report
from rocketq.errors import ProtocolError, StoreError
from rocketq.store import MessageStore
from rocketq.store.ha import ReplicaDiverged, ReplicaWriter

log = logging.getLogger("rocketq.broker.ha")

RECONNECT_DELAY = 1.0
RETRY_DELAY = 5.0  # RocketMQ's HAClient waits 5 s after a failed connect
READ_SIZE = 1 << 20
DISPATCH_BYTES = 8 << 20  # appended bytes that are dispatched at once, however soon
DISPATCH_DELAY = 0.01  # the longest appended records wait for their consume-queue entries


class HAClient:
    def __init__(self, store: MessageStore, on_dispatched: Callable[[set[tuple[str, int]]], None]) -> None:
        self.store = store
        self.config = store.config
        self.replica = ReplicaWriter(store)
        self.master_addr: str | None = store.config.ha_master_address
        self.connected = False
        self.last_transfer_ms = 0
        self.last_write_ms = 0
        self.rate = RateWindow()
        self.master_offset = 0  # the newest offset the master named (a transfer's end or a heartbeat)
        self._on_dispatched = on_dispatched
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._stopping = False
        self._writer: asyncio.StreamWriter | None = None

    def set_master(self, addr: str | None) -> None:
        """The master's HA address changed (a registration answer): reconnect there."""
        if addr and addr != self.master_addr:
            log.info("slave: master HA address is now %s (was %s)", addr, self.master_addr)
            self.master_addr = addr
            self._changed.set()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def shutdown(self) -> None:
        # Not only cancel: a wait_for that completes as it is cancelled can swallow the
        # cancellation (Python 3.11), so the loops also watch the flag and the socket closes.
        self._stopping = True
        self._changed.set()
        if self._writer is not None:
            self._writer.close()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        failures = 0  # in a row: a master that is down is retried every few seconds, logged once
        while not self._stopping:
            addr = self.master_addr
            if not addr:
                await self._wait_change(RECONNECT_DELAY)
                continue
            try:
                await self._session(addr)
                failures = 0
            except asyncio.CancelledError:
                raise
            except (OSError, ProtocolError, StoreError, TimeoutError) as exc:
                failures = 1 if self.connected else failures + 1  # a lost connection counts afresh
                (log.warning if failures == 1 else log.debug)(
                    "slave: replication from %s stopped: %s", addr, exc)
            finally:
                self.connected = False
            await self._wait_change(RECONNECT_DELAY if failures <= 1 else RETRY_DELAY)

    async def _wait_change(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        self._changed.clear()

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        connecting = asyncio.open_connection(host, int(port), limit=READ_SIZE)
        reader, writer = await asyncio.wait_for(connecting, 3.0)
        self.connected = True
        self._writer = writer
        log.info("slave: connected to master %s, reporting offset %d", addr, self.replica.max_offset)
        try:
            await self._replicate(addr, reader, writer)
        finally:
            # What the master sent before it died is served at once (a read of the slave right
            # after a kill -9 of a SYNC_MASTER must find every acknowledged message).
            if self.replica.dispatched < self.replica.max_offset:
                try:
                    self._dispatch()
                except (StoreError, OSError, ValueError) as exc:  # ValueError: a store closed under us
                    log.warning("slave: dispatching the last transfers failed: %s", exc)
            self._writer = None
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _replicate(self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cfg = self.config
        heartbeat = cfg.ha_send_heartbeat_interval / 1000
        housekeeping = cfg.ha_housekeeping_interval / 1000
        replica = self.replica
        decoder = TransferDecoder()
        reported = replica.max_offset
        writer.write(encode_report(reported))
        last_report = last_read = last_dispatch = time.monotonic()
        undispatched = 0  # bytes appended since the last dispatch
        while not self._changed.is_set():
            try:
                wait = DISPATCH_DELAY if undispatched else heartbeat
                data = await asyncio.wait_for(reader.read(READ_SIZE), wait)
            except TimeoutError:
                data = None
            now = time.monotonic()
            if data == b"":
                raise ConnectionResetError("the master closed the replication connection")
            if data:
                last_read = now
                self.rate.add(len(data))
                undispatched += self._append(decoder.feed(data))
            elif now - last_read > housekeeping:
                raise TimeoutError(f"nothing from master {addr} for {housekeeping:.0f} s")
            offset = replica.max_offset
            if offset != reported or now - last_report >= heartbeat:
                # As RocketMQ's HAClient: the report follows the append, not the dispatch, so a
                # SYNC_MASTER's ack waits for the bytes, not for this slave's consume queues.
                writer.write(encode_report(offset))
                reported, last_report = offset, now
                self.last_write_ms = int(time.time() * 1000)
            # Dispatch in stretches (as Java's slave reputs on its own schedule): while a backlog
            # streams in, one numpy pass over megabytes costs far less per record than one per read.
            due = not data or undispatched >= DISPATCH_BYTES or now - last_dispatch >= DISPATCH_DELAY
            if undispatched and due:
                undispatched, last_dispatch = 0, now
                self._dispatch()
            await writer.drain()

    def _dispatch(self) -> None:
        touched = self.replica.dispatch()
        if touched:
            self._on_dispatched(touched)

    def _append(self, transfers: list[tuple[int, memoryview]]) -> int:
        """Append the transfers of one read; how many bytes came (their records want dispatch)."""
        replica = self.replica
        for offset, body in transfers:
            here = replica.max_offset
            if offset != here and (here or self.store.commit_log.mfq.last is not None):
                if offset < here and not len(body):
                    replica.truncate(offset)  # the master ends before us: our tail never was its
                else:
                    raise ReplicaDiverged(f"master pushed offset {offset}, slave is at {here}")
            replica.append(offset, body)
            self.master_offset = max(self.master_offset, offset + len(body))
        if transfers:
            self.last_transfer_ms = int(time.time() * 1000)
        return sum(len(body) for _, body in transfers)

    @property
    def lag_bytes(self) -> int:
        """How far the local log is behind what the master last named."""
        return max(0, self.master_offset - self.replica.max_offset)
