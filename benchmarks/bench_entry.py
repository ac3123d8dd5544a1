"""The one-message put's crossing from broker to store, without the network: µs per message.

`SingleEntry` is built once per single send (`SendMessageProcessor._prepare_single`) and read
by `MessageStore.append_many`; these figures say what that value costs on the hot path. An
in-process broker on a tmp store; 10,000 V2 send requests (128-byte body, TAGS, KEYS,
UNIQ_KEY, WAIT) go through the real prepare path, then into `append_many` in runs of
RUN (a pipelined read's size). CPU time (time.process_time) per round; best and median of
ROUNDS, as the machine is shared.

    .venv/bin/python -m benchmarks entry
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks.bench_send import TOPIC, _header
from rocketq.broker.controller import BrokerController
from rocketq.broker.processors.send_wire import v2_fields
from rocketq.codec.bodies.topic import TopicConfig
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import UniqIdGenerator
from rocketq.config import BrokerConfig
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store import SingleEntry
from rocketq.store.config import MessageStoreConfig

N = 10_000
RUN = 64
ROUNDS = 7
BODY = os.urandom(128)
BORN = ("127.0.0.1", 40000)


def _requests(uniq: UniqIdGenerator) -> list[RemotingCommand]:
    out = []
    for i in range(N):
        props = f"KEYS\x01k{i}\x02TAGS\x01T{i % 4}\x02WAIT\x01true\x02UNIQ_KEY\x01{uniq.next_id()}"
        out.append(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, _header(i % 4, props, False), BODY))
    return out


def _figures(name: str, per_round: list[float]) -> dict[str, float]:
    us = sorted(t / N * 1e6 for t in per_round)
    print(f"  {name:<34} best {us[0]:6.3f}  median {statistics.median(us):6.3f} µs/msg")
    return {f"{name} µs/msg best": round(us[0], 3), f"{name} µs/msg median": round(statistics.median(us), 3)}


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def bench_constructors(fields: list[tuple[Any, ...]]) -> dict[str, float]:
    """Building N entries from their field tuples, each way the hot path could."""
    new = tuple.__new__
    make = SingleEntry._make
    ways: dict[str, Callable[[], Any]] = {
        "build SingleEntry(*f)": lambda: [SingleEntry(*f) for f in fields],
        "build SingleEntry._make(f)": lambda: [make(f) for f in fields],
        "build tuple.__new__(SingleEntry, f)": lambda: [new(SingleEntry, f) for f in fields],
        "build plain tuple (a, b, ...)": lambda: [(a, b, c, d, e, g, h, i, j, k, m)
                                                  for a, b, c, d, e, g, h, i, j, k, m in fields],
    }
    out: dict[str, float] = {}
    for name, fn in ways.items():
        out.update(_figures(name, [_timed(fn) for _ in range(ROUNDS)]))
    return out


async def _run(root: str) -> dict[str, float]:
    store_cfg = MessageStoreConfig(store_path_root_dir=os.path.join(root, "store"),
                                   mapped_file_size_commit_log=256 * 1024 * 1024)
    ctl = BrokerController(BrokerConfig(broker_name="bench-entry", namesrv_addr=None), store_cfg,
                           RemotingServerConfig(listen_port=0))
    await ctl.start()
    try:
        send = ctl.processors.send  # type: ignore[union-attr]
        requests = _requests(UniqIdGenerator())
        prepare = send._prepare_single
        ctl.topic_manager.update_topic_config(TopicConfig(TOPIC, read_queue_nums=4, write_queue_nums=4))

        entries: list[Any] = []

        def prepare_all() -> None:
            entries.clear()
            add = entries.append
            for r in requests:
                add(prepare(r, None, v2_fields(r.ext_fields), BORN)[0])

        def v2_only() -> None:
            for r in requests:
                v2_fields(r.ext_fields)

        store = ctl.store
        runs: list[list[Any]] = []

        def append_all() -> None:
            for run in runs:
                store.append_many(run)

        out: dict[str, float] = {}
        out.update(_figures("read V2 header (v2_fields)", [_timed(v2_only) for _ in range(ROUNDS)]))
        out.update(_figures("prepare (v2_fields + _prepare_single)",
                            [_timed(prepare_all) for _ in range(ROUNDS)]))
        runs[:] = [entries[i:i + RUN] for i in range(0, N, RUN)]  # as the last prepare round built them
        out.update(_figures(f"append_many (runs of {RUN})", [_timed(append_all) for _ in range(ROUNDS)]))
        out.update(bench_constructors([tuple(e) for e in entries]))
        return out
    finally:
        await ctl.shutdown()


def run() -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="rocketq-bench-entry-")
    try:
        return asyncio.run(_run(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    run()
