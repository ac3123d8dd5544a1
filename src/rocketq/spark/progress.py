"""Per-queue lag from a streaming query's progress.

PySpark's Python stream reader has no ``metrics()`` hook (4.3), so the lag cannot be a custom
metric of the source. Spark does put the source's ``latestOffset`` (what the queues hold, asked
at every trigger) next to ``endOffset`` (what the batch read up to) in each progress entry,
both in the connector's offsets JSON; their difference is the lag a Kafka user reads from
``avgOffsetsBehindLatest`` / ``maxOffsetsBehindLatest``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _offsets(value: Any) -> dict[str, int]:
    doc = json.loads(value) if isinstance(value, str) else value
    out: dict[str, int] = {}
    for topic, brokers in (doc or {}).items():
        for broker, queues in brokers.items():
            for qid, off in queues.items():
                out[f"{topic}/{broker}/{qid}"] = int(off)
    return out


def _get(obj: Any, key: str) -> Any:
    return obj[key] if isinstance(obj, Mapping) else getattr(obj, key)


def queue_lag(progress: Any) -> dict[str, int]:
    """``{"topic/broker/queueId": latestOffset - endOffset}`` over the rocketq sources of one
    progress entry (``query.lastProgress`` or an item of ``query.recentProgress``); sources that
    reported no latest offset, or whose offsets are not rocketq's, are left out."""
    lag: dict[str, int] = {}
    for source in _get(progress, "sources"):
        latest = _get(source, "latestOffset")
        if not latest:
            continue
        try:
            top, end = _offsets(latest), _offsets(_get(source, "endOffset"))
        except (AttributeError, TypeError, ValueError):
            continue  # not our three-level offsets (Spark names Python sources only by class)
        for queue, off in top.items():
            lag[queue] = max(0, off - end.get(queue, off))
    return lag
