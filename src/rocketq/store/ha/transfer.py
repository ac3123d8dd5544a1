"""The master's side of the store: what to send a slave next, and SYNC_MASTER's wait for the slave
(RocketMQ's HAService.push2SlaveMaxOffset / isSlaveOK and its GroupTransferService).

A SYNC_MASTER put waits until some slave reported an offset at or past the end of the message
(one slave suffices, as in RocketMQ). Puts are appended in offset order and every wait has the
same timeout, so the waiters form a queue ordered both by target and by deadline: an ack pops
from the front, and one timer expires from the front.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from rocketq.store.commitlog import CommitLog
from rocketq.store.model import PutMessageStatus


def transfer_chunk(commit_log: CommitLog, offset: int, max_size: int) -> memoryview | None:
    """Up to `max_size` bytes of the commit log from `offset`, within one segment (as the master's
    getCommitLogData): None when nothing is there yet."""
    mf = commit_log.mfq.find(offset)
    if mf is None or mf.closed:
        return None
    pos = offset - mf.file_from_offset
    size = min(max_size, mf.wrote_position - pos)
    if size <= 0:
        return None
    return mf.buf[pos : pos + size]


class GroupTransfer:
    """Slave acks and the SYNC_MASTER puts waiting for them."""

    def __init__(self, timeout_ms: int, fallbehind_max: int) -> None:
        self.timeout_ms = timeout_ms
        self.fallbehind_max = fallbehind_max
        self.push2slave_max_offset = 0
        self.connection_count = 0
        self._waiting: deque[tuple[int, float, asyncio.Future[bool]]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and not too far behind to wait for."""
        behind = master_put_where - self.push2slave_max_offset
        return self.connection_count > 0 and behind < self.fallbehind_max

    def request(self, target: int) -> asyncio.Future[bool]:
        """True once a slave holds everything below `target`; False after slaveTimeout."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if target <= self.push2slave_max_offset:
            fut.set_result(True)
            return fut
        self._waiting.append((target, time.monotonic() + self.timeout_ms / 1000, fut))
        if self._timer is None:
            self._timer = loop.call_later(self.timeout_ms / 1000, self._expire)
        return fut

    def acked(self, offset: int) -> None:
        """A slave reported `offset`: release every put it covers."""
        if offset <= self.push2slave_max_offset:
            return
        self.push2slave_max_offset = offset
        waiting = self._waiting
        while waiting and waiting[0][0] <= offset:
            fut = waiting.popleft()[2]
            if not fut.done():
                fut.set_result(True)

    def _expire(self) -> None:
        self._timer = None
        now = time.monotonic()
        waiting = self._waiting
        while waiting and waiting[0][1] <= now:
            fut = waiting.popleft()[2]
            if not fut.done():
                fut.set_result(False)
        if waiting:
            self._timer = asyncio.get_running_loop().call_later(waiting[0][1] - now, self._expire)

    def reset(self) -> None:
        """A role change: the waiting puts fail (FLUSH_SLAVE_TIMEOUT) and the acks seen so far
        are forgotten. Only a slave of the current epoch may confirm a put: a demoted master's
        log is cut back to the new master's, and a master promoted again counts acks afresh
        (its log may have been cut below the offsets its slaves reported before)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.push2slave_max_offset = 0
        while self._waiting:
            fut = self._waiting.popleft()[2]
            if not fut.done():
                fut.set_result(False)

    def close(self) -> None:
        """Shutdown: nobody answers the waiting puts."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting:
            self._waiting.popleft()[2].cancel()


def _status_of(flush: asyncio.Future[bool] | None, replica: asyncio.Future[bool] | PutMessageStatus | None
               ) -> PutMessageStatus:
    status = PutMessageStatus.PUT_OK
    if flush is not None and not flush.result():
        status = PutMessageStatus.FLUSH_DISK_TIMEOUT
    if isinstance(replica, PutMessageStatus):
        status = replica
    elif replica is not None and not replica.result():
        status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    return status


def combined_wait(flush: asyncio.Future[bool] | None, transfer: GroupTransfer | None,
                  target: int) -> asyncio.Future[PutMessageStatus]:
    """The SYNC_FLUSH wait and the SYNC_MASTER wait of a put ending at `target`, as one status.
    As RocketMQ's thenCombine: the replica's failure wins over the disk's."""
    replica: asyncio.Future[bool] | PutMessageStatus | None = None
    if transfer is not None:
        replica = transfer.request(target) if transfer.is_slave_ok(target) \
            else PutMessageStatus.SLAVE_NOT_AVAILABLE
    waits = [f for f in (flush, replica) if isinstance(f, asyncio.Future)]
    out: asyncio.Future[PutMessageStatus] = asyncio.get_running_loop().create_future()

    def done(_: object) -> None:
        if out.done() or not all(f.done() for f in waits):
            return
        if any(f.cancelled() for f in waits):
            out.cancel()
            return
        out.set_result(_status_of(flush, replica))

    if not waits:
        out.set_result(_status_of(None, replica))
    for f in waits:
        f.add_done_callback(done)
    return out
