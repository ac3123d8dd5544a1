"""Push consumer benchmarks against a real name server + broker: backlog drain and end-to-end latency.

    .venv/bin/python benchmarks/bench_consumer.py [--messages N] [--queues Q] [--rate R] [--seconds S]

The servers run in a child process (their own event loop and core), the consumer in this one, as in
production. A backlog of N messages (128 B bodies, 8 queues) is written straight into the broker's
store, then drained by a PushConsumer with a no-op listener from CONSUME_FROM_FIRST_OFFSET, once with
consumeMessageBatchMaxSize 32 and once with 1 (a fresh group each time). Both a sync listener (run on
the consume threads, RocketMQ's model) and an async one (run on the event loop) are measured.

Each drain also prints the CPU it cost per message: the client's event-loop thread (where pulls,
decoding and commits run), the whole client process (plus the consume threads), and the server
process. On a shared machine the rates move with the load (printed first); the CPU per message
is the steadier figure. Each drain prints two rates: from start() to the last message (what a
user waiting for the backlog sees) and from the first delivery to the last (the drain itself: a
consumer given a queue by its rebalance waits the settle delay, 0.3 s, before it pulls).

Lite pull: a LitePullConsumer drains the same backlog with `poll()` (a fresh group, from the first
offset, auto-commit on), once with its default pullBatchSize (10, as Java's) and once with 32; the
rate and CPU per message are taken as for the push drains.

Latency: an aio Producer sends at a fixed rate (2 000 msgs/s by default) for a few seconds; a
consumer with batch size 1 records now - send time (one process, one clock) for every message.
Prints figures and returns them from `run()`; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from typing import Any

try:
    from benchmarks._cluster import child_server
except ImportError:  # run as benchmarks/<this>.py, whose folder is sys.path[0]
    from _cluster import child_server  # type: ignore[no-redef]

TOPIC = "BenchConsume"
LATENCY_TOPIC = "BenchLatency"
BODY = b"x" * 128


# -- the servers (child process) --------------------------------------------------------------------


def _servers_main(data_dir: str, queues: int, messages: int, body_size: int, conn: Connection) -> None:
    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    run_loop(_serve(data_dir, queues, messages, body_size, conn))


async def _serve(data_dir: str, queues: int, messages: int, body_size: int, conn: Connection) -> None:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.topic_manager import new_topic_config
    from rocketq.codec.message import UniqIdGenerator, encode_properties
    from rocketq.config import BrokerConfig, NamesrvConfig
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig
    from rocketq.store.model import MessageBatchToStore

    ns = NamesrvController(
        NamesrvConfig(
            listen_port=0,
            kv_config_path=os.path.join(data_dir, "kv.json"),
            config_store_path=os.path.join(data_dir, "namesrv.properties"),
        ),
        RemotingServerConfig(listen_port=0),
    )
    await ns.start()
    store_cfg = MessageStoreConfig(
        store_path_root_dir=os.path.join(data_dir, "store"),
        mapped_file_size_commit_log=256 * 1024 * 1024,
        max_hash_slot_num=10_000,
        max_index_num=40_000,
    )
    ctl = BrokerController(
        BrokerConfig(broker_name="bench-consume", namesrv_addr=ns.address),
        store_cfg,
        RemotingServerConfig(listen_port=0),
    )
    await ctl.start()
    ctl.topic_manager.update_topic_config(new_topic_config(TOPIC, queues, queues))
    for kind in ("sync", "async"):
        ctl.topic_manager.update_topic_config(new_topic_config(f"{LATENCY_TOPIC}_{kind}", 4, 4))
    await ctl.register_broker_all()
    ids = UniqIdGenerator()
    per_queue = messages // queues
    body = b"x" * body_size
    chunk = 1000
    for q in range(queues):
        for start in range(0, per_queue, chunk):
            n = min(chunk, per_queue - start)
            items = [
                (0, body, encode_properties({"UNIQ_KEY": ids.next_id(), "WAIT": "true"}), 0, ())
                for _ in range(n)
            ]
            batch = MessageBatchToStore(
                TOPIC, q, items, born_timestamp=int(time.time() * 1000), born_host=("127.0.0.1", 5555)
            )
            ctl.store.append_messages(batch)
    conn.send(ns.address)
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    await ctl.shutdown()
    await ns.shutdown()


# -- the consumer (this process) ------------------------------------------------------------------------


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (Linux; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Drained:
    """A drain's timing: from start() to the last message, and from the first delivery to the
    last (the drain itself, without the start: a push consumer waits its rebalance's settle
    delay, 0.3 s, before it pulls a queue it was just given)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.first = 0.0

    def seen(self) -> None:
        if not self.first:
            self.first = time.perf_counter()

    def rates(self, t0: float, t_end: float) -> tuple[float, float, float]:
        """(msgs/s from start, msgs/s from the first delivery, seconds to the first delivery)"""
        return self.total / (t_end - t0), self.total / (t_end - self.first), self.first - t0


def _fresh(cls: Any, group: str, namesrv: str, **fields: Any) -> Any:
    """A consumer of a new group subscribed to the backlog, reading it from the first offset."""
    consumer = cls(group, namesrv_addr=namesrv, instance_name=group,
                   consume_from_where="CONSUME_FROM_FIRST_OFFSET", **fields)
    consumer.subscribe(TOPIC, "*")
    return consumer


async def _drain(namesrv: str, total: int, batch_size: int, is_async: bool) -> tuple[float, float, float]:
    from rocketq.client.consumer.push import PushConsumer
    from rocketq.client.consumer.types import ConsumeStatus

    group = f"bench_drain_{batch_size}_{'a' if is_async else 's'}_{os.getpid()}_{time.monotonic_ns()}"
    ok = ConsumeStatus.CONSUME_SUCCESS
    drained = _Drained(total)
    seen = drained.seen

    def sync_listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        seen()
        return ok

    async def async_listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        seen()
        return ok

    consumer = _fresh(PushConsumer, group, namesrv, consume_message_batch_max_size=batch_size)
    consumer.register_listener(async_listener if is_async else sync_listener)
    t0 = time.perf_counter()
    await consumer.start()
    try:
        while consumer.stats.totals(group, TOPIC)["consumed_ok"] < total:
            await asyncio.sleep(0.002)
        t_end = time.perf_counter()
    finally:
        await consumer.shutdown()
    return drained.rates(t0, t_end)


async def _poll_drain(namesrv: str, total: int, pull_batch_size: int) -> tuple[float, float, float]:
    """Drain ``total`` messages with ``LitePullConsumer.poll()``; rates as `_Drained.rates`."""
    from rocketq.client.consumer.lite_pull import LitePullConsumer

    group = f"bench_poll_{pull_batch_size}_{os.getpid()}_{time.monotonic_ns()}"
    consumer = _fresh(LitePullConsumer, group, namesrv, pull_batch_size=pull_batch_size)
    drained = _Drained(total)
    got = 0
    t0 = time.perf_counter()
    await consumer.start()
    try:
        while got < total:
            n = len(await consumer.poll(timeout=5.0))
            if n:
                drained.seen()
                got += n
        t_end = time.perf_counter()
    finally:
        await consumer.shutdown()
    return drained.rates(t0, t_end)


async def _paced(n: int, rate: int, send: Callable[[], asyncio.Future[Any]]) -> None:
    """Call ``send()`` on the loop ``n`` times, evenly spaced at ``rate`` a second, and wait for
    every answer (counted, not kept: 10,000 live futures would make each young-generation
    collection of the garbage collector walk them, a pause the latencies would show).

    The pacing runs on a thread that sleeps with the kernel's timer: uvloop rounds a delay to
    whole milliseconds and runs anything under half of one at once, so an asyncio.sleep pacer at
    2,000 msgs/s spins the loop (a whole core busy) and sends in pairs (the second one gathered
    behind the first by the producer's batching), both of which it would count as latency.
    """
    loop = asyncio.get_running_loop()
    answered = 0
    failed: list[BaseException] = []
    done = loop.create_future()

    def answer(fut: asyncio.Future[Any]) -> None:
        nonlocal answered
        answered += 1
        if not fut.cancelled() and fut.exception() is not None and not failed:
            failed.append(fut.exception())  # type: ignore[arg-type]
        if answered == n and not done.done():
            done.set_result(None)

    def one() -> None:
        send().add_done_callback(answer)

    def pace() -> None:
        interval = 1.0 / rate
        start = time.perf_counter()
        for i in range(n):
            delay = start + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            loop.call_soon_threadsafe(one)

    pacer = threading.Thread(target=pace, name="bench-pacer", daemon=True)
    pacer.start()
    await done
    pacer.join()
    if failed:
        raise failed[0]


async def _latency(namesrv: str, rate: int, seconds: float, is_async: bool) -> dict[str, float]:
    from rocketq.client.consumer.push import PushConsumer
    from rocketq.client.consumer.types import ConsumeStatus
    from rocketq.client.message import Message
    from rocketq.client.producer import Producer

    group = f"bench_latency_{os.getpid()}_{time.monotonic_ns()}"
    # A topic per run: a new group would start a fresh queue from 0 (the broker's rule), and so
    # count an earlier run's messages too.
    topic = f"{LATENCY_TOPIC}_{'async' if is_async else 'sync'}"
    samples: list[float] = []

    def sync_listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:  # on a consume thread
        now = time.perf_counter()
        for m in msgs:
            samples.append(now - float(m.body))
        return ConsumeStatus.CONSUME_SUCCESS

    async def async_listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        return sync_listener(msgs, ctx)

    consumer = PushConsumer(
        group, namesrv_addr=namesrv, instance_name=group, consume_message_batch_max_size=1
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(async_listener if is_async else sync_listener)
    producer = Producer(f"{group}_p", namesrv_addr=namesrv)
    await producer.start()
    await consumer.start()
    try:
        await asyncio.sleep(1.0)  # the consumer owns its queues and has a long poll parked on each
        n = int(rate * seconds)
        await _paced(n, rate, lambda: producer.send_async(Message(topic, repr(time.perf_counter()).encode())))
        deadline = time.monotonic() + 10
        while len(samples) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await consumer.shutdown()
        await producer.shutdown()
    samples.sort()
    warm = samples[len(samples) // 20 :] or samples  # skip the first 5 %: connections and caches warm up
    warm.sort()

    def pct(p: float) -> float:
        return warm[min(len(warm) - 1, int(len(warm) * p))] * 1e3

    return {
        "e2e_latency_p50_ms": statistics.median(warm) * 1e3,
        "e2e_latency_p99_ms": pct(0.99),
        "e2e_latency_received": float(len(samples)),
    }


async def _measured(
    drain: Awaitable[tuple[float, float, float]], total: int, server_pid: int, figures: dict[str, float],
    kind: str, tag: str,
) -> str:
    """Await one drain of ``total`` messages; record its rates and CPU per message as
    ``{kind}_..._{tag}`` figures and return them as the tail of its printed line."""
    loop_cpu, client_cpu = time.thread_time(), time.process_time()
    server_cpu = _process_cpu(server_pid)
    r, steady, first = await drain
    us = {
        "loop": (time.thread_time() - loop_cpu) / total * 1e6,
        "client": (time.process_time() - client_cpu) / total * 1e6,
        "server": (_process_cpu(server_pid) - server_cpu) / total * 1e6,
    }
    figures[f"{kind}_msgs_per_s_{tag}"] = r
    figures[f"{kind}_msgs_per_s_from_first_{tag}"] = steady
    figures[f"{kind}_first_delivery_s_{tag}"] = first
    for part, value in us.items():
        figures[f"{kind}_cpu_us_per_msg_{part}_{tag}"] = value
    return (
        f"{r:>10,.0f} msgs/s from start, {steady:>10,.0f} from the first delivery ({first:.2f} s after "
        f"start)  (CPU per msg: loop thread {us['loop']:.2f} us, client {us['client']:.2f} us, servers "
        f"{us['server']:.2f} us)"
    )


async def _client_main(
    namesrv: str, messages: int, rate: int, seconds: float, server_pid: int, body_size: int
) -> dict[str, float]:
    figures: dict[str, float] = {"body_size": body_size}
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; backlog bodies {body_size} B")
    for is_async in (False, True):
        for batch in (32, 1):
            total = messages if batch == 32 else min(messages, 200_000)
            kind = "async" if is_async else "sync"
            line = await _measured(_drain(namesrv, total, batch, is_async), total, server_pid, figures,
                                   "drain", f"batch{batch}_{kind}")
            print(f"drain {total:,} msgs, consumeMessageBatchMaxSize {batch:>2}, {kind} no-op listener: "
                  f"{line}")
    for pull_batch in (10, 32):
        line = await _measured(_poll_drain(namesrv, messages, pull_batch), messages, server_pid, figures,
                               "poll", f"pull{pull_batch}")
        print(f"lite-pull poll() {messages:,} msgs, pullBatchSize {pull_batch:>2}: {line}")
    for is_async in (False, True):
        kind = "async" if is_async else "sync"
        lat = await _latency(namesrv, rate, seconds, is_async)
        figures.update({f"{k}_{kind}": v for k, v in lat.items()})
        print(
            f"end-to-end at {rate} msgs/s, {kind} listener: p50 {lat['e2e_latency_p50_ms']:.3f} ms, "
            f"p99 {lat['e2e_latency_p99_ms']:.3f} ms ({lat['e2e_latency_received']:.0f} received)"
        )
    return figures




def run(
    messages: int = 1_000_000, queues: int = 8, rate: int = 2000, seconds: float = 5.0,
    body_size: int = len(BODY),
) -> dict[str, float]:
    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    with child_server(_servers_main, queues, messages, body_size, prefix="rocketq-bench-consumer-",
                      start_timeout=600) as (namesrv, pid):
        return run_loop(_client_main(namesrv, messages, rate, seconds, pid, body_size))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--rate", type=int, default=2000, help="latency run: messages per second")
    ap.add_argument("--seconds", type=float, default=5.0, help="latency run: how long to send")
    ap.add_argument("--body-size", type=int, default=len(BODY),
                    help="bytes per backlog message (issue 10's 1 KiB row: 1024)")
    args = ap.parse_args(argv)
    print(f"bench_consumer: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    run(args.messages, args.queues, args.rate, args.seconds, args.body_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
