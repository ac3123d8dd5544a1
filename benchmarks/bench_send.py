"""Send benchmarks against a real broker process: what the broker acknowledges per second.

    .venv/bin/python -m benchmarks send
    .venv/bin/python benchmarks/bench_send.py [--duration S] [--repeat N] [--phases single,batch,sync]
                                              [--profile DIR]

The broker is ``rocketq up`` in a subprocess (temporary data dir, default 1 GiB segments); the
client is this process. Three phases:

* single: SEND_MESSAGE_V2, 128 B bodies, 64 requests in flight on ONE connection, ASYNC_FLUSH
  (target >= 60,000 msgs/s);
* batch: SEND_BATCH_MESSAGE of 100 x 128 B, 8 batches in flight, ASYNC_FLUSH (target >= 500,000 msgs/s);
* sync: a SYNC_FLUSH broker, 64 concurrent senders (one request each), every message fsynced
  before its ack by the broker's group commit (target >= 20,000 msgs/s).

The client must never be what the figure measures, so it is as lean as a client can be: requests
are encoded once, up front (a pool of 16,384 single messages, each with its own UNIQ_KEY and a
tag as a Java producer sends them, or 1,000 batch bodies of 100 such messages), and sending one
only patches the opaque into its JSON header. Responses are counted by a raw asyncio Protocol
that scans frame headers for the code and opaque instead of decoding them; every response read
in one ``data_received`` is answered with its replacement requests in one write, as a pipelining
producer does.

Each window warms up, then counts the acks completed within it; latency is request-to-ack. The
broker's CPU (from /proc), this process's CPU and the rest of the host's load over the window
tell which side was saturated; the broker's CPU per message is the figure least disturbed by a
busy host. ``--repeat`` windows run per phase; the best and the median are reported (the machine
is shared), with the load average.

``--profile DIR`` also runs ``py-spy record`` on the broker during each phase's last window and
prints the functions with the most samples (own time and inclusive). py-spy samples wall time
of a running thread: ``Runner.run`` is the event loop's C code, and ``Channel._write_out``
includes the moments the broker is preempted by the client its write just woke (``perf`` puts
the writev itself at a few per cent of the CPU). Prints figures and returns them from `run()`;
never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

if __package__ in (None, ""):  # run as a script: make `benchmarks._cluster` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._cluster import BrokerProcess, host_busy_seconds
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import encode_frame
from rocketq.codec.message import BatchItem, UniqIdGenerator, encode_batch_body
from rocketq.remoting import RemotingClient, split_address
from rocketq.remoting.loop import run as run_loop

TOPIC = "BenchSend"
QUEUES = 8
BODY = b"m" * 128
BATCH = 100
BATCH_POOL = 1000
SINGLE_POOL = 16384
WARMUP = 1.0
DURATION = 4.0
REPEAT = 3
TARGETS = {"single": 60_000, "batch": 500_000, "sync": 20_000}


@dataclass(frozen=True, slots=True)
class PhaseSpec:
    name: str
    title: str
    code: int
    in_flight: int
    msgs_per_request: int
    sync_flush: bool


PHASES = {
    "single": PhaseSpec("single", "SEND_MESSAGE_V2 128 B, 64 in flight, 1 connection, ASYNC_FLUSH",
                        RequestCode.SEND_MESSAGE_V2, 64, 1, False),
    "batch": PhaseSpec("batch", "SEND_BATCH_MESSAGE 100 x 128 B, 8 batches in flight, ASYNC_FLUSH",
                       RequestCode.SEND_BATCH_MESSAGE, 8, BATCH, False),
    "sync": PhaseSpec("sync", "SEND_MESSAGE_V2 128 B, 64 concurrent senders, SYNC_FLUSH",
                      RequestCode.SEND_MESSAGE_V2, 64, 1, True),
}


# -- pre-encoded requests ------------------------------------------------------------------------------

# Opaques stay 10 decimal digits wide (and inside Java's int), so patching one never moves a byte.
OPAQUE_BASE = 1_000_000_000
OPAQUE_SPAN = 1_000_000_000
_OPAQUE_KEY = b'"opaque":'
_PREFIX = struct.Struct(">iI")


@dataclass(frozen=True, slots=True)
class FrameTemplate:
    """One request frame split around its opaque digits: head + digits + tail (+ body)."""

    head: bytes
    tail: bytes
    body: bytes  # empty when small enough to live in `tail`


def _header(queue_id: int, properties: str, batch: bool) -> dict[str, str]:
    """SendMessageRequestHeaderV2 as a 4.9 Java producer fills it."""
    return {"a": "BenchProducerGroup", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": properties, "j": "0", "k": "false",
            "m": "true" if batch else "false"}


def _template(cmd: RemotingCommand) -> FrameTemplate:
    cmd.opaque = OPAQUE_BASE
    parts = encode_frame(cmd)
    first = bytes(parts[0])
    marker = _OPAQUE_KEY + str(OPAQUE_BASE).encode()
    at = first.index(marker) + len(_OPAQUE_KEY)
    body = b"".join(bytes(p) for p in parts[1:])
    return FrameTemplate(first[:at], first[at + 10:], body)


def single_pool(n: int = SINGLE_POOL) -> list[FrameTemplate]:
    uniq = UniqIdGenerator()
    code = int(RequestCode.SEND_MESSAGE_V2)
    return [_template(RemotingCommand.request(
        code, _header(i % QUEUES, f"TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x01{uniq()}", False), BODY))
        for i in range(n)]


def batch_pool(n: int = BATCH_POOL) -> list[FrameTemplate]:
    uniq = UniqIdGenerator()
    code = int(RequestCode.SEND_BATCH_MESSAGE)
    out = []
    for i in range(n):
        body = encode_batch_body(BatchItem(0, BODY, f"TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x01{uniq()}")
                                 for _ in range(BATCH))
        out.append(_template(RemotingCommand.request(
            code, _header(i % QUEUES, f"WAIT\x01true\x02UNIQ_KEY\x01{uniq()}", True), body)))
    return out


# -- the raw client ------------------------------------------------------------------------------------

@dataclass
class Window:
    start: float = 0.0
    end: float = 0.0
    acked_requests: int = 0
    errors: int = 0
    first_error: str = ""
    latencies: list[float] = field(default_factory=list)


def _response_of(header: bytes) -> tuple[int, int, str]:
    """(code, opaque, remark) of a response header that the quick scan could not read."""
    try:
        obj = orjson.loads(header)
        return int(obj.get("code", -1)), int(obj.get("opaque", -1)), str(obj.get("remark") or "")
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return -1, -1, f"unreadable response header {header[:80]!r}"


class RawSender(asyncio.Protocol):
    """Keeps `in_flight` requests outstanding on one connection, counting acks by opaque."""

    def __init__(self, pool: list[FrameTemplate], in_flight: int, window: Window) -> None:
        self.pool = pool
        self.in_flight = in_flight
        self.w = window
        self.transport: asyncio.Transport | None = None
        self.sent: dict[int, float] = {}  # opaque -> send time
        self.seq = 0
        self.stopping = False
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._rest = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.w.errors += len(self.sent)
            self.w.first_error = self.w.first_error or f"connection lost: {exc!r}"
            self.done.set_result(None)

    def _requests(self, n: int, now: float, out: list[bytes]) -> None:
        pool, size, sent = self.pool, len(self.pool), self.sent
        seq = self.seq
        for _ in range(n):
            t = pool[seq % size]
            opaque = OPAQUE_BASE + seq % OPAQUE_SPAN
            sent[opaque] = now
            out.append(t.head)
            out.append(b"%d" % opaque)
            out.append(t.tail)
            if t.body:
                out.append(t.body)
            seq += 1
        self.seq = seq

    def start(self) -> None:
        out: list[bytes] = []
        self._requests(self.in_flight, time.perf_counter(), out)
        assert self.transport is not None
        self.transport.writelines(out)

    def data_received(self, data: bytes) -> None:
        if self._rest:
            data = self._rest + data
        now = time.perf_counter()
        w = self.w
        counted = w.start <= now < w.end
        record = w.latencies.append
        sent = self.sent
        n = len(data)
        pos = 0
        answered = 0
        unpack = _PREFIX.unpack_from
        find = data.find
        while n - pos >= 8:
            frame_len, hlen = unpack(data, pos)
            end = pos + 4 + frame_len
            if end > n:
                break
            h0 = pos + 8
            h1 = h0 + (hlen & 0xFFFFFF)
            i = find(_OPAQUE_KEY, h0, h1)
            j = find(b",", i + 9, h1) if i >= 0 else -1
            if j > 0 and data.startswith(b'{"code":0,', h0):
                code, opaque, remark = 0, int(data[i + 9:j]), ""
            else:
                code, opaque, remark = _response_of(data[h0:h1])
            t0 = sent.pop(opaque, None)
            if t0 is not None:
                answered += 1
                if code != 0:
                    w.errors += 1
                    w.first_error = w.first_error or f"{code} {remark}"
                elif counted:
                    w.acked_requests += 1
                    record(now - t0)
            pos = end
        self._rest = data[pos:]
        if not answered:
            return
        if now < w.end and not self.stopping:
            out: list[bytes] = []
            self._requests(answered, now, out)
            assert self.transport is not None
            self.transport.writelines(out)
        elif not sent and not self.done.done():
            self.done.set_result(None)


async def _create_topic(addr: str) -> None:
    ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
           "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
           "order": "false"}
    client = RemotingClient()
    try:
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 10)
    finally:
        await client.close()
    if r.code != 0:
        raise RuntimeError(f"create topic failed: {r.code} {r.remark}")


def _pct(sorted_xs: list[float], p: float) -> float:
    if not sorted_xs:
        return float("nan")
    return sorted_xs[min(len(sorted_xs) - 1, int(len(sorted_xs) * p))] * 1e3


async def _drive(spec: PhaseSpec, broker: BrokerProcess, pool: list[FrameTemplate], duration: float,
                 profile_dir: Path | None) -> tuple[dict[str, float], Window, _Spy | None]:
    """One measured window of one phase: (figures, window, profile being recorded)."""
    loop = asyncio.get_running_loop()
    host, port = split_address(broker.broker)
    now = time.perf_counter()
    w = Window(start=now + WARMUP, end=now + WARMUP + duration)
    transport, proto = await loop.create_connection(lambda: RawSender(pool, spec.in_flight, w), host, port)
    try:
        proto.start()
        await asyncio.sleep(max(0.0, w.start - time.perf_counter()))
        spy = _start_py_spy(broker.pid, spec.name, duration, profile_dir)
        cpu_b0, cpu_c0, host0 = broker.cpu_seconds(), time.process_time(), host_busy_seconds()
        await asyncio.sleep(max(0.0, w.end - time.perf_counter()))
        cpu_b1, cpu_c1, host1 = broker.cpu_seconds(), time.process_time(), host_busy_seconds()
        load1 = os.getloadavg()[0]
        proto.stopping = True
        await asyncio.wait_for(proto.done, 60)
    finally:
        transport.close()
    latencies = sorted(w.latencies)
    acked = w.acked_requests * spec.msgs_per_request
    broker_cpu, client_cpu = cpu_b1 - cpu_b0, cpu_c1 - cpu_c0
    figures = {
        "msgs_per_s": acked / duration,
        "requests_per_s": w.acked_requests / duration,
        "ack_p50_ms": _pct(latencies, 0.50),
        "ack_p99_ms": _pct(latencies, 0.99),
        "broker_cpu_pct": 100 * broker_cpu / duration,
        "client_cpu_pct": 100 * client_cpu / duration,
        # CPU cost per acknowledged message: unlike msgs/s it hardly depends on how busy the box is.
        "broker_cpu_us_per_msg": 1e6 * broker_cpu / max(1, acked),
        "client_cpu_us_per_msg": 1e6 * client_cpu / max(1, acked),
        # Everything else the (shared) machine ran meanwhile, in cores.
        "other_load_cores": ((host1 - host0) - broker_cpu - client_cpu) / duration,
        "load_avg_1min": load1,
        "errors": float(w.errors),
    }
    return figures, w, spy


def _show(spec: PhaseSpec, f: dict[str, float], w: Window) -> None:
    target = TARGETS[spec.name]
    verdict = "met" if f["msgs_per_s"] >= target else "MISSED"
    print(f"        {f['msgs_per_s']:>11,.0f} msgs/s ({f['requests_per_s']:,.0f} req/s)  "
          f"ack p50 {f['ack_p50_ms']:.2f} ms  p99 {f['ack_p99_ms']:.2f} ms  target {target:,}: {verdict}")
    print(f"        broker cpu {f['broker_cpu_pct']:.0f}% ({f['broker_cpu_us_per_msg']:.1f} us/msg)  "
          f"client cpu {f['client_cpu_pct']:.0f}% ({f['client_cpu_us_per_msg']:.1f} us/msg)  "
          f"other load on the host {f['other_load_cores']:.2f} of {os.cpu_count()} cores  "
          f"load avg {f['load_avg_1min']:.2f}")
    if w.errors:
        print(f"        {w.errors} error responses, first: {w.first_error}")


async def _phase(spec: PhaseSpec, broker: BrokerProcess, duration: float, repeat: int,
                 profile_dir: Path | None) -> dict[str, float]:
    """`repeat` windows on the same broker: the best and the median (the machine is shared)."""
    print(f"{spec.name:>6}: {spec.title}")
    await _create_topic(broker.broker)
    pool = single_pool() if spec.code == RequestCode.SEND_MESSAGE_V2 else batch_pool()
    runs: list[dict[str, float]] = []
    for i in range(repeat):
        figures, w, spy = await _drive(spec, broker, pool, duration, profile_dir if i == repeat - 1 else None)
        _show(spec, figures, w)
        if spy is not None:
            _report_py_spy(spy, spec.name)
        runs.append(figures)
    best = max(runs, key=lambda f: f["msgs_per_s"])
    rates = [f["msgs_per_s"] for f in runs]
    cpus = [f["broker_cpu_us_per_msg"] for f in runs]
    print(f"        best {max(rates):,.0f} msgs/s, median {statistics.median(rates):,.0f} msgs/s; "
          f"broker {min(cpus):.1f} us/msg best, {statistics.median(cpus):.1f} median")
    out = {f"{spec.name}_{k}": v for k, v in best.items()}
    out[f"{spec.name}_median_msgs_per_s"] = statistics.median(rates)
    out[f"{spec.name}_median_broker_cpu_us_per_msg"] = statistics.median(cpus)
    return out


# -- profiling -------------------------------------------------------------------------------------------

@dataclass
class _Spy:
    proc: subprocess.Popen[bytes]
    out: Path


def _start_py_spy(pid: int, name: str, duration: float, profile_dir: Path | None) -> _Spy | None:
    if profile_dir is None:
        return None
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    profile_dir.mkdir(parents=True, exist_ok=True)
    out = profile_dir / f"send_{name}.txt"
    args = [exe, "record", "--pid", str(pid), "--duration", str(max(1, int(duration))), "--rate", "250",
            "--format", "raw", "--function", "--nonblocking", "--output", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _Spy(proc, out)


def _frame_name(frame: str) -> str:
    """"Func (rocketq/store/index.py:69)" -> "store/index.py Func"."""
    func, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    return f"{path.removeprefix('rocketq/')} {func}"


def _report_py_spy(spy: _Spy, name: str, top: int = 15) -> None:
    try:
        spy.proc.wait(30)
    except subprocess.TimeoutExpired:
        spy.proc.kill()
    if not spy.out.exists():
        print(f"        (py-spy wrote no profile for {name}; is ptrace allowed?)")
        return
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = in_threads = 0
    for line in spy.out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        if any(f.startswith("_worker (") for f in frames):
            in_threads += n  # flush / fsync / file allocation off the loop
        own[_frame_name(frames[-1])] += n
        for f in {_frame_name(f) for f in frames if "(rocketq/" in f and "/cli/" not in f}:
            incl[f] += n
    if not total:
        return
    print(f"        py-spy: {total} samples, {100 * in_threads / total:.0f}% in worker threads ({spy.out})")
    print("        own time (where the CPU is; Runner.run = the event loop's C code and its syscalls)")
    for f, n in own.most_common(top):
        print(f"          {100 * n / total:5.1f}%  {f}")
    print("        inclusive, rocketq functions")
    for f, n in incl.most_common(top):
        print(f"          {100 * n / total:5.1f}%  {f}")


# -- entry points ---------------------------------------------------------------------------------------

def run(duration: float = DURATION, phases: tuple[str, ...] = ("single", "batch", "sync"),
        repeat: int = REPEAT, profile_dir: str | None = None) -> dict[str, float]:
    figures: dict[str, float] = {}
    prof = Path(profile_dir) if profile_dir else None
    async_phases = [p for p in phases if not PHASES[p].sync_flush]
    if async_phases:
        with BrokerProcess(name="bench-send-async") as broker:
            for p in async_phases:
                figures.update(run_loop(_phase(PHASES[p], broker, duration, repeat, prof)))
    if "sync" in phases:
        with BrokerProcess("flushDiskType=SYNC_FLUSH", name="bench-send-sync") as broker:
            figures.update(run_loop(_phase(PHASES["sync"], broker, duration, repeat, prof)))
    return figures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--duration", type=float, default=DURATION, help="measured seconds per window")
    ap.add_argument("--repeat", type=int, default=REPEAT, help="windows per phase (best and median shown)")
    ap.add_argument("--phases", default="single,batch,sync")
    ap.add_argument("--profile", metavar="DIR",
                    help="py-spy the broker during each phase's last window, raw stacks to DIR")
    args = ap.parse_args(argv)
    phases = tuple(p for p in args.phases.split(",") if p)
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        ap.error(f"unknown phase(s) {unknown}; known: {list(PHASES)}")
    print(f"bench_send: python {sys.version.split()[0]}, cpus={os.cpu_count()}, "
          f"load avg {os.getloadavg()[0]:.2f}")
    run(args.duration, phases, max(1, args.repeat), args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
