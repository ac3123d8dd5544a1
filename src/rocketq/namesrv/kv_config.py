"""KVConfigManager: the name server's namespaced key/value store.

RocketMQ keeps a few namespaces here, most notably ``ORDER_TOPIC_CONFIG`` (topic -> "brokerA:4;brokerB:4",
served to clients as ``orderTopicConf`` and to brokers in the REGISTER_BROKER response). The file format is
RocketMQ's own ``{"configTable": {namespace: {key: value}}}`` so an existing ``kvConfig.json`` carries over.

The table lives in memory; :attr:`KVConfigManager.writer` is the file's one writer (it snapshots with
:meth:`KVConfigManager.encode` on the event loop, so never mid-change, and replaces the file atomically
with a ``.bak`` of the previous one in a worker thread, see ``rocketq.configfile``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

from rocketq.configfile import ConfigFileWriter, read_candidates, remove_stale_temps

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    """Namespace -> key -> value, persisted as JSON at ``path``."""

    __slots__ = ("_path", "_table", "writer")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(os.path.expanduser(os.fspath(path)))
        self._table: dict[str, dict[str, str]] = {}
        self.writer = ConfigFileWriter(self._path, self.encode)

    @property
    def path(self) -> Path:
        return self._path

    def load(self) -> None:
        """Read the file (or its .bak) if there is one; a missing file is an empty table, and so is a
        corrupt one without a usable backup (logged: refusing to start would turn a torn admin write
        into an outage)."""
        remove_stale_temps(self._path)
        for candidate, raw in read_candidates(self._path):
            table = self._decode(candidate, raw)
            if table is not None:
                self._table = table
                log.info("load KV config table OK, %d namespaces from %s", len(table), candidate)
                return

    @staticmethod
    def _decode(candidate: Path, raw: bytes) -> dict[str, dict[str, str]] | None:
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            log.warning("load KV config table failed, file is not JSON: %s", candidate)
            return None
        table = doc.get("configTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict):
            log.warning("load KV config table failed, no configTable in %s", candidate)
            return None
        loaded: dict[str, dict[str, str]] = {}
        for namespace, kv in table.items():
            if isinstance(kv, dict):
                loaded[str(namespace)] = {str(k): str(v) for k, v in kv.items() if v is not None}
        return loaded

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

    def persist(self) -> None:
        """Snapshot and write in one blocking call (for callers not on an event loop, and tests)."""
        self.writer.write_now()
