"""Read a broker's store directory directly: consume queues + commit log, no broker, no lock.

The files are RocketMQ's (``commitlog/<20-digit offset>``, ``consumequeue/<topic>/<qid>/<20-digit
offset>``), mapped read-only. A running broker may be appending meanwhile, so a queue ends at its
first empty entry (size <= 0) and every record is checked (magic, size as the consume queue says,
field lengths) before it is decoded; the read stops at the first record that does not check out.
No ``MessageStore`` is opened: that would take the store's lock and write an abort file.
"""

from __future__ import annotations

import logging
import mmap
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from rocketq.codec.message import tags_code
from rocketq.spark._broker import QueueRef
from rocketq.spark._decode import locate, to_record_batch
from rocketq.spark.errors import SourceUnavailableError, SparkOptionError
from rocketq.spark.schema import RowSchema

log = logging.getLogger("rocketq.spark")

CQ_UNIT = 20
CQ_DTYPE = np.dtype([("phys", ">i8"), ("size", ">i4"), ("tags", ">i8")])
_STORE_TS = 56  # STORETIMESTAMP in a record with an IPv4 born host


@dataclass(frozen=True, slots=True)
class _Segment:
    start: int
    path: str
    size: int


def _segments(directory: Path) -> list[_Segment]:
    if not directory.is_dir():
        return []
    out = []
    for p in directory.iterdir():
        if p.name.isdigit() and len(p.name) == 20 and p.is_file():
            out.append(_Segment(int(p.name), str(p), p.stat().st_size))
    return sorted(out, key=lambda s: s.start)


def _map(path: str) -> npt.NDArray[np.uint8] | None:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return None
            mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    except (FileNotFoundError, ValueError):
        return None
    return np.frombuffer(mm, dtype=np.uint8)


class StoreDirectory:
    """A store root (the directory holding ``commitlog/`` and ``consumequeue/``), read-only."""

    def __init__(self, path: str, broker_name: str | None = None) -> None:
        root = Path(path).expanduser()
        if (root / "store" / "commitlog").is_dir():
            root = root / "store"  # a `rocketq up --data-dir` directory
        if not (root / "commitlog").is_dir() or not (root / "consumequeue").is_dir():
            raise SparkOptionError("path", f"{path} is not a rocketq/RocketMQ store directory "
                                           "(no commitlog/ and consumequeue/ in it)")
        self.root = root
        # RocketMQ's default brokerName is the host name; the store itself does not record it.
        self.broker = broker_name or socket.gethostname()
        self._log_segments: list[_Segment] | None = None

    # -- layout ----------------------------------------------------------------------------------

    def all_topics(self) -> list[str]:
        return sorted(p.name for p in (self.root / "consumequeue").iterdir() if p.is_dir())

    def queues(self, topic: str, *, writable: bool = False) -> list[QueueRef]:
        d = self.root / "consumequeue" / topic
        if not d.is_dir():
            return []
        qids = sorted(int(p.name) for p in d.iterdir() if p.is_dir() and p.name.isdigit())
        return [QueueRef(topic, self.broker, q, "") for q in qids]

    def _cq_segments(self, ref: QueueRef) -> list[_Segment]:
        return _segments(self.root / "consumequeue" / ref.topic / str(ref.queue_id))

    def log_segments(self, refresh: bool = False) -> list[_Segment]:
        if self._log_segments is None or refresh:
            self._log_segments = _segments(self.root / "commitlog")
        return self._log_segments

    def min_phys(self) -> int:
        segs = self.log_segments()
        return segs[0].start if segs else 0

    # -- offsets ---------------------------------------------------------------------------------

    def _bounds(self, ref: QueueRef) -> tuple[int, int]:
        segs = self._cq_segments(ref)
        if not segs:
            return 0, 0
        last = segs[-1]
        arr = _map(last.path)
        end = last.start // CQ_UNIT
        if arr is not None:
            ents = arr[: len(arr) - len(arr) % CQ_UNIT].view(CQ_DTYPE)
            bad = np.flatnonzero(ents["size"] <= 0)
            end = last.start // CQ_UNIT + (int(bad[0]) if len(bad) else len(ents))
        lo = segs[0].start // CQ_UNIT
        first = _map(segs[0].path)
        if first is not None:
            ents = first[: len(first) - len(first) % CQ_UNIT].view(CQ_DTYPE)
            n = min(len(ents), max(0, end - lo))
            ok = np.flatnonzero((ents["phys"][:n] >= self.min_phys()) & (ents["size"][:n] > 0))
            lo = lo + int(ok[0]) if len(ok) else min(end, lo + n)
        return lo, end

    def min_offsets(self, refs: Sequence[QueueRef]) -> dict[QueueRef, int]:
        return {r: self._bounds(r)[0] for r in refs}

    def max_offsets(self, refs: Sequence[QueueRef]) -> dict[QueueRef, int]:
        return {r: self._bounds(r)[1] for r in refs}

    def entries(self, ref: QueueRef, start: int, end: int) -> npt.NDArray[np.void]:
        """Consume-queue entries [start, end) (fewer if files are missing at either side)."""
        parts = []
        for seg in self._cq_segments(ref):
            first = seg.start // CQ_UNIT
            count = seg.size // CQ_UNIT
            lo, hi = max(start, first), min(end, first + count)
            if lo >= hi:
                continue
            arr = _map(seg.path)
            if arr is None:
                continue
            parts.append(arr[(lo - first) * CQ_UNIT : (hi - first) * CQ_UNIT].view(CQ_DTYPE))
        if not parts:
            return np.zeros(0, dtype=CQ_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def offsets_for_time(self, refs: Sequence[QueueRef], timestamp_ms: int) -> dict[QueueRef, int]:
        """First offset whose store time is >= ``timestamp_ms`` (the max offset if none)."""
        out = {}
        for ref in refs:
            lo, hi = self._bounds(ref)
            ents = self.entries(ref, lo, hi)
            times = self._store_times(ents["phys"].astype(np.int64))
            idx = int(np.searchsorted(times, timestamp_ms, side="left"))
            out[ref] = lo + idx
        return out

    def _store_times(self, phys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        times = np.full(len(phys), -1, dtype=np.int64)
        segs = self.log_segments()
        if not segs or not len(phys):
            return times
        starts = np.array([s.start for s in segs], dtype=np.int64)
        which = np.searchsorted(starts, phys, side="right") - 1
        for i in np.unique(which[which >= 0]).tolist():
            buf = _map(segs[i].path)
            if buf is None:
                continue
            sel = np.flatnonzero(which == i)
            pos = phys[sel] - starts[i]
            ok = pos + _STORE_TS + 8 <= len(buf)
            raw = buf[pos[ok][:, None] + np.arange(_STORE_TS, _STORE_TS + 8)]
            times[sel[ok]] = raw.view(">i8").reshape(-1)
        # Store times grow with the offset in one queue; keep them monotone for the search.
        return np.maximum.accumulate(times)

    # -- read ------------------------------------------------------------------------------------

    def read(
        self,
        ref: QueueRef,
        start: int,
        end: int,
        schema: RowSchema,
        *,
        tags: Sequence[str] | None = None,
        rows_per_batch: int = 32768,
        on_loss: Callable[[QueueRef, int, int], None] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of queue ``ref`` for offsets [start, end)."""
        lo, hi = self._bounds(ref)
        if start < lo:
            if on_loss is not None:
                on_loss(ref, start, lo)
            start = lo
        end = min(end, hi)
        codes = None if tags is None else np.array(sorted({tags_code(t) for t in tags}), dtype=np.int64)
        segs = self.log_segments(refresh=True)
        seg_starts = np.array([s.start for s in segs], dtype=np.int64)
        maps: dict[int, npt.NDArray[np.uint8] | None] = {}
        pos = start
        while pos < end:
            stop = min(end, pos + rows_per_batch)
            ents = self.entries(ref, pos, stop)
            if not len(ents):
                break
            phys = ents["phys"].astype(np.int64)
            sizes = ents["size"].astype(np.int64)
            offsets = np.arange(pos, pos + len(ents), dtype=np.int64)
            valid = sizes > 0
            if not valid.all():
                cut = int(np.flatnonzero(~valid)[0])
                phys, sizes, offsets, ents = phys[:cut], sizes[:cut], offsets[:cut], ents[:cut]
                stop = pos + cut
                end = stop  # the queue ends here (a running broker has written no further)
            keep = np.ones(len(phys), dtype=bool)
            if codes is not None:
                keep &= np.isin(ents["tags"].astype(np.int64), codes)
            which = np.searchsorted(seg_starts, phys, side="right") - 1
            gone = which < 0
            if gone.any():
                lost = offsets[gone]
                if on_loss is not None:
                    on_loss(ref, int(lost[0]), int(lost[-1]) + 1)
                keep &= ~gone
            truncated = False
            for i in np.unique(which[keep]).tolist():
                if i not in maps:
                    maps[i] = _map(segs[i].path)
                buf = maps[i]
                sel = np.flatnonzero(keep & (which == i))
                if buf is None:
                    if on_loss is not None:
                        on_loss(ref, int(offsets[sel[0]]), int(offsets[sel[-1]]) + 1)
                    continue
                lay = locate(buf, phys[sel] - seg_starts[i], sizes[sel])
                if lay.n < len(sel):
                    log.warning("store reader: %s/%d stops at offset %d (record not yet complete "
                                "or corrupt)", ref.topic, ref.queue_id, int(offsets[sel[lay.n]]))
                    truncated = True
                if lay.n:
                    batch = to_record_batch(lay, schema, broker=self.broker, topic=ref.topic,
                                            tags_filter=tags)
                    if batch.num_rows:
                        yield batch
                if truncated:
                    return
            pos = stop


__all__ = ["SourceUnavailableError", "StoreDirectory"]
