"""Consumer offset stores: where a group remembers "next message to consume" per queue.

* ``RemoteBrokerOffsetStore`` (clustering): offsets live on the broker. The consumer keeps them in
  memory, piggybacks the current one on every pull (commit-offset flag) and sends them one-way every
  ``persistConsumerOffsetInterval`` (5 s), when a queue is rebalanced away and at shutdown.
* ``LocalFileOffsetStore`` (broadcasting): every consumer has its own offsets, in
  ``<store_dir>/<clientId>/<group>/offsets.json`` (``~/.rocketmq_offsets`` by default, like Java).

Both keep offsets in a dict touched only on the event loop; reads of the in-memory value are plain
method calls because the pull loop asks on every pull.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import logging
import os
from collections.abc import Iterable, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

from rocketq.client.condition_log import ConditionLog
from rocketq.codec import fastjson
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader
from rocketq.errors import BrokerNotFound, RemotingError

__all__ = [
    "LocalFileOffsetStore",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "default_local_offset_store_dir",
]

log = logging.getLogger("rocketq.client")

# read_offset results besides real offsets (Java's conventions).
OFFSET_NOT_FOUND = -1
OFFSET_READ_ERROR = -2


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(abc.ABC):
    """What push and lite-pull consumers need from an offset store."""

    def __init__(self, group_name: str) -> None:
        self.group_name = group_name
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:  # noqa: B027 - optional: only the local store has anything to load
        """Read persisted offsets into memory (only the local store has any)."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        table = self.offset_table
        if increase_only:
            old = table.get(mq)
            if old is not None and old >= offset:
                return
        table[mq] = offset

    def read_offset_in_memory(self, mq: MessageQueue) -> int:
        return self.offset_table.get(mq, OFFSET_NOT_FOUND)

    async def read_offset(self, mq: MessageQueue, type_: ReadOffsetType) -> int:
        """The offset of ``mq``: -1 when there is none, -2 when the store could not be read."""
        if type_ is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if type_ is ReadOffsetType.READ_FROM_MEMORY:
                return OFFSET_NOT_FOUND
        return await self._read_from_store(mq)

    @abc.abstractmethod
    async def _read_from_store(self, mq: MessageQueue) -> int: ...

    @abc.abstractmethod
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Persist the offsets of ``mqs`` (the queues still assigned)."""

    @abc.abstractmethod
    async def persist(self, mq: MessageQueue) -> None: ...

    def remove_offset(self, mq: MessageQueue) -> None:
        if self.offset_table.pop(mq, None) is not None:
            log.info("remove unnecessary messageQueue offset. group=%s, mq=%s", self.group_name, mq)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.offset_table.items() if topic is None or mq.topic == topic}

    async def update_consume_offset_to_broker(  # noqa: B027 - a no-op unless the store is remote
        self, mq: MessageQueue, offset: int, is_oneway: bool = True
    ) -> None:
        """Only the remote store talks to brokers; a no-op elsewhere."""


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets kept by the broker (clustering mode)."""

    def __init__(self, client: Any, group_name: str) -> None:
        super().__init__(group_name)
        # An MQClientInstance: find_broker_address_in_subscribe, update_topic_route_info_from_name_server,
        # refresh_route_soon, api (query_consumer_offset / update_consumer_offset[_oneway]),
        # config.mq_client_api_timeout.
        self._client = client
        # The offset each queue had on the broker when we last read or wrote it. Persisting that
        # same value again could only move the broker back: a queue taken over and dropped again
        # before consuming anything would otherwise overwrite what its other owner stored since.
        self._on_broker: dict[MessageQueue, int] = {}
        # A broker that is gone fails every read and write of each of its queues, every few
        # seconds, until it is back: one WARNING per broker and direction while it lasts.
        self._failing = ConditionLog(log, logging.WARNING)

    async def _broker_addr(self, mq: MessageQueue) -> str:
        client = self._client
        addr = client.find_broker_address_in_subscribe(mq.broker_name)
        if not addr:
            await client.update_topic_route_info_from_name_server(mq.topic)
            addr = client.find_broker_address_in_subscribe(mq.broker_name)
        if not addr:
            raise BrokerNotFound(f"The broker[{mq.broker_name}] not exist")
        return str(addr)

    def _timeout(self) -> float:
        return float(self._client.config.mq_client_api_timeout) / 1000.0

    async def _read_from_store(self, mq: MessageQueue) -> int:
        try:
            addr = await self._broker_addr(mq)
            header = QueryConsumerOffsetRequestHeader(self.group_name, mq.topic, mq.queue_id)
            offset = int(await self._client.api.query_consumer_offset(addr, header, self._timeout()))
        except Exception as e:
            if getattr(e, "code", None) == ResponseCode.QUERY_NOT_FOUND:
                return OFFSET_NOT_FOUND
            self._failing.report(("read", mq.broker_name), "failing",
                                 "fetchConsumeOffsetFromBroker exception, mq=%s: %s (said once per broker "
                                 "until a read from it succeeds)", mq, e)
            return OFFSET_READ_ERROR
        self._failing.clear(("read", mq.broker_name))
        if offset < 0:
            return OFFSET_NOT_FOUND
        self.update_offset(mq, offset, False)
        self._on_broker[mq] = offset
        return offset

    def remove_offset(self, mq: MessageQueue) -> None:
        self._on_broker.pop(mq, None)
        super().remove_offset(mq)

    def _unchanged(self, mq: MessageQueue, offset: int) -> bool:
        return self._on_broker.get(mq) == offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        keep = set(mqs)
        if not keep:
            return
        unused = []
        for mq, offset in list(self.offset_table.items()):
            if mq in keep:
                if self._unchanged(mq, offset):
                    continue
                await self._push(mq, offset, "persistAll", logging.DEBUG)
            else:
                unused.append(mq)
        for mq in unused:
            del self.offset_table[mq]
            log.info("remove unused mq, %s, %s", mq, self.group_name)

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offset_table.get(mq)
        if offset is None or self._unchanged(mq, offset):
            return
        await self._push(mq, offset, "persist", logging.INFO)

    async def _push(self, mq: MessageQueue, offset: int, caller: str, level: int) -> None:
        """One offset to the broker; a failure is logged, the next persist round retries it."""
        try:
            await self.update_consume_offset_to_broker(mq, offset)
            log.log(level, "[%s] Group: %s ClientId: %s updateConsumeOffsetToBroker %s %d",
                    caller, self.group_name, self._client.client_id, mq, offset)
            self._failing.clear(("write", mq.broker_name))
        except Exception as e:
            if isinstance(e, RemotingError):  # the broker moved? (see ConsumerInner._check_reachable)
                self._client.refresh_route_soon(mq.topic)
            self._failing.report(("write", mq.broker_name), "failing",
                                 "updateConsumeOffsetToBroker exception, %s: %s (said once per broker "
                                 "until a write to it succeeds)", mq, e)

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, is_oneway: bool = True
    ) -> None:
        addr = await self._broker_addr(mq)
        api = self._client.api
        header = UpdateConsumerOffsetRequestHeader(self.group_name, mq.topic, mq.queue_id, offset)
        if is_oneway:
            await api.update_consumer_offset_oneway(addr, header)
        else:
            await api.update_consumer_offset(addr, header, self._timeout())
        self._on_broker[mq] = offset


# -- local file ---------------------------------------------------------------------------------------


def default_local_offset_store_dir() -> str:
    """``rocketmq.client.localOffsetStoreDir``'s default: ``~/.rocketmq_offsets``."""
    return os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR") or str(Path.home() / ".rocketmq_offsets")


def encode_offset_file(table: Mapping[MessageQueue, int]) -> bytes:
    """``OffsetSerializeWrapper`` the way a Java client writes it (queue objects as map keys)."""
    return fastjson.dumps_mq_table(
        (fastjson.mq_key(mq.topic, mq.broker_name, mq.queue_id), b"%d" % offset)
        for mq, offset in sorted(table.items(), key=itemgetter(0))
    )


def decode_offset_file(data: bytes | str) -> dict[MessageQueue, int]:
    """Read what ``encode_offset_file`` (or a Java client) wrote; ValueError if it is not that.

    fastjson writes Map<MessageQueue, AtomicLong> with the queue objects themselves as keys:
    ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}``."""
    try:
        table = mq_table(fastjson.loads(data).get("offsetTable") or {}, "offsetTable")
        return {mq: int(value) for mq, value in table.items()}
    except Exception as e:
        raise ValueError(f"bad offsets file: {e}") from None


class LocalFileOffsetStore(OffsetStore):
    """Offsets in a local file (broadcasting mode), written atomically with a ``.bak`` copy."""

    def __init__(
        self, client_id: str, group_name: str, store_dir: str | os.PathLike[str] | None = None
    ) -> None:
        super().__init__(group_name)
        base = Path(store_dir) if store_dir is not None else Path(default_local_offset_store_dir())
        self.store_path = base / client_id / group_name / "offsets.json"
        self._write_lock = asyncio.Lock()

    async def load(self) -> None:
        table = await asyncio.to_thread(self._read_local)
        for mq, offset in table.items():
            self.offset_table[mq] = offset
            log.info("load consumer's offset, %s %s %d", self.group_name, mq, offset)

    def _read_local(self) -> dict[MessageQueue, int]:
        for path in (self.store_path, self.store_path.with_name(self.store_path.name + ".bak")):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                return decode_offset_file(data)
            except ValueError as e:
                log.warning("readLocalOffset %s failed: %s", path, e)
        return {}

    async def _read_from_store(self, mq: MessageQueue) -> int:
        try:
            table = await asyncio.to_thread(self._read_local)
        except OSError as e:
            log.warning("readLocalOffset exception: %s", e)
            return OFFSET_READ_ERROR
        offset = table.get(mq)
        if offset is None:
            return OFFSET_NOT_FOUND
        self.update_offset(mq, offset, False)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        keep = set(mqs)
        if not keep:
            return
        snapshot = {mq: off for mq, off in self.offset_table.items() if mq in keep}
        async with self._write_lock:
            await asyncio.to_thread(self._write_local, snapshot)

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offset_table.get(mq)
        if offset is None:
            return
        async with self._write_lock:
            await asyncio.to_thread(self._merge_local, mq, offset)

    def _merge_local(self, mq: MessageQueue, offset: int) -> None:
        table = self._read_local()
        table[mq] = offset
        self._write_local(table)

    def _write_local(self, table: Mapping[MessageQueue, int]) -> None:
        path = self.store_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as f:
            f.write(encode_offset_file(table))
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.replace(path, path.with_name(path.name + ".bak"))
        os.replace(tmp, path)
