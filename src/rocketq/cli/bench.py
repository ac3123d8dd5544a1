"""``rocketq bench producer | consumer | e2e``: RocketMQ's benchmark tools (Producer.java,
Consumer.java) on the asyncio client.

Every second one line in RocketMQ's format, plus percentiles::

    Current Time: 2024-05-01 12:00:01 | Send TPS: 41234 | Max RT(ms): 12.871 | Average RT(ms): 0.774 |
    Send Failed: 0 | Response Failed: 0 | p50(ms): 0.61 | p99(ms): 3.20

then a summary with the whole run's percentiles; on a terminal a progress bar runs below the lines.
``--plot out.png`` draws TPS and latency over time (needs the ``plot`` extra: matplotlib).

``--threads`` is the number of concurrent senders (asyncio tasks on one connection per broker);
``--sync`` (default) makes each wait for its send, ``--async`` lets each keep ``--window`` sends
in flight (RocketMQ's async send with a callback). Latency samples go to a list per second and are
reduced with numpy once a second, so measuring costs one append per request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any, TextIO

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from rocketq.cli.argtypes import positive, seconds
from rocketq.cli.bench_rate import rate_sender, stamp_age_ms
from rocketq.cli.errors import CliError

__all__ = ["BenchOptions", "LatencyRecorder", "Sample", "add_commands", "run_bench"]

log = logging.getLogger("rocketq.cli.bench")

WARMUP_TIMEOUT = 15.0
# Log-spaced latency bins from 1 us to 10 min: about 2 % wide, plenty for p99.9 of a whole run.
_EDGES_MS = np.geomspace(0.001, 600_000.0, 1000)


@dataclass(frozen=True, slots=True)
class BenchOptions:
    mode: str  # producer | consumer | e2e
    namesrv: str
    topic: str = "BenchmarkTest"
    threads: int = 16
    size: int = 128
    batch: int = 1
    duration: float = 0.0  # 0: until Ctrl-C
    sync: bool = True
    window: int = 64
    tags: str | None = None
    keys: bool = False
    group: str | None = None
    from_first: bool = False
    plot: str | None = None
    interval: float = 1.0
    batch_max_size: int = 1  # consumeMessageBatchMaxSize
    pull_batch_size: int = 32
    messages: int = 0  # consumer: stop once this many are consumed (0: no bound)
    broker_pid: int = 0  # a local broker's pid: its CPU per message is reported
    rate: int = 0  # > 0: one sender at this many messages a second, timed to the listener (bench_rate)


@dataclass(frozen=True, slots=True)
class Sample:
    """One reporting interval of one side (send or consume)."""

    t: float  # seconds since the start
    count: int
    tps: float
    avg_ms: float
    max_ms: float
    p50_ms: float
    p99_ms: float
    failed: int = 0
    response_failed: int = 0
    avg2_ms: float = 0.0  # consumer: store-to-consume
    max2_ms: float = 0.0


class LatencyRecorder:
    """Latencies of one side: this interval's raw samples, and the whole run as a histogram."""

    __slots__ = ("count", "failed", "last_at", "response_failed", "rts", "rts2", "total_count", "total_seen",
                 "total_sum", "totals")

    def __init__(self) -> None:
        self.rts: list[float] = []
        self.rts2: list[float] = []
        self.count = 0
        self.failed = 0
        self.response_failed = 0
        self.totals = np.zeros(len(_EDGES_MS) + 1, dtype=np.int64)
        self.total_count = 0
        self.total_sum = 0.0
        # The loop clock of the latest delivery: a drained backlog's rate runs to it, not to the end
        # of the run (whose idle seconds after the drain would dilute it).
        self.last_at = 0.0
        self.total_seen = 0

    def take(self, t: float, span: float) -> Sample:
        rts, self.rts = self.rts, []
        rts2, self.rts2 = self.rts2, []
        count, self.count = self.count, 0
        failed, self.failed = self.failed, 0
        rfailed, self.response_failed = self.response_failed, 0
        tps = count / span if span > 0 else 0.0
        if not rts:
            return Sample(t, count, tps, 0.0, 0.0, 0.0, 0.0, failed, rfailed)
        arr = np.asarray(rts, dtype=np.float64)
        self.totals += np.bincount(np.searchsorted(_EDGES_MS, arr), minlength=len(self.totals))
        self.total_count += len(arr)
        self.total_sum += float(arr.sum())
        p50, p99 = np.percentile(arr, (50, 99))
        avg2 = max2 = 0.0
        if rts2:
            arr2 = np.asarray(rts2, dtype=np.float64)
            avg2, max2 = float(arr2.mean()), float(arr2.max())
        return Sample(t, count, tps, float(arr.mean()), float(arr.max()), float(p50), float(p99),
                      failed, rfailed, avg2, max2)

    def percentile(self, q: float) -> float:
        """The whole run's q-th percentile (bin upper edge: within about 2 %)."""
        if self.total_count == 0:
            return 0.0
        rank = q / 100.0 * self.total_count
        i = int(np.searchsorted(np.cumsum(self.totals), rank, side="left"))
        return float(_EDGES_MS[min(i, len(_EDGES_MS) - 1)])


# ---------------------------------------------------------------------------------------------
# Arguments.


def add_commands(commands: Any) -> None:
    """Add ``bench`` (producer / consumer / e2e) to the ``rocketq`` sub-command parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namesrv-addr", metavar="ADDR", default=os.environ.get("NAMESRV_ADDR"),
                        help="name server list 'host:port;host:port' (default: $NAMESRV_ADDR)")
    common.add_argument("-t", "--topic", default="BenchmarkTest", help="topic (default: BenchmarkTest)")
    common.add_argument("-d", "--duration", type=seconds, default=0.0, metavar="SECONDS",
                        help="stop after this many seconds (default: run until Ctrl-C)")
    common.add_argument("--plot", metavar="PNG",
                        help="draw TPS and latency over time into PNG (needs matplotlib)")
    common.add_argument("--log-level", default="WARNING", type=str.upper,
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="client log level (default: WARNING)")
    common.add_argument("--broker-pid", type=positive, default=0, metavar="PID",
                        help="a broker on this host: report its CPU per message too (Linux)")
    send = argparse.ArgumentParser(add_help=False)
    send.add_argument("--threads", "--concurrency", "-w", dest="threads", type=positive, default=16,
                      metavar="N", help="concurrent senders (default: 16)")
    send.add_argument("-s", "--size", type=positive, default=128, metavar="BYTES",
                      help="message body size (default: 128)")
    send.add_argument("--batch", type=positive, default=1, metavar="N",
                      help="messages per send request (SEND_BATCH_MESSAGE when > 1; default: 1)")
    mode = send.add_mutually_exclusive_group()
    mode.add_argument("--sync", dest="sync", action="store_true", default=True,
                      help="each sender waits for its send (default)")
    mode.add_argument("--async", dest="sync", action="store_false",
                      help="each sender keeps --window sends in flight")
    send.add_argument("--window", type=positive, default=64, metavar="N",
                      help="sends in flight per sender with --async (default: 64)")
    send.add_argument("--tags", help="tag of every message")
    send.add_argument("--rate", type=positive, default=0, metavar="N",
                      help="one sender at N msgs/s, evenly spaced; with e2e the consumer times each "
                           "message from its send call to its listener, in microseconds")
    send.add_argument("--keys", action="store_true", help="give every message a unique key (indexed)")
    consume = argparse.ArgumentParser(add_help=False)
    consume.add_argument("-g", "--group", help="consumer group (default: benchmark_consumer_<pid>)")
    consume.add_argument("--from-first", action="store_true",
                         help="a new group starts at the first offset (default: the last)")
    consume.add_argument("--batch-max-size", type=positive, default=1, metavar="N",
                         help="consumeMessageBatchMaxSize: messages per listener call (default: 1)")
    consume.add_argument("--pull-batch-size", type=positive, default=32, metavar="N",
                         help="pullBatchSize: messages per pull request (default: 32)")
    consume.add_argument("-m", "--messages", type=positive, default=0, metavar="N",
                         help="stop once N messages are consumed (e.g. a backlog with --from-first)")

    bench = commands.add_parser("bench", help="benchmark a cluster (RocketMQ's benchmark tools)",
                                description="Benchmark a cluster: producer, consumer or end-to-end.")
    roles = bench.add_subparsers(dest="bench_mode", metavar="MODE", required=True)
    for name, parents, text in (
        ("producer", [common, send], "send as fast as the options allow and report TPS and RT"),
        ("consumer", [common, consume], "consume a topic and report TPS and born/store-to-consume RT"),
        ("e2e", [common, send, consume], "produce and consume at once: end-to-end latency"),
    ):
        sub = roles.add_parser(name, parents=parents, help=text, description=text[0].upper() + text[1:] + ".")
        sub.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if not args.namesrv_addr:
        raise CliError("no name server: pass -n HOST:PORT or set NAMESRV_ADDR", exit_code=2)
    # A mode parses only its own options (consumer has no --size): the rest keep BenchOptions' defaults.
    given = vars(args)
    options = {f.name: given[f.name] for f in fields(BenchOptions) if f.name in given}
    opts = BenchOptions(mode=args.bench_mode, namesrv=args.namesrv_addr, **options)
    if opts.plot:
        _require_matplotlib()
    from rocketq.remoting.loop import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(run_bench(opts, sys.stdout))


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CliError("--plot needs matplotlib: pip install 'rocketq[plot]'", exit_code=2) from None


# ---------------------------------------------------------------------------------------------
# Running.


class _Run:
    """What the senders, the consumer listener and the reporter share."""

    def __init__(self, opts: BenchOptions, out: TextIO) -> None:
        self.opts = opts
        self.out = out
        self.console = Console(file=out, highlight=False, soft_wrap=True)
        self.stop = asyncio.Event()
        self.send = LatencyRecorder()
        self.consume = LatencyRecorder()
        self.send_samples: list[Sample] = []
        self.consume_samples: list[Sample] = []
        self.started = 0.0
        self.elapsed = 0.0
        self.cpu = CpuMeter(opts.broker_pid)


async def run_bench(opts: BenchOptions, out: TextIO) -> int:
    """Run one benchmark to its end (duration or signal) and print its lines; the exit code."""
    from rocketq.client.consumer.push import PushConsumer
    from rocketq.client.producer.producer import Producer

    await _check_namesrv(opts.namesrv)
    run = _Run(opts, out)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, run.stop.set)
    producer = consumer = None
    try:
        if opts.mode in ("producer", "e2e"):
            producer = Producer(f"benchmark_producer_{os.getpid()}", namesrv_addr=opts.namesrv)
            await producer.start()
            await _warm_up(producer, opts)
        if opts.mode in ("consumer", "e2e"):
            consumer = await _start_consumer(PushConsumer, opts, run)
            if opts.rate and producer is not None:
                # A queue given by the rebalance is pulled after a settle delay (0.3 s): a latency
                # run starts once a long poll is parked on each, as the steady state it measures.
                await asyncio.sleep(1.0)
        run.started = loop.time()
        run.cpu.start()
        reporter = loop.create_task(_report(run))
        senders = []
        if producer is not None and opts.rate:
            senders = [loop.create_task(rate_sender(producer, opts.topic, opts.size, opts.tags, opts.rate,
                                                    run.send, run.stop))]
        elif producer is not None:
            senders = [loop.create_task(_sender(run, producer, i)) for i in range(opts.threads)]
        if opts.duration > 0:
            loop.call_later(opts.duration, run.stop.set)
        await _progress(run)
        # sends still in flight at the stop belong to the run: wait for them, then the last sample
        await asyncio.gather(*senders, return_exceptions=True)
        last = await reporter
        if consumer is not None:
            await asyncio.sleep(0.2)  # what those last sends carried may still be on its way
        now = loop.time()
        run.elapsed = now - run.started
        run.cpu.stop()
        _emit(run, run.elapsed, now - last)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.shutdown()
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.shutdown()
    _summary(run)
    if opts.plot:
        plot(run.send_samples, run.consume_samples, opts.plot)
        run.console.print(f"plot written to {opts.plot}")
    return 0


async def _check_namesrv(addrs: str) -> None:
    """Fail with one line naming the addresses when no name server answers a TCP connect."""
    reasons = []
    for addr in (a.strip() for a in addrs.split(";") if a.strip()):
        host, _, port = addr.rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), 3.0)
        except ValueError:
            raise CliError(f"bad name server address '{addr}' (want HOST:PORT)", exit_code=2) from None
        except (OSError, TimeoutError) as exc:
            reasons.append(f"{addr}: {getattr(exc, 'strerror', None) or type(exc).__name__}")
            continue
        writer.close()
        return
    raise CliError(f"no name server reachable ({'; '.join(reasons) or addrs})")


def _message(opts: BenchOptions, i: int = 0) -> Any:
    from rocketq.client.message import Message

    body = (b"rocketq-benchmark-" * (opts.size // 18 + 1))[: opts.size]
    return Message(opts.topic, body, tags=opts.tags, keys=f"bench_{os.getpid()}_{i}" if opts.keys else None)


async def _warm_up(producer: Any, opts: BenchOptions) -> None:
    """One timed-out send first: routes, connections and topic auto-creation stay out of the figures,
    and a cluster that is not there ends the run with one clear line."""
    try:
        await asyncio.wait_for(producer.send(_message(opts)), WARMUP_TIMEOUT)
    except Exception as exc:
        reason = str(exc) or type(exc).__name__
        raise CliError(f"cannot send to topic {opts.topic} via {opts.namesrv}: {reason}") from None


async def _start_consumer(cls: Any, opts: BenchOptions, run: _Run) -> Any:
    group = opts.group or f"benchmark_consumer_{os.getpid()}"
    where = "CONSUME_FROM_FIRST_OFFSET" if opts.from_first else "CONSUME_FROM_LAST_OFFSET"
    consumer = cls(group, namesrv_addr=opts.namesrv, consume_from_where=where,
                   consume_message_batch_max_size=opts.batch_max_size, pull_batch_size=opts.pull_batch_size)
    consumer.subscribe(opts.topic, "*" if not opts.tags else opts.tags)
    rec = run.consume
    clock = asyncio.get_running_loop().time
    bound = opts.messages
    ok = _consume_success()

    async def listener(msgs: Sequence[Any], ctx: Any) -> Any:
        now_ns = time.time_ns()
        now = now_ns / 1e6
        b2c, s2c = rec.rts, rec.rts2  # take() swaps the lists every second: read them per call
        for m in msgs:
            # A --rate sender's message carries its send time in ns: time it from there.
            age = stamp_age_ms(m.body, now_ns)
            b2c.append(now - m.born_timestamp if age is None else age)
            s2c.append(now - m.store_timestamp)
        rec.count += len(msgs)
        rec.total_seen += len(msgs)
        rec.last_at = clock()
        if bound and rec.total_seen >= bound:
            run.stop.set()
        return ok

    consumer.register_listener(listener)
    try:
        await consumer.start()
        queues = await asyncio.wait_for(consumer.fetch_subscribe_message_queues(opts.topic), WARMUP_TIMEOUT)
    except Exception as exc:
        with contextlib.suppress(Exception):
            await consumer.shutdown()
        reason = str(exc) or type(exc).__name__
        raise CliError(f"cannot consume topic {opts.topic} via {opts.namesrv}: {reason}") from None
    if not queues:
        await consumer.shutdown()
        raise CliError(f"topic {opts.topic} has no readable queues")
    # let the first rebalance hand out the queues before the clock starts
    deadline = time.monotonic() + WARMUP_TIMEOUT
    while not consumer.process_queue_table and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return consumer


def _consume_success() -> Any:
    from rocketq.client.consumer import ConsumeStatus

    return ConsumeStatus.CONSUME_SUCCESS


async def _sender(run: _Run, producer: Any, worker: int) -> None:
    from rocketq.client.message import SendStatus

    send_ok = SendStatus.SEND_OK  # compared by identity: Enum.name is a property call per message
    opts = run.opts
    rec = run.send
    stop = run.stop
    clock = time.perf_counter
    msgs = [_message(opts, worker * 1_000_000_000 + i) for i in range(opts.batch)]
    n = opts.batch
    seq = 0

    def next_keys() -> None:
        nonlocal msgs, seq
        if opts.keys:
            seq += 1
            msgs = [_message(opts, (worker * 1_000_000 + seq) * n + i) for i in range(n)]

    if opts.sync:
        while not stop.is_set():
            next_keys()
            t0 = clock()
            try:
                result = await (producer.send_batch(msgs) if n > 1 else producer.send(msgs[0]))
            except Exception:
                rec.failed += n
                await asyncio.sleep(0.01)  # a down broker must not turn this into a busy loop
                continue
            rec.rts.append((clock() - t0) * 1000.0)
            rec.count += n
            if result.status is not send_ok:
                rec.response_failed += n
        return
    # Async: each answer starts the next send from its callback, so a message costs no task
    # switch of this loop (a semaphore's waiter woken per answer cost more than the send itself).
    loop = asyncio.get_running_loop()
    inflight = 0
    drained = loop.create_future()

    def start() -> None:
        nonlocal inflight
        if stop.is_set():
            if not inflight and not drained.done():
                drained.set_result(None)
            return
        next_keys()
        inflight += 1
        t0 = clock()
        try:
            fut = producer.send_batch_async(msgs) if n > 1 else producer.send_async(msgs[0])
        except Exception:
            rec.failed += n
            loop.call_later(0.01, retry)  # a down broker must not turn this into a busy loop
            return
        fut.add_done_callback(partial(done, t0))

    def retry() -> None:
        nonlocal inflight
        inflight -= 1
        start()

    def done(t0: float, fut: asyncio.Future[Any]) -> None:
        nonlocal inflight
        inflight -= 1
        if fut.cancelled() or fut.exception() is not None:
            rec.failed += n
        else:
            rec.rts.append((clock() - t0) * 1000.0)
            rec.count += n
            if fut.result().status is not send_ok:
                rec.response_failed += n
        start()

    for _ in range(opts.window):
        start()
    await stop.wait()
    if inflight:  # what is still in flight belongs to the run
        await drained


async def _report(run: _Run) -> float:
    """A line per interval until the stop; returns when the last full interval ended."""
    loop = asyncio.get_running_loop()
    opts = run.opts
    last = run.started
    tick = 1
    while True:
        wake = run.started + tick * opts.interval
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, wake - loop.time())):
                await run.stop.wait()
        if run.stop.is_set():
            return last
        now = loop.time()
        _emit(run, now - run.started, now - last)
        last = now
        tick += 1


def _emit(run: _Run, t: float, span: float) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    if run.opts.mode in ("producer", "e2e"):
        s = run.send.take(t, span)
        run.send_samples.append(s)
        run.console.print(
            f"Current Time: {stamp} | Send TPS: {s.tps:.0f} | Max RT(ms): {s.max_ms:.3f} | "
            f"Average RT(ms): {s.avg_ms:.3f} | Send Failed: {s.failed} | "
            f"Response Failed: {s.response_failed} | p50(ms): {s.p50_ms:.3f} | p99(ms): {s.p99_ms:.3f}")
    if run.opts.mode in ("consumer", "e2e"):
        c = run.consume.take(t, span)
        run.consume_samples.append(c)
        run.console.print(
            f"Current Time: {stamp} | Consume TPS: {c.tps:.0f} | AVG(B2C) RT(ms): {c.avg_ms:.3f} | "
            f"AVG(S2C) RT(ms): {c.avg2_ms:.3f} | MAX(B2C) RT(ms): {c.max_ms:.3f} | "
            f"MAX(S2C) RT(ms): {c.max2_ms:.3f} | Consume Fail: 0 | p50(B2C ms): {c.p50_ms:.3f} | "
            f"p99(B2C ms): {c.p99_ms:.3f}")


async def _progress(run: _Run) -> None:
    """Wait for the end; on a terminal, with a progress bar below the per-second lines."""
    if not run.console.is_terminal:
        await run.stop.wait()
        return
    loop = asyncio.get_running_loop()
    total = run.opts.duration or None
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[rate]}"))
    with Progress(*columns, console=run.console, transient=True) as bar:
        task = bar.add_task(f"bench {run.opts.mode} {run.opts.topic}", total=total, rate="")
        while not run.stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    await run.stop.wait()
            samples = run.send_samples or run.consume_samples
            rate = f"{samples[-1].tps:,.0f} msg/s" if samples else ""
            bar.update(task, completed=loop.time() - run.started, rate=rate)


def _summary(run: _Run) -> None:
    out = run.console.print
    per_msg = 0
    for title, rec, samples in (("Send", run.send, run.send_samples), ("Consume", run.consume,
                                                                       run.consume_samples)):
        if not samples:
            continue
        total = sum(s.count for s in samples)
        failed = sum(s.failed for s in samples)
        avg = rec.total_sum / rec.total_count if rec.total_count else 0.0
        worst = max(s.max_ms for s in samples)
        pct = " | ".join(f"p{q:g}(ms): {rec.percentile(q):.3f}" for q in (50, 90, 99, 99.9))
        span = run.elapsed
        if title == "Consume" and rec.last_at > run.started:
            span = min(span, rec.last_at - run.started)
        # CPU is charged to the messages of the first side: e2e's per message is send + consume.
        per_msg = per_msg or total
        out(f"[{title} summary] total: {total} | failed: {failed} | TPS: {total / max(1e-9, span):.0f} | "
            f"Average RT(ms): {avg:.3f} | {pct} | Max RT(ms): {worst:.3f}")
    if per_msg:
        out(f"[CPU summary] {run.cpu.describe(per_msg)}")


class CpuMeter:
    """CPU seconds of this process and, given its pid, of a broker on this host, over the run."""

    def __init__(self, broker_pid: int = 0) -> None:
        self.broker_pid = broker_pid
        self._at = (0.0, 0.0)
        self.client = 0.0
        self.broker = float("nan")
        self.wall = 0.0

    def _now(self) -> tuple[float, float]:
        return time.process_time(), process_cpu_seconds(self.broker_pid) if self.broker_pid else float("nan")

    def start(self) -> None:
        self._at = self._now()
        self.wall = time.perf_counter()

    def stop(self) -> None:
        client, broker = self._now()
        self.client = client - self._at[0]
        self.broker = broker - self._at[1]
        self.wall = time.perf_counter() - self.wall

    def describe(self, messages: int) -> str:
        """One line: CPU per message of each side and how busy it was, and the load average."""
        us = 1e6 / max(1, messages)
        wall = max(1e-9, self.wall)
        parts = [f"client {self.client * us:.2f} us/msg ({self.client / wall:.0%} of a core)"]
        if self.broker == self.broker:  # not NaN: a broker pid was given and readable
            parts.append(f"broker {self.broker * us:.2f} us/msg ({self.broker / wall:.0%} of a core)")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        return f"messages: {messages} | CPU {' | '.join(parts)} | load average: {load}"


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process on this host (Linux /proc; NaN when unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def plot(send: Sequence[Sample], consume: Sequence[Sample], path: str) -> None:
    """TPS (top) and latency (bottom) per second, for the sides that ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_tps, ax_rt) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    picks: tuple[tuple[str, Callable[[Sample], float]], ...] = (
        ("avg", lambda s: s.avg_ms), ("p99", lambda s: s.p99_ms))
    for name, samples in (("send", send), ("consume", consume)):
        if samples:
            ts = [s.t for s in samples]
            ax_tps.plot(ts, [s.tps for s in samples], label=f"{name} TPS")
            for stat, pick in picks:
                ax_rt.plot(ts, [pick(s) for s in samples], label=f"{name} {stat} RT")
    ax_tps.set_ylabel("messages / s")
    ax_tps.legend(loc="upper right")
    ax_tps.grid(True, alpha=0.3)
    ax_rt.set_ylabel("latency (ms)")
    ax_rt.set_xlabel("seconds")
    ax_rt.legend(loc="upper right")
    ax_rt.grid(True, alpha=0.3)
    fig.suptitle("rocketq bench")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

