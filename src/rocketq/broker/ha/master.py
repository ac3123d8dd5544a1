"""The master's HA port (RocketMQ 4.x HAService + HAConnection) on asyncio streams.

Each slave connection has a reading side (the slave's 8-byte offset reports: the first one says
where to start, every one is an ack for SYNC_MASTER) and a writing side (transfers of at most
haTransferBatchSize bytes, several per write while the slave is behind, a heartbeat transfer of
size 0 after haSendHeartbeatInterval of silence). The bytes are `codec/ha.py`'s; what to send and
the SYNC_MASTER waits are the store's (`store/ha/`).

Two choices differ from RocketMQ and are visible on the wire only as the offset transfers start
from: an empty slave (it reports 0) gets the master's whole retained log, not just its last
segment; a slave that reports an offset past the master's end is told the master's end in a
heartbeat (a rocketq slave truncates to it; a Java slave logs the mismatch and reconnects).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketq.codec.ha import SlaveReportDecoder, encode_transfer_header
from rocketq.errors import ProtocolError
from rocketq.store.ha import GroupTransfer, transfer_chunk

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.ha")

# Bytes written to one slave before waiting for the socket to drain (many transfers per write).
WRITE_BUDGET = 1 << 20
IDLE_WAIT = 0.5  # an append wakes the writers at once; this only bounds a missed wake-up


@dataclass(frozen=True, slots=True)
class SlaveState:
    """One connected slave, as haStatus and the metrics show it."""

    addr: str
    acked_offset: int
    transferred_offset: int
    transfer_from: int
    bytes_per_second: int
    last_report_ms: int


class RateWindow:
    """Bytes in the last whole second (haStatus's transferredByteInSecond)."""

    __slots__ = ("_count", "_last", "_second")

    def __init__(self) -> None:
        self._second = 0
        self._count = 0
        self._last = 0

    def add(self, n: int) -> None:
        sec = int(time.monotonic())
        if sec != self._second:
            self._last = self._count if sec == self._second + 1 else 0
            self._second, self._count = sec, 0
        self._count += n

    def value(self) -> int:
        sec = int(time.monotonic())
        if sec == self._second:
            return self._last
        return self._count if sec == self._second + 1 else 0


class HAConnection:
    def __init__(self, service: HAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.slave_request_offset = -1
        self.acked_offset = -1
        self.next_transfer = -1
        self.transfer_from = -1
        self.last_report_ms = 0
        self.rate = RateWindow()
        self._wake = asyncio.Event()
        self._started = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    def state(self) -> SlaveState:
        return SlaveState(self.addr, self.acked_offset, self.next_transfer, self.transfer_from,
                          self.rate.value(), self.last_report_ms)

    async def run(self) -> None:
        reading = asyncio.ensure_future(self._read())
        writing = asyncio.ensure_future(self._write())
        try:
            done, _ = await asyncio.wait((reading, writing), return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if not t.cancelled() and t.exception() is not None:
                    log.warning("HA connection %s ended: %s", self.addr, t.exception())
        finally:
            for t in (reading, writing):
                t.cancel()
            await asyncio.gather(reading, writing, return_exceptions=True)
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()

    async def _read(self) -> None:
        decoder = SlaveReportDecoder()
        housekeeping = self.service.config.ha_housekeeping_interval / 1000
        while not self.service.stopping:
            data = await asyncio.wait_for(self.reader.read(1 << 16), housekeeping)
            if not data:
                return
            offset = decoder.feed(data)
            if offset is None:
                continue
            self.last_report_ms = int(time.time() * 1000)
            self.acked_offset = offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("slave %s requests offset %d", self.addr, offset)
                self._started.set()
            if offset <= self.service.store.commit_log.max_offset:
                # a slave past this log's end holds another master's tail (it truncates once
                # told): its reports confirm no put of this one
                self.service.acked(offset)

    async def _write(self) -> None:
        await self._started.wait()
        cfg = self.service.config
        cl = self.service.store.commit_log
        requested = self.slave_request_offset
        if requested == 0:
            self.next_transfer = cl.min_offset
        elif requested > cl.max_offset:
            log.warning("slave %s is at %d, past this master's end %d: telling it to truncate", self.addr,
                        requested, cl.max_offset)
            self.next_transfer = cl.max_offset
        else:
            self.next_transfer = requested
            if requested < cl.min_offset:
                log.warning("slave %s is at %d, before this master's first retained offset %d: it cannot "
                            "catch up (empty its store to copy everything anew)", self.addr, requested,
                            cl.min_offset)
        self.transfer_from = self.next_transfer
        log.info("master transfers to slave %s from %d (it requested %d)", self.addr, self.next_transfer,
                 requested)
        writer = self.writer
        batch = cfg.ha_transfer_batch_size
        heartbeat = cfg.ha_send_heartbeat_interval / 1000
        last_write = 0.0
        if self.next_transfer != requested:
            writer.write(encode_transfer_header(self.next_transfer, 0))
            await writer.drain()
            last_write = time.monotonic()
        while not self.service.stopping:
            self._wake.clear()
            budget = WRITE_BUDGET
            while budget > 0:
                chunk = transfer_chunk(cl, self.next_transfer, batch)
                if chunk is None:
                    break
                n = len(chunk)
                writer.write(encode_transfer_header(self.next_transfer, n))
                writer.write(bytes(chunk))  # a copy: a segment must stay deletable while we wait
                del chunk
                self.next_transfer += n
                budget -= n
                self.rate.add(n)
            now = time.monotonic()
            if budget < WRITE_BUDGET:
                await writer.drain()
                last_write = now
                continue
            if now - last_write >= heartbeat:
                writer.write(encode_transfer_header(self.next_transfer, 0))
                await writer.drain()
                last_write = now
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(IDLE_WAIT, heartbeat)):
                    await self._wake.wait()


class HAService:
    """Accepts slaves on the HA port; owns the SYNC_MASTER waits (GroupTransfer)."""

    def __init__(self, controller: BrokerController,
                 on_connections: Callable[[], None] | None = None) -> None:
        self._ctl = controller
        self._on_connections = on_connections  # a slave connected or left
        self.store = controller.store
        self.config = controller.store_config
        self.group_transfer = GroupTransfer(self.config.slave_timeout, self.config.ha_slave_fallbehind_max)
        self.connections: set[HAConnection] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.stopping = False

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HA service listening on %s:%d", host, self.port)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        self.connections.add(conn)
        self.group_transfer.connection_count = len(self.connections)
        log.info("HA connection from slave %s", conn.addr)
        if self._on_connections is not None:
            self._on_connections()
        task = asyncio.ensure_future(self._serve(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: HAConnection) -> None:
        try:
            await conn.run()
        except (OSError, ProtocolError, TimeoutError) as exc:
            log.warning("HA connection %s failed: %s", conn.addr, exc)
        finally:
            self.connections.discard(conn)
            self.group_transfer.connection_count = len(self.connections)
            log.info("HA connection to slave %s closed", conn.addr)
            if self._on_connections is not None and not self.stopping:
                self._on_connections()

    def acked(self, offset: int) -> None:
        self.group_transfer.acked(offset)

    def notify_appended(self) -> None:
        """New bytes in the commit log: wake every writer."""
        for conn in self.connections:
            conn.wake()

    def slaves(self) -> list[SlaveState]:
        return [c.state() for c in self.connections if c.slave_request_offset >= 0]

    async def shutdown(self) -> None:
        self.stopping = True  # the loops watch it too: see HAClient.shutdown
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in self.connections:
            conn.wake()
            conn.writer.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.group_transfer.close()
