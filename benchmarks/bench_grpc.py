"""The broker's CPU per message on its RocketMQ 5 gRPC endpoint (docs/grpc.md).

    .venv/bin/python benchmarks/bench_grpc.py [--messages N] [--inflight K] [--batch B]

The name server and broker (grpcPort 0) run in a child process; this process drives the broker
with raw `apache.rocketmq.v2` stubs on one grpc.aio channel (no official client: its own cost is not
the broker's). Three phases: SendMessage with one message per call (K calls in flight), SendMessage
with B messages per call, then ReceiveMessage (batch 32) + one AckMessage per batch until the
backlog is drained. Printed: messages per second and the broker's CPU per message (targets: 30 µs
per sent message, 5 µs batched, 20 µs per received + acked message). Never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

try:
    from benchmarks._cluster import child_server
    from benchmarks.bench_consumer import _process_cpu
except ImportError:  # run as benchmarks/<this>.py, whose folder is sys.path[0]
    from _cluster import child_server  # type: ignore[no-redef]
    from bench_consumer import _process_cpu  # type: ignore[no-redef]

TOPIC = "BenchGrpc"
GROUP = "BenchGrpcGroup"
BODY = b"x" * 128
QUEUES = 8


def _servers_main(data_dir: str, conn: Connection) -> None:
    from rocketq.remoting.loop import run as run_loop

    logging.basicConfig(level=logging.WARNING)
    run_loop(_serve(data_dir, conn))


async def _serve(data_dir: str, conn: Connection) -> None:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.topic_manager import new_topic_config
    from rocketq.config import BrokerConfig, NamesrvConfig
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig

    ns = NamesrvController(
        NamesrvConfig(listen_port=0, kv_config_path=os.path.join(data_dir, "kv.json"),
                      config_store_path=os.path.join(data_dir, "namesrv.properties")),
        RemotingServerConfig(listen_port=0),
    )
    await ns.start()
    store_cfg = MessageStoreConfig(store_path_root_dir=os.path.join(data_dir, "store"),
                                   mapped_file_size_commit_log=256 * 1024 * 1024,
                                   max_hash_slot_num=10_000, max_index_num=400_000)
    ctl = BrokerController(BrokerConfig(broker_name="bench-grpc", namesrv_addr=ns.address, grpc_port=0),
                           store_cfg, RemotingServerConfig(listen_port=0))
    await ctl.start()
    ctl.topic_manager.update_topic_config(new_topic_config(TOPIC, QUEUES, QUEUES))
    conn.send((ctl.grpc_address, os.getpid()))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    await ctl.shutdown()
    await ns.shutdown()


def _message(d: Any, i: int) -> Any:
    m = d.Message(topic=d.Resource(name=TOPIC), body=BODY)
    sp = m.system_properties
    sp.message_id = f"0102FC00000001{i:020X}"
    sp.message_type = d.NORMAL
    sp.tag = "T"
    sp.born_timestamp.GetCurrentTime()
    return m


async def _send(stub: Any, d: Any, s: Any, total: int, inflight: int, per_call: int, pid: int,
                label: str) -> dict[str, float]:
    sent = 0
    metadata = (("x-mq-client-id", f"bench-{os.getpid()}"),)

    async def worker() -> None:
        nonlocal sent
        while sent < total:
            n = min(per_call, total - sent)
            sent += n
            batch = s.SendMessageRequest(messages=[_message(d, sent + i) for i in range(n)])
            resp = await stub.SendMessage(batch, metadata=metadata)
            if resp.status.code != d.OK:
                raise RuntimeError(f"send failed: {resp.status}")

    srv0, t0 = _process_cpu(pid), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    elapsed, srv = time.perf_counter() - t0, _process_cpu(pid) - srv0
    us = srv / total * 1e6
    print(f"  SendMessage {label}: {total:,} msgs in {elapsed:.2f} s = {total / elapsed:,.0f} msgs/s; "
          f"broker CPU/msg {us:.1f} us")
    key = "send_single" if per_call == 1 else f"send_batch{per_call}"
    return {f"{key}_msgs_per_s": total / elapsed, f"{key}_broker_cpu_us_per_msg": us}


async def _receive(stub: Any, d: Any, s: Any, total: int, inflight: int, pid: int) -> dict[str, float]:
    done = 0
    metadata = (("x-mq-client-id", f"bench-c-{os.getpid()}"),)
    mq = d.MessageQueue(topic=d.Resource(name=TOPIC), id=-1)

    async def worker() -> None:
        nonlocal done
        while done < total:
            req = s.ReceiveMessageRequest(group=d.Resource(name=GROUP), message_queue=mq, batch_size=32,
                                          filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
            req.invisible_duration.FromSeconds(60)
            req.long_polling_timeout.FromSeconds(1)
            msgs = [r.message async for r in stub.ReceiveMessage(req, metadata=metadata)
                    if r.WhichOneof("content") == "message"]
            if not msgs:
                continue
            entries = [s.AckMessageEntry(message_id=m.system_properties.message_id,
                                         receipt_handle=m.system_properties.receipt_handle) for m in msgs]
            resp = await stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=GROUP),
                                                             topic=d.Resource(name=TOPIC), entries=entries),
                                         metadata=metadata)
            if resp.status.code != d.OK:
                raise RuntimeError(f"ack failed: {resp.status}")
            done += len(msgs)

    srv0, t0 = _process_cpu(pid), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    elapsed, srv = time.perf_counter() - t0, _process_cpu(pid) - srv0
    us = srv / done * 1e6
    print(f"  ReceiveMessage(32) + AckMessage: {done:,} msgs in {elapsed:.2f} s = "
          f"{done / elapsed:,.0f} msgs/s; broker CPU/msg {us:.1f} us")
    return {"receive_ack_msgs_per_s": done / elapsed, "receive_ack_broker_cpu_us_per_msg": us}


async def _client_main(address: str, pid: int, messages: int, inflight: int, batch: int) -> dict[str, float]:
    import grpc

    from rocketq.broker.grpc.protocol import load

    d, s, stubs = load()
    figures: dict[str, float] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = stubs.MessagingServiceStub(channel)
        figures |= await _send(stub, d, s, messages, inflight, 1, pid, "(1 per call)")
        figures |= await _send(stub, d, s, messages, max(1, inflight // 4), batch, pid, f"({batch} per call)")
        figures |= await _receive(stub, d, s, 2 * messages, max(1, inflight // 4), pid)
    return figures


def run(messages: int = 20_000, inflight: int = 32, batch: int = 32) -> dict[str, float]:
    logging.basicConfig(level=logging.WARNING)
    with child_server(_servers_main, prefix="rocketq-bench-grpc-") as ((address, pid), _):
        return asyncio.run(_client_main(address, pid, messages, inflight, batch))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args(argv)
    print(f"bench_grpc: python {sys.version.split()[0]}, cpus={os.cpu_count()}")
    run(args.messages, args.inflight, args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
