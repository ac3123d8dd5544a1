"""Helpers of the store tests. Stores are small: 64 KiB commit-log segments, 100-entry
consume-queue files and a tiny index, so roll-overs, retention and recovery happen with a
handful of messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocketq.codec.message import UniqIdGenerator, decode_messages, encode_properties, tags_code
from rocketq.store import GetMessageStatus, MessageStore, MessageStoreConfig, MessageToStore

SMALL = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 100 * 20,
    "max_hash_slot_num": 64,
    "max_index_num": 400,
}

_ids = UniqIdGenerator("10.0.0.9")


def small_config(root: Path, **overrides: Any) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), **{**SMALL, **overrides})


def msg(
    topic: str = "TopicA",
    queue_id: int = 0,
    body: bytes = b"hello",
    tags: str | None = None,
    keys: str | None = None,
    uniq: str | None = None,
    **kw: Any,
) -> MessageToStore:
    """A message as the broker would hand it over (UNIQ_KEY always set)."""
    uniq = uniq or _ids.next_id()
    props = {"UNIQ_KEY": uniq, "WAIT": "true"}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    index_keys = (uniq, *(keys.split() if keys else ()))
    return MessageToStore(
        topic, queue_id, body, properties=encode_properties(props), tags_code=tags_code(tags),
        keys=index_keys, born_timestamp=1_700_000_000_000, born_host=("10.0.0.9", 5555), **kw,
    )


def bodies(store: MessageStore, topic: str = "TopicA", queue_id: int = 0) -> list[bytes]:
    """Every body of one queue, read through get_message from the queue's first offset."""
    out: list[bytes] = []
    off = store.get_min_offset_in_queue(topic, queue_id)
    while True:
        r = store.get_message(topic, queue_id, off, 32)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += [m.body for m in decode_messages(r.body())]
        off = r.next_begin_offset
