"""KVConfigManager: the name server's namespaced key/value store.

RocketMQ keeps a few namespaces here, most notably ``ORDER_TOPIC_CONFIG`` (topic -> "brokerA:4;brokerB:4",
served to clients as ``orderTopicConf`` and to brokers in the REGISTER_BROKER response). The file format is
RocketMQ's own ``{"configTable": {namespace: {key: value}}}`` so an existing ``kvConfig.json`` carries over.

The table lives in memory; persistence is split into :meth:`KVConfigManager.encode` (a snapshot, cheap,
taken on the event loop so it never races a mutation) and :meth:`KVConfigManager.write` (blocking file I/O
the caller may run in a worker thread). ``write`` replaces the file atomically: tmp + fsync + rename, then
an fsync of the directory so the rename itself survives a crash.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    """Namespace -> key -> value, persisted as JSON at ``path``."""

    __slots__ = ("_path", "_table")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(os.path.expanduser(os.fspath(path)))
        self._table: dict[str, dict[str, str]] = {}

    @property
    def path(self) -> Path:
        return self._path

    def load(self) -> None:
        """Read the file if it exists; a missing file is an empty table, a corrupt one is logged and kept."""
        try:
            raw = self._path.read_bytes()
        except FileNotFoundError:
            return
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Refusing to start would turn a torn admin write into an outage; RocketMQ starts empty too.
            log.warning("load KV config table failed, file is not JSON: %s", self._path)
            return
        table = doc.get("configTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict):
            log.warning("load KV config table failed, no configTable in %s", self._path)
            return
        loaded: dict[str, dict[str, str]] = {}
        for namespace, kv in table.items():
            if isinstance(kv, dict):
                loaded[str(namespace)] = {str(k): str(v) for k, v in kv.items() if v is not None}
        self._table = loaded
        log.info("load KV config table OK, %d namespaces from %s", len(loaded), self._path)

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        kv = self._table.setdefault(namespace, {})
        prev = kv.get(key)
        kv[key] = value
        if prev is None:
            log.info(
                "putKVConfig create new config item, Namespace: %s Key: %s Value: %s", namespace, key, value
            )
        else:
            log.info("putKVConfig update config item, Namespace: %s Key: %s Value: %s", namespace, key, value)

    def delete_kv_config(self, namespace: str, key: str) -> bool:
        kv = self._table.get(namespace)
        if kv is None or key not in kv:
            return False
        value = kv.pop(key)
        if not kv:
            del self._table[namespace]
        log.info(
            "deleteKVConfig delete a config item, Namespace: %s Key: %s Value: %s", namespace, key, value
        )
        return True

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        kv = self._table.get(namespace)
        return None if kv is None else kv.get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace, or None when it has no entry (RocketMQ answers QUERY_NOT_FOUND then)."""
        kv = self._table.get(namespace)
        return None if kv is None else dict(kv)

    def encode(self) -> bytes:
        return orjson.dumps({"configTable": self._table}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    def write(self, data: bytes) -> None:
        """Atomically replace the file with ``data`` (blocking: fsyncs)."""
        directory = self._path.parent
        directory.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_name(self._path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._path)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def persist(self) -> None:
        """Snapshot and write in one blocking call (for callers not on an event loop, and tests)."""
        self.write(self.encode())
