"""Start-up recovery: find where the commit log really ends, cut the torn tail, and make the
consume queues and the index agree with it again.

Normal start (no abort file): the last three segments are re-checked. Abnormal start (abort file
left by a crash): checking starts at the segment whose first record is older than the
checkpoint's flushed timestamps (RocketMQ's rule), earlier if a consume queue has a hole or the
index lags. Every record from there is verified: magic, size, its own physical offset (a stale
record at the wrong place fails this), field lengths, and the body CRC when
`check_crc_on_recover`. The first bad record ends the log; everything after it is zeroed.

Consume-queue entries pointing past the end are dropped; records in the checked range that no
consume queue points at are re-dispatched at the queue offset stored in the record itself, so
the per-queue counters come back exactly and nothing is dispatched twice. Index keys are rebuilt
for the records after the newest indexed one.

Only the walk over record sizes and the CRC calls are per-record Python; all other checks are
numpy gathers over the mapped segment.
"""

from __future__ import annotations

import itertools
import logging
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketq.codec.crc import crc32
from rocketq.codec.message import MessageConst, tags_code
from rocketq.codec.properties import needle
from rocketq.codec.record import (
    BLANK_MAGIC,
    BODY_CRC_AT,
    MAGIC_AT,
    MAGIC_V1,
    MAGIC_V2,
    MAX_TOPIC_LENGTH_V1,
    MIN_RECORD_LENGTH,
    PHYS_OFFSET_AT,
    QUEUE_ID_AT,
    QUEUE_OFFSET_AT,
    SIZE_AT,
    SIZE_MAGIC,
    SYS_FLAG_AT,
    MessageSysFlag,
    body_at,
    store_timestamp_at,
)
from rocketq.store.checkpoint import StoreCheckpoint
from rocketq.store.commitlog import CommitLog
from rocketq.store.config import MessageStoreConfig
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.dispatch import SCHEDULE_TOPIC, tags_code_of
from rocketq.store.index import IndexService
from rocketq.store.mapped_file import MappedFile

log = logging.getLogger("rocketq.store")

_CHUNK = 1 << 20
I64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    abnormal: bool
    walk_start: int
    valid_end: int
    records_checked: int
    torn_tail: bool  # the log ended in a bad record rather than in zeros / an end marker
    rebuilt_cq_entries: int
    reindexed_keys: int
    seconds: float


def _gather(u8: npt.NDArray[np.uint8], off: I64Array, width: int) -> I64Array:
    """Big-endian signed ints of `width` bytes at every offset.

    Reads whole words through `width` shifted views of the buffer (one per alignment), so each
    value is one element fetch and a byte swap, not `width` byte fetches and shifts."""
    dtype = {2: ">i2", 4: ">i4", 8: ">i8"}[width]
    out = np.empty(len(off), dtype=np.int64)
    if not len(off):
        return out
    rem = off % width
    for k in range(width):
        sel = rem == k
        if not sel.any():
            continue
        count = (len(u8) - k) // width
        view = np.frombuffer(u8, dtype=dtype, count=count, offset=k)
        out[sel] = view[(off[sel] - k) // width]
        del view
    return out


def _validate(mf: MappedFile, pos: I64Array, check_crc: bool) -> int:
    """Index of the first bad record among the walked ones (len(pos) if all are good)."""
    n = len(pos)
    if n == 0:
        return 0
    u8 = np.frombuffer(mf.buf, dtype=np.uint8)
    try:
        for lo in range(0, n, _CHUNK):
            p = pos[lo : lo + _CHUNK]
            size = _gather(u8, p + SIZE_AT, 4)
            magic = _gather(u8, p + MAGIC_AT, 4)
            crc = _gather(u8, p + BODY_CRC_AT, 4)
            phys = _gather(u8, p + PHYS_OFFSET_AT, 8)
            sys_flag = _gather(u8, p + SYS_FLAG_AT, 4)
            bo = body_at(sys_flag)
            blen = _gather(u8, p + bo - 4, 4)
            ok = (phys == mf.file_from_offset + p) & (blen >= 0) & (bo + blen + 3 <= size)
            v2 = magic == MAGIC_V2
            t_at = p + np.minimum(bo + blen, size - 3)
            tlen = np.where(v2, _gather(u8, t_at, 2), u8[t_at].astype(np.int64))
            ok &= (tlen >= 0) & (v2 | (tlen <= MAX_TOPIC_LENGTH_V1))
            p_rel = bo + blen + np.where(v2, 2, 1) + tlen
            ok &= p_rel + 2 <= size
            plen = _gather(u8, p + np.minimum(p_rel, size - 2), 2)
            ok &= p_rel + 2 + plen == size
            bad = np.flatnonzero(~ok)
            limit = int(bad[0]) if len(bad) else len(p)
            if check_crc and limit:
                starts = p[:limit] + bo[:limit]
                # one C-level pass: slice objects -> zero-copy views -> crc32, collected by numpy
                views = map(mf.buf.__getitem__, map(slice, starts.tolist(), (starts + blen[:limit]).tolist()))
                sums = np.fromiter(map(crc32, views), dtype=np.int64, count=limit)
                mismatch = (sums & 0x7FFFFFFF) != crc[:limit]
                if mismatch.any():
                    limit = int(np.argmax(mismatch))
                    log.warning("recover: body CRC mismatch at %d", mf.file_from_offset + int(p[limit]))
            if limit < len(p):
                return lo + limit
        return n
    finally:
        del u8


class Recovery:
    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        consume_queues: dict[tuple[str, int], ConsumeQueue],
        cq_factory: Callable[[str, int], ConsumeQueue],
        index: IndexService | None,
        checkpoint: StoreCheckpoint,
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.cqs = consume_queues
        self.cq_factory = cq_factory
        self.index = index
        self.checkpoint = checkpoint

    # ---- where to start ------------------------------------------------------------------
    def _first_record_ts(self, mf: MappedFile) -> int:
        size, magic = SIZE_MAGIC.unpack_from(mf.buf, 0)
        if magic not in (MAGIC_V1, MAGIC_V2) or size < MIN_RECORD_LENGTH:
            return 0
        return self.commit_log.store_timestamp_at(mf.file_from_offset)

    def _walk_start(self, abnormal: bool) -> int:
        files = list(self.commit_log.mfq)
        if not files:
            return 0
        if abnormal:
            start = files[0].file_from_offset
            limit = self.checkpoint.min_timestamp()
            for mf in reversed(files):
                ts = self._first_record_ts(mf)
                if 0 < ts <= limit:
                    start = mf.file_from_offset
                    break
        else:
            start = files[max(0, len(files) - 3)].file_from_offset
        min_phy = files[0].file_from_offset
        for cq in self.cqs.values():
            starts = [mf.file_from_offset for mf in cq.mfq]
            if any(b - a != cq.file_size for a, b in itertools.pairwise(starts)):
                log.warning("recover: %s has a missing file, re-checking the whole commit log", cq)
                return min_phy
        if self.index is not None:
            indexed = self.index.last_indexed_phy
            start = min(start, max(indexed, min_phy))
        return max(start, min_phy)

    # ---- the walk ------------------------------------------------------------------------
    def _walk(self, start: int, known: I64Array) -> tuple[int, bool, list[tuple[MappedFile, I64Array]]]:
        """(valid end, torn tail?, [(segment, good record positions in it)]).

        `known` (ascending commit-log offsets the consume queues point at) lets whole runs of
        back-to-back records be taken in one vectorised step; only the stretches between them
        are walked record by record."""
        check_crc = self.config.check_crc_on_recover
        walked: list[tuple[MappedFile, I64Array]] = []
        valid_end = start
        torn = False
        for mf in self.commit_log.mfq:
            if mf.file_end_offset <= start:
                continue
            pos = max(0, start - mf.file_from_offset)
            lo, hi = np.searchsorted(known, [mf.file_from_offset + pos, mf.file_end_offset])
            positions, pos, blank, torn = _walk_segment(mf, pos, known[lo:hi] - mf.file_from_offset)
            good = _validate(mf, positions, check_crc)
            if good < len(positions):
                pos = int(positions[good])
                positions = positions[:good]
                blank = False
                torn = True
            walked.append((mf, positions))
            if blank:
                valid_end = mf.file_end_offset
                continue
            valid_end = mf.file_from_offset + pos
            break
        return valid_end, torn, walked

    # ---- the whole thing -----------------------------------------------------------------
    def run(self, abnormal: bool) -> RecoveryReport:
        t0 = time.perf_counter()
        cl = self.commit_log
        files = list(cl.mfq)
        if not files:
            valid_end = walk_start = cl.start_offset_hint
            walked: list[tuple[MappedFile, I64Array]] = []
            torn = False
            self._cut_commit_log(valid_end)
        else:
            walk_start = self._walk_start(abnormal)
            known = self._known_offsets(walk_start)
            valid_end, torn, walked = self._walk(walk_start, known)
            self._cut_commit_log(valid_end)
        for cq in self.cqs.values():
            cq.truncate_dirty(valid_end)
        if self.index is not None:
            self.index.truncate_from(valid_end)
            lag = max(self.index.last_indexed_phy, cl.min_offset)
            if files and lag < walk_start:
                # index files that pointed past the end are gone: re-walk from where the index
                # now ends (a record start) so their keys are rebuilt too
                log.warning("recover: rebuilding the index from commit-log offset %d", lag)
                known = self._known_offsets(lag)
                _, _, walked = self._walk(lag, known)
        rebuilt, reindexed = self.redispatch(walked, known if files else np.zeros(0, np.int64))
        min_phy = cl.min_offset
        for cq in self.cqs.values():
            cq.min_offset = cq.mfq.min_offset() // 20
            cq.correct_min_offset(min_phy)
        report = RecoveryReport(
            abnormal, walk_start, valid_end, sum(len(p) for _, p in walked), torn, rebuilt, reindexed,
            time.perf_counter() - t0,
        )
        log.info("recover %s: %s", "abnormally" if abnormal else "normally", report)
        return report

    def _known_offsets(self, start: int) -> I64Array:
        """Every commit-log offset at or after `start` a consume queue points at, ascending."""
        hi = self.commit_log.max_offset
        parts = [cq.phys_offsets(start, hi) for cq in self.cqs.values()]
        known = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        known.sort(kind="stable")  # concatenated ascending runs: timsort merges them
        return known

    def truncate_to(self, offset: int) -> None:
        """Drop everything from `offset` on: commit log, consume-queue entries, index keys (a
        slave whose log went past its master's)."""
        self._cut_commit_log(offset)
        for cq in self.cqs.values():
            cq.truncate_dirty(offset)
        if self.index is not None:
            self.index.truncate_from(offset)

    def _cut_commit_log(self, valid_end: int) -> None:
        cl = self.commit_log
        cl.start_offset_hint = valid_end
        cl.forget_current()
        cl.mfq.truncate_dirty(valid_end)
        for mf in cl.mfq:
            mf.reserved = mf.file_size  # written segments hold their blocks already
            if mf.file_from_offset <= valid_end < mf.file_end_offset:
                tail = valid_end - mf.file_from_offset
                mf.zero(tail, mf.file_size)
                mf.sync()
                mf.reserved = tail
        cl.mfq.flushed_where = valid_end

    def redispatch(
        self, walked: list[tuple[MappedFile, I64Array]], covered_all: I64Array,
        touched: set[tuple[str, int]] | None = None,
    ) -> tuple[int, int]:
        """Re-dispatch the checked records no consume queue knows; re-index the unindexed.
        (A slave dispatches what replication appended the same way; `touched` collects the
        queues that got entries.)"""
        if not walked:
            return 0, 0
        indexed_upto = self.index.last_indexed_phy if self.index is not None else None
        delay = self.config.delay_levels_ms()
        per_queue: dict[tuple[str, int], list[I64Array]] = {}
        strings: list[str] = []
        k_phys: list[I64Array] = []
        k_ts: list[I64Array] = []
        for mf, pos in walked:
            if not len(pos):
                continue
            absolute = pos + mf.file_from_offset
            u8 = np.frombuffer(mf.buf, dtype=np.uint8)
            sys_flag = _gather(u8, pos + SYS_FLAG_AT, 4)
            tran = sys_flag & MessageSysFlag.TRANSACTION_MASK
            need_cq = ~_covered(absolute, covered_all) & (tran != _PREPARED) & (tran != _ROLLBACK)
            need_idx = (absolute > indexed_upto) & (tran != _ROLLBACK) if indexed_upto is not None \
                else np.zeros(len(pos), dtype=bool)
            sel = np.flatnonzero(need_cq | need_idx)
            if not len(sel):
                del u8
                continue
            f = _fields(u8, pos[sel], sys_flag[sel])
            topic_ids, names = _topic_ids(u8, f["tstart"], f["tlen"])
            del u8
            phys = f["pos"] + mf.file_from_offset
            to_cq = np.flatnonzero(need_cq[sel])
            if len(to_cq):
                tags = np.asarray(_tags_codes(mf, f, to_cq, topic_ids, names, delay), dtype=np.int64)
                key = topic_ids[to_cq] * (1 << 32) + f["qid"][to_cq]
                uniq, inverse = np.unique(key, return_inverse=True)
                order = np.argsort(inverse, kind="stable")
                bounds = np.cumsum(np.bincount(inverse))[:-1]
                for g, members in zip(uniq.tolist(), np.split(order, bounds), strict=True):
                    rows = to_cq[members]
                    block = np.stack((f["qoff"][rows], phys[rows], f["size"][rows], tags[members]), axis=1)
                    per_queue.setdefault((names[g >> 32], g & 0xFFFFFFFF), []).append(block)
            to_idx = np.flatnonzero(need_idx[sel])
            if len(to_idx):
                rows, keys = _index_keys(mf, f["pstart"][to_idx], f["plen"][to_idx])
                rows = to_idx[rows]
                prefix = [f"{n}#" for n in names]
                strings += [prefix[t] + k for t, k in zip(topic_ids[rows].tolist(), keys, strict=True)]
                k_phys.append(phys[rows])
                k_ts.append(f["ts"][rows])
        if touched is not None:
            touched.update(per_queue)
        rebuilt = 0
        for (topic, qid_), blocks in per_queue.items():
            cq = self.cqs.get((topic, qid_))
            if cq is None:
                cq = self.cq_factory(topic, qid_)
            arr = np.concatenate(blocks)
            arr = arr[np.argsort(arr[:, 0], kind="stable")]
            runs = np.flatnonzero(np.diff(arr[:, 0]) != 1) + 1
            for block in np.split(arr, runs):
                cq.put_block(int(block[0, 0]), block[:, 1], block[:, 2], block[:, 3])
            rebuilt += len(arr)
        reindexed = self.index.put_keys(strings, np.concatenate(k_phys), np.concatenate(k_ts)) \
            if self.index is not None and strings else 0
        if rebuilt and touched is None:  # replication dispatches this way all the time
            log.warning("recover: re-dispatched %d records into consume queues", rebuilt)
        return rebuilt, reindexed


def _fields(u8: npt.NDArray[np.uint8], p: I64Array, sf: I64Array) -> dict[str, I64Array]:
    """The dispatch fields of the records at `p` (positions in one segment), vectorised."""
    v2 = _gather(u8, p + MAGIC_AT, 4) == MAGIC_V2
    bo = p + body_at(sf)
    tpos = bo + _gather(u8, bo - 4, 4)
    tlen = np.where(v2, _gather(u8, tpos, 2), u8[tpos].astype(np.int64))
    tstart = tpos + np.where(v2, 2, 1)
    pstart = tstart + tlen + 2
    return {
        "pos": p,
        "size": _gather(u8, p + SIZE_AT, 4),
        "qid": _gather(u8, p + QUEUE_ID_AT, 4),
        "qoff": _gather(u8, p + QUEUE_OFFSET_AT, 8),
        "ts": _gather(u8, p + store_timestamp_at(sf), 8),
        "tstart": tstart,
        "tlen": tlen,
        "pstart": pstart,
        "plen": _gather(u8, pstart - 2, 2),
    }


def _topic_ids(u8: npt.NDArray[np.uint8], tstart: I64Array, tlen: I64Array) -> tuple[I64Array, list[str]]:
    """Number the distinct topic names of many records without decoding each one."""
    ids = np.empty(len(tstart), dtype=np.int64)
    names: list[str] = []
    for length in np.unique(tlen).tolist():
        members = np.flatnonzero(tlen == length)
        step = max(1, (1 << 24) // max(length, 1))
        for lo in range(0, len(members), step):
            m = members[lo : lo + step]
            rows = u8[tstart[m][:, None] + np.arange(length)]
            keys = np.ascontiguousarray(rows).view(np.dtype((np.void, max(length, 1)))).ravel() if length \
                else np.zeros(len(m), dtype="V1")
            uniq, inverse = np.unique(keys, return_inverse=True)
            known = {n: i for i, n in enumerate(names)}
            mapping = []
            for u in uniq:
                name = bytes(u)[:length].decode("utf-8", "replace")
                if name not in known:
                    known[name] = len(names)
                    names.append(name)
                mapping.append(known[name])
            ids[m] = np.asarray(mapping, dtype=np.int64)[inverse.ravel()]
    return ids, names


_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def _tags_codes(
    mf: MappedFile, f: dict[str, I64Array], rows: I64Array, topic_ids: I64Array, names: list[str],
    delay: list[int],
) -> list[int]:
    """tagsCode of each record in `rows`, read straight from the mapped properties (the TAGS of
    all of them in a few numpy passes; the schedule topic's delivery times one by one)."""
    pstart, plen = f["pstart"][rows], f["plen"][rows]
    out = [0] * len(rows)
    if not len(rows):
        return out
    cache: dict[bytes, int] = {}
    found, values = _last_values(_Props(mf, pstart, plen), _TAGS_KEY)
    for i, raw in zip(found.tolist(), values, strict=True):
        code = cache.get(raw)
        if code is None:
            code = cache[raw] = tags_code(raw.decode("utf-8", "replace"))
        out[i] = code
    if SCHEDULE_TOPIC in names:
        schedule = names.index(SCHEDULE_TOPIC)
        mm = mf.mm
        for i in np.flatnonzero(topic_ids[rows] == schedule).tolist():
            p0 = int(pstart[i])
            out[i] = tags_code_of(SCHEDULE_TOPIC, mm[p0 : p0 + int(plen[i])], int(f["ts"][rows[i]]), delay)
    return out


def _entry_key(name: str) -> bytes:
    """What starts a property entry of `name`: the name and its \x01."""
    return needle(name).encode()


_TAGS_KEY = _entry_key(MessageConst.PROPERTY_TAGS)
_UNIQ_KEY = _entry_key(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
_KEYS_KEY = _entry_key(MessageConst.PROPERTY_KEYS)
_ENTRY_END = 2  # \x02 ends a property value


class _Props:
    """The properties of many records (ascending positions in one segment) as one copied stretch
    of bytes, with where each property entry may start: at a record's properties or after a
    \x02 (some of those lie in bodies; `_last_values` drops them). One pass over the bytes
    serves every name looked up in them."""

    __slots__ = ("ends", "lo", "pend", "pstart", "region", "starts", "u8")

    def __init__(self, mf: MappedFile, pstart: I64Array, plen: I64Array) -> None:
        self.lo = lo = int(pstart[0])
        self.region = bytes(mf.buf[lo : int(pstart[-1] + plen[-1])])
        self.pstart, self.pend = pstart, pstart + plen
        self.u8 = np.frombuffer(self.region, dtype=np.uint8)
        self.ends = np.flatnonzero(self.u8 == _ENTRY_END)
        self.starts = np.sort(np.concatenate((pstart - lo, self.ends + 1)))

    def find(self, key: bytes) -> I64Array:
        """Where an entry named by `key` (the name and its \x01) may start, relative to `lo`."""
        u8 = self.u8
        at = self.starts[self.starts + len(key) <= len(u8)]
        for j, byte in enumerate(key):
            at = at[u8[at + j] == byte]
        return at.astype(np.int64, copy=False)


def _last_values(props: _Props, key: bytes) -> tuple[I64Array, list[bytes]]:
    """(record index, value) of the entry `key` names in each record's properties that has
    one, the last one when there are several (as decode_properties); hits outside a properties
    block (a body) or not at an entry's start ("XKEYS") are dropped with numpy."""
    rel = props.find(key)
    if not len(rel):
        return np.zeros(0, np.int64), []
    u8, ends, lo, region = props.u8, props.ends, props.lo, props.region
    pstart, pend = props.pstart, props.pend
    v0 = rel + len(key)
    nxt = np.searchsorted(ends, v0)
    v1 = np.where(nxt < len(ends), ends[np.minimum(nxt, len(ends) - 1)], len(u8)) if len(ends) \
        else np.full(len(v0), len(u8), np.int64)
    at = rel + lo
    r = np.searchsorted(pstart, at, side="right") - 1
    ok = r >= 0
    r = np.where(ok, r, 0)
    end = np.minimum(v1 + lo, pend[r])
    ok &= (at < pend[r]) & (end > v0 + lo) & ((at == pstart[r]) | (u8[np.maximum(rel - 1, 0)] == _ENTRY_END))
    keep = np.flatnonzero(ok)
    last = keep[np.flatnonzero(np.append(r[keep][1:] != r[keep][:-1], True))]  # the last per record
    return r[last], [region[a:b] for a, b in zip(v0[last].tolist(), (end[last] - lo).tolist(), strict=True)]


def _index_keys(mf: MappedFile, pstart: I64Array, plen: I64Array) -> tuple[I64Array, list[str]]:
    """UNIQ_KEY and each KEYS word of many records (ascending positions in one segment), as
    (record index per key, key): `index_keys_of` in bulk."""
    props = _Props(mf, pstart, plen)
    rows: list[int] = []
    keys: list[str] = []
    u_rows, u_vals = _last_values(props, _UNIQ_KEY)
    k_rows, k_vals = _last_values(props, _KEYS_KEY)
    rows += u_rows.tolist()
    keys += [v.decode("utf-8", "replace") for v in u_vals]
    for row, words in zip(k_rows.tolist(), k_vals, strict=True):
        for w in words.decode("utf-8", "replace").split(MessageConst.KEY_SEPARATOR):
            if w:
                rows.append(row)
                keys.append(w)
    return np.asarray(rows, dtype=np.int64), keys


def _covered(sorted_positions: I64Array, known: I64Array) -> npt.NDArray[np.bool_]:
    """Which of the (ascending) record positions some consume-queue entry points at."""
    out = np.zeros(len(sorted_positions), dtype=bool)
    if len(known) and len(sorted_positions):
        idx = np.searchsorted(sorted_positions, known)
        idx[idx == len(sorted_positions)] = 0
        hit = sorted_positions[idx] == known
        out[idx[hit]] = True
    return out


def _walk_segment(mf: MappedFile, pos: int, known: I64Array) -> tuple[I64Array, int, bool, bool]:
    """Follow the records of one segment from `pos`: (positions, end, ended by the end marker?,
    ended by something that is neither zeros nor a marker?)."""
    buf, fsize = mf.buf, mf.file_size
    n = len(known)
    runs: list[I64Array] = []
    if n:
        u8 = np.frombuffer(buf, dtype=np.uint8)
        safe = np.minimum(known, fsize - 8)
        size = _gather(u8, safe + SIZE_AT, 4)
        magic = _gather(u8, safe + MAGIC_AT, 4)
        del u8
        ok = ((magic == MAGIC_V1) | (magic == MAGIC_V2)) & (size >= MIN_RECORD_LENGTH)
        ok &= (known + size <= fsize) & (known <= fsize - 8)
        nxt = known + size
        link = np.zeros(n, dtype=bool)
        link[:-1] = ok[:-1] & (nxt[:-1] == known[1:])
        breaks = np.flatnonzero(~link)  # always holds n - 1
        known_l = known.tolist()
    unpack = SIZE_MAGIC.unpack_from
    found = array("q")
    add = found.append
    k = 0
    while True:
        if k < n and known_l[k] == pos and ok[k]:
            j = int(breaks[np.searchsorted(breaks, k)])
            if found:
                runs.append(np.frombuffer(found, dtype=np.int64).copy())
                found = array("q")
                add = found.append
            runs.append(known[k : j + 1])
            pos = int(nxt[j])
            k = j + 1
            continue
        while k < n and known_l[k] <= pos:
            k += 1
        target = known_l[k] if k < n else -1
        blank = torn = False
        stopped = True
        while pos + 8 <= fsize:
            if pos == target:
                stopped = False
                break
            size_, magic_ = unpack(buf, pos)
            if magic_ in (MAGIC_V1, MAGIC_V2):
                if size_ < MIN_RECORD_LENGTH or pos + size_ > fsize:
                    torn = True
                    break
                add(pos)
                pos += size_
                if target >= 0 and pos > target:  # a consume-queue entry that points mid-record
                    while k < n and known_l[k] < pos:
                        k += 1
                    target = known_l[k] if k < n else -1
                continue
            blank = magic_ == BLANK_MAGIC and size_ == fsize - pos
            torn = not blank and (size_ != 0 or magic_ != 0)
            break
        if stopped:
            if found:
                runs.append(np.frombuffer(found, dtype=np.int64).copy())
            positions = np.concatenate(runs) if runs else np.zeros(0, np.int64)
            return positions, pos, blank, torn
