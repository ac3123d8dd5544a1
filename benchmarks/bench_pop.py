"""Pop throughput: 16 SimpleConsumers receive (batch 32) and ack a backlog, against a real broker.

    .venv/bin/python benchmarks/bench_pop.py [--messages N] [--consumers C] [--batch B] [--queues Q]

The name server and broker run in a child process (their own event loop and core), the consumers in
this one as asyncio tasks on one loop, each its own client instance (connection). A backlog of N
messages (128 B bodies, 8 queues) is written straight into the broker's store; each consumer then
loops receive(B) -> ack_many (one BATCH_ACK_MESSAGE per batch) until the backlog is drained. A
second run acks each message with its own ACK_MESSAGE (``SimpleConsumer.ack``), RocketMQ 5's
per-message ack. Printed: messages received+acked per second, and the CPU per message of the client
and of the server. Never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from multiprocessing.connection import Connection

try:
    from benchmarks._cluster import child_server
    from benchmarks.bench_consumer import _process_cpu
except ImportError:  # run as benchmarks/<this>.py, whose folder is sys.path[0]
    from _cluster import child_server  # type: ignore[no-redef]
    from bench_consumer import _process_cpu  # type: ignore[no-redef]

TOPIC = "BenchPop"
BODY = b"x" * 128


def _servers_main(data_dir: str, queues: int, messages: int, conn: Connection) -> None:
    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    run_loop(_serve(data_dir, queues, messages, conn))


async def _serve(data_dir: str, queues: int, messages: int, conn: Connection) -> None:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.topic_manager import new_topic_config
    from rocketq.codec.message import UniqIdGenerator, encode_properties
    from rocketq.config import BrokerConfig, NamesrvConfig
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig
    from rocketq.store.model import MessageBatchToStore

    ns = NamesrvController(
        NamesrvConfig(listen_port=0, kv_config_path=os.path.join(data_dir, "kv.json"),
                      config_store_path=os.path.join(data_dir, "namesrv.properties")),
        RemotingServerConfig(listen_port=0),
    )
    await ns.start()
    store_cfg = MessageStoreConfig(store_path_root_dir=os.path.join(data_dir, "store"),
                                   mapped_file_size_commit_log=256 * 1024 * 1024,
                                   max_hash_slot_num=10_000, max_index_num=40_000)
    ctl = BrokerController(BrokerConfig(broker_name="bench-pop", namesrv_addr=ns.address), store_cfg,
                           RemotingServerConfig(listen_port=0))
    await ctl.start()
    ids = UniqIdGenerator()
    for run in ("batch", "single"):
        ctl.topic_manager.update_topic_config(new_topic_config(f"{TOPIC}_{run}", queues, queues))
        per_queue = messages // queues
        for q in range(queues):
            for start in range(0, per_queue, 1000):
                n = min(1000, per_queue - start)
                items = [(0, BODY, encode_properties({"UNIQ_KEY": ids.next_id(), "WAIT": "true"}), 0, ())
                         for _ in range(n)]
                ctl.store.append_messages(MessageBatchToStore(
                    f"{TOPIC}_{run}", q, items, born_timestamp=int(time.time() * 1000),
                    born_host=("127.0.0.1", 5555)))
    await ctl.register_broker_all()
    conn.send((ns.address, os.getpid()))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    await ctl.shutdown()
    await ns.shutdown()


async def _drain(namesrv: str, topic: str, total: int, consumers: int, batch: int, per_message: bool,
                 server_pid: int) -> dict[str, float]:
    from rocketq.client.consumer.simple import SimpleConsumer

    group = f"bench_pop_{topic}_{os.getpid()}"
    done = 0
    finished = asyncio.Event()
    started = [SimpleConsumer(group, namesrv_addr=namesrv, subscription={topic: "*"}, await_duration=1,
                              instance_name=f"{group}_{i}") for i in range(consumers)]
    for c in started:
        await c.start()

    async def loop(c: SimpleConsumer) -> None:
        nonlocal done
        while not finished.is_set():
            msgs = await c.receive(batch, 60)
            if not msgs:
                continue
            if per_message:
                await asyncio.gather(*(c.ack(m) for m in msgs))
            else:
                await c.ack_many(msgs)
            done += len(msgs)
            if done >= total:
                finished.set()

    cpu0, srv0, t0 = time.process_time(), _process_cpu(server_pid), time.perf_counter()
    tasks = [asyncio.ensure_future(loop(c)) for c in started]
    await finished.wait()
    elapsed = time.perf_counter() - t0
    cpu, srv = time.process_time() - cpu0, _process_cpu(server_pid) - srv0
    await asyncio.gather(*tasks)
    for c in started:
        await c.shutdown()
    rate = done / elapsed
    kind = "per-message ack" if per_message else f"batch ack ({batch})"
    print(f"  {consumers} consumers, receive({batch}) + {kind}: {done:,} msgs in {elapsed:.2f} s = "
          f"{rate:,.0f} msgs/s; CPU/msg client {cpu / done * 1e6:.1f} us, server {srv / done * 1e6:.1f} us")
    key = "per_message_ack" if per_message else "batch_ack"
    return {f"{key}_msgs_per_s": rate, f"{key}_client_cpu_us_per_msg": cpu / done * 1e6,
            f"{key}_server_cpu_us_per_msg": srv / done * 1e6}


async def _client_main(namesrv: str, pid: int, messages: int, consumers: int, batch: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    figures |= await _drain(namesrv, f"{TOPIC}_batch", messages, consumers, batch, False, pid)
    figures |= await _drain(namesrv, f"{TOPIC}_single", messages, consumers, batch, True, pid)
    return figures


def run(messages: int = 200_000, consumers: int = 16, batch: int = 32, queues: int = 8) -> dict[str, float]:
    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    with child_server(_servers_main, queues, messages, prefix="rocketq-bench-pop-",
                      start_timeout=600) as ((namesrv, pid), _):
        return run_loop(_client_main(namesrv, pid, messages, consumers, batch))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--consumers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--queues", type=int, default=8)
    args = ap.parse_args(argv)
    print(f"bench_pop: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    run(args.messages, args.consumers, args.batch, args.queues)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
