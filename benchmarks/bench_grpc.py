"""The broker's CPU per message on its RocketMQ 5 gRPC endpoint (docs/grpc.md).

    .venv/bin/python benchmarks/bench_grpc.py [--messages N] [--inflight K] [--batch B]

The name server and broker (grpcPort 0) run in a child process; this process drives the broker
with raw `apache.rocketmq.v2` stubs on one grpc.aio channel (no official client: its own cost is not
the broker's). Three phases: SendMessage with one message per call (K calls in flight), SendMessage
with B messages per call, then ReceiveMessage (batch 32) + one AckMessage per batch until the
backlog is drained. Printed: messages per second and the broker's CPU per message (targets: 30 µs
per sent message, 5 µs batched, 20 µs per received + acked message). Never asserts.

    .venv/bin/python benchmarks/bench_grpc.py --connections 1000 [--only-connections]

    .venv/bin/python benchmarks/bench_grpc.py --floor

The floor phase measures grpcio itself on this machine: the server CPU of a no-op unary call and
of one response of a no-op server stream (bytes in, bytes out, no protobuf, no broker), on a
grpc.aio server and, for the unary call, on a sync grpc.server with a thread pool. What the
broker's RPCs cost above these figures is ours.

The connections phase (target: 1,000 clients with ≤ 200 MB broker RSS) opens N gRPC channels from a
few client processes, each channel its own TCP connection doing what a real client does on start:
Heartbeat, QueryRoute, then a Telemetry stream with its settings, kept open. Printed: the broker's
RSS (VmRSS of /proc/PID/status) before and with all N connected, and the cost per connection.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import os
import statistics
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


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _sockets(pid: int) -> int:
    """How many sockets the process has open: proof that each client is a connection of its own."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return n


async def _hold_connections(address: str, n: int, first: int, conn: Connection) -> None:
    """`n` clients, each on a channel of its own (a local subchannel pool: its own TCP connection),
    started as the official clients start; held open until the parent says so."""
    import grpc

    from rocketq.broker.grpc.protocol import load

    d, s, stubs = load()
    channels: list[Any] = []
    calls: list[Any] = []
    pid = os.getpid()

    async def one(i: int) -> None:
        channel = grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
        channels.append(channel)
        stub = stubs.MessagingServiceStub(channel)
        md = (("x-mq-client-id", f"bench-conn-{pid}-{first + i}"), ("x-mq-language", "PYTHON"))
        await stub.Heartbeat(s.HeartbeatRequest(client_type=d.PRODUCER), metadata=md)
        route = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=TOPIC)), metadata=md)
        if route.status.code != d.OK:
            raise RuntimeError(f"route: {route.status}")
        publishing = d.Publishing(topics=[d.Resource(name=TOPIC)])
        settings = d.Settings(client_type=d.PRODUCER, publishing=publishing)
        call = stub.Telemetry(metadata=md)
        await call.write(s.TelemetryCommand(settings=settings))
        await call.read()  # the settings echoed: the stream is up, as a client keeps it
        calls.append(call)

    for start in range(0, n, 50):  # in waves: a burst of 1,000 handshakes is not what is measured
        await asyncio.gather(*(one(i) for i in range(start, min(n, start + 50))))
    conn.send(len(calls))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)
    for call in calls:
        call.cancel()
    for channel in channels:
        await channel.close()


def _connections_main(address: str, n: int, first: int, conn: Connection) -> None:
    asyncio.run(_hold_connections(address, n, first, conn))


def _connections(address: str, pid: int, total: int, processes: int = 4) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")  # grpc's core does not survive a fork
    before, sockets_before = _rss_kb(pid), _sockets(pid)
    pipes, procs = [], []
    share = -(-total // processes)
    for p in range(processes):
        n = min(share, total - p * share)
        if n <= 0:
            break
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_connections_main, args=(address, n, p * share, there), daemon=True)
        proc.start()
        pipes.append(here)
        procs.append(proc)
    try:
        opened = sum(here.recv() for here in pipes)
        time.sleep(1.0)  # the broker settles (its per-stream tasks, the heartbeat bookkeeping)
        held, sockets = _rss_kb(pid), _sockets(pid)
    finally:
        for here in pipes:
            here.send(None)
        for proc in procs:
            proc.join(30)
    per = (held - before) / max(1, opened)
    print(f"  {opened:,} gRPC clients (Heartbeat, QueryRoute, Telemetry open): broker RSS "
          f"{before / 1024:.1f} MB before, {held / 1024:.1f} MB with all connected "
          f"({per:.1f} KB per connection; broker sockets {sockets_before} -> {sockets})")
    return {"connections": float(opened), "connections_broker_rss_mb_before": before / 1024,
            "connections_broker_rss_mb": held / 1024, "connections_kb_per_connection": per,
            "connections_broker_sockets": float(sockets)}


def _ident(b: bytes) -> bytes:
    return b


def _floor_server(kind: str, conn: Connection) -> None:
    import grpc

    async def noop(_req: bytes, _ctx: Any) -> bytes:
        return b""

    async def stream(_req: bytes, _ctx: Any) -> Any:
        for _ in range(32):
            yield BODY

    def sync_noop(_req: bytes, _ctx: Any) -> bytes:
        return b""

    if kind == "sync":
        from concurrent.futures import ThreadPoolExecutor

        handlers = {"Unary": grpc.unary_unary_rpc_method_handler(sync_noop, _ident, _ident)}
        server = grpc.server(ThreadPoolExecutor(8), options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.S", handlers),))
        conn.send(server.add_insecure_port("127.0.0.1:0"))
        server.start()
        conn.recv()
        server.stop(0)
        return

    async def main() -> None:
        handlers = {"Unary": grpc.unary_unary_rpc_method_handler(noop, _ident, _ident),
                    "Stream": grpc.unary_stream_rpc_method_handler(stream, _ident, _ident)}
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.S", handlers),))
        conn.send(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await server.stop(0)

    asyncio.run(main())


async def _floor_drive(port: int, method: str, calls: int, inflight: int) -> None:
    import grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                if method == "Unary":
                    await channel.unary_unary("/floor.S/Unary", _ident, _ident)(b"")
                else:
                    async for _ in channel.unary_stream("/floor.S/Stream", _ident, _ident)(b""):
                        pass
        await asyncio.gather(*(worker() for _ in range(inflight)))


def _floor(calls: int = 10_000) -> dict[str, float]:
    """grpcio's own server CPU: per no-op unary call (aio and sync) and per streamed response."""
    ctx = multiprocessing.get_context("spawn")
    figures: dict[str, float] = {}
    for kind, method, n, per in (("aio", "Unary", calls, 1), ("sync", "Unary", calls, 1),
                                 ("aio", "Stream", calls // 32, 32)):
        samples = []
        for _ in range(3):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_floor_server, args=(kind, there), daemon=True)
            proc.start()
            port = here.recv()
            asyncio.run(_floor_drive(port, method, n // 10, 32 if per == 1 else 8))  # warm
            cpu0 = _process_cpu(proc.pid or 0)
            asyncio.run(_floor_drive(port, method, n, 32 if per == 1 else 8))
            samples.append((_process_cpu(proc.pid or 0) - cpu0) / (n * per) * 1e6)
            here.send(None)
            proc.join(30)
        what = "per no-op unary call" if per == 1 else "per streamed response"
        print(f"  grpcio floor, {kind} server {what}: best {min(samples):.1f} us, "
              f"median {statistics.median(samples):.1f} us")
        figures[f"floor_{kind}_{method.lower()}_us"] = statistics.median(samples)
    return figures


def run(messages: int = 20_000, inflight: int = 32, batch: int = 32, connections: int = 1000,
        only_connections: bool = False, floor: bool = True) -> dict[str, float]:
    logging.basicConfig(level=logging.WARNING)
    figures: dict[str, float] = _floor() if floor else {}
    with child_server(_servers_main, prefix="rocketq-bench-grpc-") as ((address, pid), _):
        if connections:  # first: the RSS of a broker that has served no traffic yet
            figures |= _connections(address, pid, connections)
        if not only_connections:
            figures |= asyncio.run(_client_main(address, pid, messages, inflight, batch))
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--connections", type=int, default=1000, help="0: no connections phase")
    ap.add_argument("--only-connections", action="store_true")
    ap.add_argument("--floor", action="store_true", help="only grpcio's own cost (no broker)")
    args = ap.parse_args(argv)
    if args.floor:
        _floor()
        return 0
    print(f"bench_grpc: python {sys.version.split()[0]}, cpus={os.cpu_count()}, load {os.getloadavg()}")
    run(args.messages, args.inflight, args.batch, args.connections, args.only_connections, floor=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
