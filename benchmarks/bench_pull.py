"""Pull benchmarks through a real broker over TCP: backlog drain rate and long-poll wake-up latency.

    .venv/bin/python benchmarks/bench_pull.py [--messages N] [--queues Q] [--wakeups N]

The broker runs in a child process (its own event loop and core), the consumer in this one, as in
production. A backlog of N messages (128 B bodies) is written straight into the broker's store, then drained
with PULL_MESSAGE at 32 and at 1000 messages per pull: one pull in flight per queue, the way a push consumer
pulls (8 queues by default, RocketMQ's default for a created topic; a one-queue figure shows the round-trip
bound). Each figure is the best of
--repeat passes over the same backlog, because the machine is shared. Messages are counted by walking
TOTALSIZE fields only. The broker raises maxTransferCountOnMessageInMemory / maxTransferBytesOnMessageInMemory
to 1024 / 1 MiB for the run: RocketMQ's defaults (32 / 256 KiB) cap every pull at 32 messages whatever the
client asks.

Wake-up: a consumer parks a long-poll pull on an empty queue, a producer connection sends one message, and the
time from issuing the send to receiving the pull's answer is recorded (the send's own round trip included).
Prints figures and returns them from `run()`; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

try:
    from benchmarks._cluster import child_server
except ImportError:  # run as benchmarks/<this>.py, whose folder is sys.path[0]
    from _cluster import child_server  # type: ignore[no-redef]

TOPIC = "BenchPull"
WAKE_TOPIC = "BenchWake"
GROUP = "BenchPullGroup"
BODY = b"x" * 128
_I32 = struct.Struct(">i")


# -- the broker (child process) ----------------------------------------------------------------------

def _broker_main(data_dir: str, queues: int, messages: int, conn: Connection) -> None:
    import logging

    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    run_loop(_serve(data_dir, queues, messages, conn))


async def _serve(data_dir: str, queues: int, messages: int, conn: Connection) -> None:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.topic_manager import new_topic_config
    from rocketq.codec.message import UniqIdGenerator, encode_properties
    from rocketq.config import BrokerConfig
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig
    from rocketq.store.model import MessageBatchToStore

    store_cfg = MessageStoreConfig(store_path_root_dir=data_dir,
                                   max_transfer_count_on_message_in_memory=1024,
                                   max_transfer_bytes_on_message_in_memory=1 << 20)
    ctl = BrokerController(BrokerConfig(broker_name="bench-pull"), store_cfg,
                           RemotingServerConfig(listen_port=0))
    await ctl.start()
    ctl.topic_manager.update_topic_config(new_topic_config(TOPIC, queues, queues))
    ctl.topic_manager.update_topic_config(new_topic_config(WAKE_TOPIC, 1, 1))
    ids = UniqIdGenerator()
    per_queue = messages // queues
    chunk = 1000
    for q in range(queues):
        for start in range(0, per_queue, chunk):
            n = min(chunk, per_queue - start)
            items = [(0, BODY, encode_properties({"UNIQ_KEY": ids.next_id(), "WAIT": "true"}), 0, ())
                     for _ in range(n)]
            batch = MessageBatchToStore(TOPIC, q, items, born_timestamp=int(time.time() * 1000),
                                        born_host=("127.0.0.1", 5555))
            ctl.store.append_messages(batch)
    conn.send(ctl.address)
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    await ctl.shutdown()


# -- the consumer (this process) ---------------------------------------------------------------------

def count_records(body: Any) -> int:
    """Stored records in a pull body, by walking TOTALSIZE fields (no decoding)."""
    if isinstance(body, list | tuple):
        return sum(count_records(part) for part in body)
    view = memoryview(body)
    end = len(view)
    n = pos = 0
    unpack = _I32.unpack_from
    while pos + 4 <= end:
        (size,) = unpack(view, pos)
        if size <= 0:
            break
        pos += size
        n += 1
    return n


def _pull_cmd(topic: str, queue_id: int, offset: int, max_nums: int, suspend_ms: int = 0) -> Any:
    from rocketq.codec.codes import RequestCode
    from rocketq.codec.command import RemotingCommand

    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": GROUP, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": "6" if suspend_ms else "4", "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms), "subVersion": "0", "subscription": "*",
        "expressionType": "TAG"})


async def _drain_queue(client: Any, addr: str, queue_id: int, per_queue: int,
                       max_nums: int) -> tuple[int, int]:
    offset = msgs = pulls = 0
    while offset < per_queue:
        resp = await client.invoke(addr, _pull_cmd(TOPIC, queue_id, offset, max_nums), 30.0)
        if resp.code != 0:
            raise RuntimeError(f"pull failed: {resp.code} {resp.remark}")
        msgs += count_records(resp.body)
        pulls += 1
        offset = int(resp.ext_fields["nextBeginOffset"])
    return msgs, pulls


async def _drain(addr: str, queues: int, per_queue: int, max_nums: int) -> tuple[float, float]:
    from rocketq.remoting import RemotingClient

    client = RemotingClient()
    try:
        await _drain_queue(client, addr, 0, min(per_queue, 20 * max_nums), max_nums)  # warm up
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(_drain_queue(client, addr, q, per_queue, max_nums) for q in range(queues)))
        dt = time.perf_counter() - t0
    finally:
        await client.close()
    msgs = sum(r[0] for r in results)
    pulls = sum(r[1] for r in results)
    if msgs != queues * per_queue:
        raise RuntimeError(f"drained {msgs} messages, expected {queues * per_queue}")
    return msgs / dt, pulls / dt


async def _wakeups(addr: str, rounds: int) -> dict[str, float]:
    from rocketq.codec.codes import RequestCode
    from rocketq.codec.command import RemotingCommand
    from rocketq.codec.message import encode_properties
    from rocketq.remoting import RemotingClient

    consumer, producer = RemotingClient(), RemotingClient()
    wake: list[float] = []
    send_rtt: list[float] = []
    try:
        for i in range(rounds + 5):
            parked = _pull_cmd(WAKE_TOPIC, 0, i, 32, 15_000)
            pull_fut = asyncio.ensure_future(consumer.invoke(addr, parked, 20.0))
            await asyncio.sleep(0.003)  # the pull reaches the broker and is parked
            answered: list[float] = []
            pull_fut.add_done_callback(lambda _f, a=answered: a.append(time.perf_counter()))
            send = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
                "a": "BenchProducer", "b": WAKE_TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
                "g": str(int(time.time() * 1000)), "h": "0", "i": encode_properties({"WAIT": "true"}),
                "j": "0", "k": "false"}, BODY)
            t0 = time.perf_counter()
            resp = await producer.invoke(addr, send, 5.0)
            t_send = time.perf_counter()
            pulled = await pull_fut
            if resp.code != 0 or pulled.code != 0 or count_records(pulled.body) != 1:
                raise RuntimeError(f"wake-up round failed: send {resp.code}, pull {pulled.code}")
            if i >= 5:  # the first rounds warm up connections and caches
                wake.append(answered[0] - t0)
                send_rtt.append(t_send - t0)
    finally:
        await consumer.close()
        await producer.close()
    wake.sort()
    send_rtt.sort()

    def pct(xs: list[float], p: float) -> float:
        return xs[min(len(xs) - 1, int(len(xs) * p))] * 1e3

    return {
        "longpoll_wakeup_p50_ms": statistics.median(wake) * 1e3,
        "longpoll_wakeup_p99_ms": pct(wake, 0.99),
        "send_rtt_p50_ms": statistics.median(send_rtt) * 1e3,
    }


async def _best_drain(addr: str, queues: int, per_queue: int, max_nums: int,
                      repeat: int) -> tuple[float, float]:
    """Best of `repeat` passes over the same backlog: the box is shared; the best pass is the capability."""
    runs = [await _drain(addr, queues, per_queue, max_nums) for _ in range(repeat)]
    return max(runs)


async def _client_main(addr: str, queues: int, messages: int, wakeups: int, repeat: int) -> dict[str, float]:
    per_queue = messages // queues
    figures: dict[str, float] = {}
    for max_nums in (32, 1000):
        rate, pulls = await _best_drain(addr, queues, per_queue, max_nums, repeat)
        figures[f"pull_msgs_per_s_{max_nums}_per_pull"] = rate
        figures[f"pulls_per_s_{max_nums}_per_pull"] = pulls
        print(f"pull {max_nums:>4}/pull, {queues} queue(s), {messages:,} msgs: {rate:>12,.0f} msgs/s "
              f"({pulls:,.0f} pulls/s)")
    rate, _ = await _best_drain(addr, 1, per_queue, 32, repeat)
    figures["pull_msgs_per_s_32_per_pull_one_queue"] = rate
    print(f"pull   32/pull, 1 queue, one pull in flight:      {rate:>12,.0f} msgs/s")
    w = await _wakeups(addr, wakeups)
    figures.update(w)
    print(f"long-poll send->held pull answered: p50 {w['longpoll_wakeup_p50_ms']:.3f} ms, "
          f"p99 {w['longpoll_wakeup_p99_ms']:.3f} ms "
          f"(send round trip alone p50 {w['send_rtt_p50_ms']:.3f} ms)")
    return figures




def run(messages: int = 1_000_000, queues: int = 8, wakeups: int = 300, repeat: int = 3) -> dict[str, float]:
    from rocketq.remoting.loop import run as run_loop

    with child_server(_broker_main, queues, messages, prefix="rocketq-bench-pull-") as (addr, _pid):
        return run_loop(_client_main(addr, queues, messages, wakeups, repeat))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--wakeups", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3, help="passes per drain figure (the best is shown)")
    args = ap.parse_args(argv)
    print(f"bench_pull: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    run(args.messages, args.queues, args.wakeups, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
