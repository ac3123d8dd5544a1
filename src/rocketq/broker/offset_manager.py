"""ConsumerOffsetManager: committed offsets per (topic, group, queue) and `config/consumerOffset.json`.

The file is RocketMQ's: `{"offsetTable":{"<topic>@<group>":{"<queueId>":<offset>}}}`. The Java broker writes
it with fastjson, whose integer map keys are unquoted (`{0:12}`); loading accepts both spellings so a data
directory written by a Java broker still works. An offset is "the next message to consume".
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from rocketq.codec.bodies import ConsumerOffsetSerializeWrapper, loads_lenient
from rocketq.configfile import ConfigFileWriter, read_candidates, remove_stale_temps
from rocketq.errors import ProtocolError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.offset")

TOPIC_GROUP_SEPARATOR = "@"


def decode_offset_table(data: bytes) -> dict[str, dict[int, int]]:
    """The offsetTable of a consumerOffset.json document; ValueError on anything malformed."""
    try:
        doc = loads_lenient(data)
    except ProtocolError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(doc, dict):
        raise ValueError("consumer offset document is not a JSON object")
    raw = doc.get("offsetTable")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError("offsetTable is not a JSON object")
    table: dict[str, dict[int, int]] = {}
    for key, queues in raw.items():
        if not isinstance(queues, dict) or TOPIC_GROUP_SEPARATOR not in key:
            raise ValueError(f"bad offsetTable entry {key!r}")
        table[key] = {int(qid): int(off) for qid, off in queues.items()}
    return table


class ConsumerOffsetManager:
    """Offsets committed by consumer groups (RocketMQ ConsumerOffsetManager).

    Mutated only on the event loop. Like RocketMQ, commits reach the disk on a timer
    (`persist_async`, every flushConsumerOffsetInterval) and at shutdown (`flush`), through the
    file's one writer; `persist()` writes synchronously where no loop runs (tools, tests).
    """

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        # "<topic>@<group>" -> {queueId: offset}
        self.offset_table: dict[str, dict[int, int]] = {}
        # "<topic>@<group>" -> {queueId: the offset an admin set (cloneGroupOffset, resetOffsetByTime)}.
        # The group got nothing below it by pulling, and GROUP_GET_NUMS (statsAll's OutMsg24Hour)
        # counts only what a group got, as RocketMQ's counter moves only on pulls. In memory, as
        # RocketMQ's stats are.
        self.admin_set: dict[str, dict[int, int]] = {}
        self._version = 0
        self._persisted_version = 0
        self._writer = ConfigFileWriter(self.path, self.encode)

    @property
    def path(self) -> Path:
        root = Path(self._ctl.store_config.store_path_root_dir).expanduser()
        return root / "config" / "consumerOffset.json"

    # -- commits and queries -----------------------------------------------------------------

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic + TOPIC_GROUP_SEPARATOR + group
        queues = self.offset_table.get(key)
        if queues is None:
            self.offset_table[key] = {queue_id: offset}
        else:
            old = queues.get(queue_id)
            queues[queue_id] = offset
            if old is not None and offset < old:
                log.debug("[NOTIFYME]update consumer offset less than store. clientHost=%s, key=%s, "
                          "queueId=%d, requestOffset=%d, storeOffset=%d",
                          client_host, key, queue_id, offset, old)
        self._version += 1

    def merge_from_master(self, table: dict[str, dict[int, int]]) -> None:
        """A slave takes its master's offsets over its own (SlaveSynchronize: putAll)."""
        if any(self.offset_table.get(k) != v for k, v in table.items()):
            self.offset_table.update({k: dict(v) for k, v in table.items()})
            self._version += 1

    def admin_commit(self, client_host: str, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Offsets an admin moved the group to (resetOffsetByTime): committed, and not consumed."""
        for queue_id, offset in offsets.items():
            self.commit_offset(client_host, group, topic, queue_id, offset)
        self.admin_set.setdefault(topic + TOPIC_GROUP_SEPARATOR + group, {}).update(offsets)

    def consumed_since(self, group: str, topic: str, queue_id: int) -> int:
        """Where the group's own consumption of the queue starts: the offset an admin last set, else 0."""
        return self.admin_set.get(topic + TOPIC_GROUP_SEPARATOR + group, {}).get(queue_id, 0)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        queues = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            topic, _, g = key.partition(TOPIC_GROUP_SEPARATOR)
            if g == group:
                out.add(topic)
        return out

    def which_group_by_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            t, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            if t == topic:
                out.add(group)
        return out

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        queues = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + src_group)
        if queues is not None:
            self.offset_table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(queues)
            self.admin_set[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(queues)
            self._version += 1

    def remove_offset(self, group: str) -> None:
        """Forget every offset of a consumer group (DELETE_SUBSCRIPTIONGROUP with clean offsets)."""
        for key in [k for k in self.offset_table if k.partition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self.offset_table[key]
            self.admin_set.pop(key, None)
            log.warning("clean group offset, %s", key)
            self._version += 1

    def clean_offset_by_topic(self, topic: str) -> None:
        """Forget every offset of a topic (DELETE_TOPIC_IN_BROKER)."""
        for key in [k for k in self.offset_table if k.partition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self.offset_table[key]
            self.admin_set.pop(key, None)
            log.warning("clean topic offset, %s", key)
            self._version += 1

    def remove_consumer_offset(self, topic_at_group: str) -> None:
        self.admin_set.pop(topic_at_group, None)
        if self.offset_table.pop(topic_at_group, None) is not None:
            self._version += 1

    # -- persistence -------------------------------------------------------------------------

    def encode(self) -> bytes:
        return ConsumerOffsetSerializeWrapper(self.offset_table).to_json()

    def decode(self, data: bytes) -> None:
        self.offset_table = decode_offset_table(data)

    def load(self) -> bool:
        """Read consumerOffset.json (or its .bak). A missing file is a fresh broker: True."""
        remove_stale_temps(self.path)
        candidates = read_candidates(self.path)
        if not candidates:
            return True
        for candidate, data in candidates:
            try:
                self.decode(data)
            except (ValueError, TypeError) as exc:
                log.warning("load %s failed: %s", candidate, exc)
                continue
            log.info("load consumer offsets OK, %s, %d topic@group entries", candidate,
                     len(self.offset_table))
            self._persisted_version = self._version
            return True
        log.error("load consumer offsets failed: neither %s nor its backup is readable", self.path)
        return False

    def _unchanged(self) -> bool:
        return self._version == self._persisted_version and self.path.exists()

    def persist(self) -> None:
        """Write the table now if anything changed since the last write (no loop running)."""
        if self._unchanged():
            return
        version = self._version
        self._writer.write_now()
        self._persisted_version = version

    async def persist_async(self) -> None:
        """Like persist(), through the file's writer (snapshot on the loop, fsync in a thread)."""
        if self._unchanged():
            return
        version = self._version
        if await self._writer.request() is None:
            self._persisted_version = max(self._persisted_version, version)

    async def flush(self) -> None:
        """Let a timer's write finish, then write what changed since (shutdown)."""
        await self._writer.idle()
        await self.persist_async()
