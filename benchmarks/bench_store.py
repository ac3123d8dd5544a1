"""Store benchmarks: batch / single puts, pulls, crash recovery of a 1 GiB commit log.

    .venv/bin/python benchmarks/bench_store.py [--quick] [--recovery-gib N]

Prints figures and returns them from `run()`; never asserts times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from rocketq.codec.message import UniqIdGenerator, encode_properties, tags_code
from rocketq.store import MessageBatchToStore, MessageStore, MessageStoreConfig, MessageToStore

BODY = os.urandom(128)
TAG = "TagA"
TAG_CODE = tags_code(TAG)


def _props(uid: str) -> str:
    return encode_properties({"TAGS": TAG, "WAIT": "true", "UNIQ_KEY": uid, "CLUSTER": "DefaultCluster"})


def _store(root: str, **kw: Any) -> MessageStore:
    cfg = MessageStoreConfig(store_path_root_dir=root, **kw)
    s = MessageStore(cfg)
    s.load()
    return s


def _best_rate(rounds: list[tuple[float, int]]) -> float:
    return max(n / dt for dt, n in rounds)


def bench_batch_put(root: str, per_round: int, rounds: int = 3, batch: int = 100) -> dict[str, float]:
    """Batches of `batch` x 128 B; best round (the machine is shared). 'appended' times the
    puts alone, 'with_index' also the deferred index build of the same messages."""
    s = _store(root)
    ids = UniqIdGenerator()
    born = ("10.0.0.1", 5555)
    appended: list[tuple[float, int]] = []
    indexed: list[tuple[float, int]] = []
    for _ in range(rounds):
        batches = []
        for i in range(per_round // batch):
            items = []
            for _ in range(batch):
                uid = ids.next_id()
                items.append((0, BODY, _props(uid), TAG_CODE, (uid,)))
            batches.append(MessageBatchToStore("BenchBatch", i % 8, items, born_timestamp=1, born_host=born))
        t = time.perf_counter()
        for b in batches:
            s.append_messages(b)
        t1 = time.perf_counter()
        s.drain_index()
        t2 = time.perf_counter()
        appended.append((t1 - t, per_round))
        indexed.append((t2 - t, per_round))
    s.close()
    return {"put_messages_batch100_msgs_per_s": _best_rate(appended),
            "put_messages_batch100_with_index_msgs_per_s": _best_rate(indexed)}


def bench_single_put(root: str, per_round: int, rounds: int = 3) -> dict[str, float]:
    s = _store(root)
    ids = UniqIdGenerator()
    born = ("10.0.0.1", 5555)
    appended: list[tuple[float, int]] = []
    indexed: list[tuple[float, int]] = []
    for _ in range(rounds):
        msgs = []
        for i in range(per_round):
            uid = ids.next_id()
            msgs.append(MessageToStore("BenchSingle", i % 8, BODY, 0, _props(uid), TAG_CODE, (uid,),
                                       born_timestamp=1, born_host=born))
        t = time.perf_counter()
        for m in msgs:
            s.append_message(m)
        t1 = time.perf_counter()
        s.drain_index()
        t2 = time.perf_counter()
        appended.append((t1 - t, per_round))
        indexed.append((t2 - t, per_round))
    s.close()
    return {"put_message_single_msgs_per_s": _best_rate(appended),
            "put_message_single_with_index_msgs_per_s": _best_rate(indexed)}


def bench_get(root: str, total: int) -> dict[str, float]:
    s = _store(root, max_transfer_count_on_message_in_memory=1000,
               max_transfer_bytes_on_message_in_memory=1 << 30, message_index_enable=False)
    ids = UniqIdGenerator()
    for _ in range(total // 1000):
        items = [(0, BODY, _props(ids.next_id()), TAG_CODE, ()) for _ in range(1000)]
        s.append_messages(MessageBatchToStore("BenchGet", 0, items))
    out = {}
    for per_call in (32, 1000):
        rounds = []
        for _ in range(2):
            got = 0
            t = time.perf_counter()
            off = 0
            while off < total:
                r = s.get_message("BenchGet", 0, off, per_call)
                got += r.message_count
                off = r.next_begin_offset
                del r
            rounds.append((time.perf_counter() - t, got))
        out[f"get_message_{per_call}_per_call_msgs_per_s"] = _best_rate(rounds)
    s.close()
    return out


def bench_recovery(root: str, gib: float) -> dict[str, float]:
    """Fill `gib` GiB of commit log, 'crash' (abort file left, nothing flushed by shutdown),
    delete the newest consume-queue file of half the queues, time the restart."""
    s = _store(root)
    ids = UniqIdGenerator()
    target = int(gib * (1 << 30)) - (1 << 20)
    t = time.perf_counter()
    n = 0
    while s.max_phy_offset < target:
        items = [(0, BODY, _props(uid), TAG_CODE, (uid,)) for uid in (ids.next_id() for _ in range(100))]
        s.append_messages(MessageBatchToStore("BenchRecover", n % 8, items))
        n += 1
    s.drain_index()
    fill = time.perf_counter() - t
    records = n * 100
    s.commit_log.flush(0)
    s.release_without_shutdown()
    cq_root = os.path.join(root, "consumequeue", "BenchRecover")
    for qid in range(0, 8, 2):
        files = sorted(os.listdir(os.path.join(cq_root, str(qid))))
        os.unlink(os.path.join(cq_root, str(qid), files[-1]))
    t = time.perf_counter()
    s2 = MessageStore(MessageStoreConfig(store_path_root_dir=root))
    s2.load()
    dt = time.perf_counter() - t
    rep = s2.recovery_report
    assert rep is not None
    ok = sum(s2.get_max_offset_in_queue("BenchRecover", q) for q in range(8)) == records
    s2.close()
    t = time.perf_counter()
    s3 = MessageStore(MessageStoreConfig(store_path_root_dir=root))
    s3.load()
    normal = time.perf_counter() - t
    s3.close()
    return {
        "recovery_gib": gib,
        "recovery_records": records,
        "recovery_fill_s": fill,
        "recovery_s": dt,
        "recovery_normal_restart_s": normal,
        "recovery_records_checked": rep.records_checked,
        "recovery_rebuilt_cq_entries": rep.rebuilt_cq_entries,
        "recovery_consistent": float(ok),
    }


def run(quick: bool = False, recovery_gib: float | None = None) -> dict[str, float]:
    base = tempfile.mkdtemp(prefix="rocketq-bench-store-")
    results: dict[str, float] = {}
    try:
        n = 100_000 if quick else 300_000
        results.update(bench_batch_put(os.path.join(base, "b"), n))
        shutil.rmtree(os.path.join(base, "b"))
        results.update(bench_single_put(os.path.join(base, "s"), n // 3))
        shutil.rmtree(os.path.join(base, "s"))
        results.update(bench_get(os.path.join(base, "g"), 200_000 if quick else 1_000_000))
        shutil.rmtree(os.path.join(base, "g"))
        gib = recovery_gib if recovery_gib is not None else (0.125 if quick else 1.0)
        results.update(bench_recovery(os.path.join(base, "r"), gib))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--recovery-gib", type=float, default=None)
    args = ap.parse_args(argv)
    for k, v in run(args.quick, args.recovery_gib).items():
        print(f"{k:45s} {v:,.2f}" if isinstance(v, float) else f"{k:45s} {v}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
