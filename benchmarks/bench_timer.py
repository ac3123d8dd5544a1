"""Timer messages: how late they fire, and what a million pending ones cost the broker.

    .venv/bin/python benchmarks/bench_timer.py [--count 100000] [--spread 60] [--precision 100]
                                               [--pending 1000000]

1. ``--count`` timers due evenly over ``--spread`` seconds (sent beforehand over a few pipelined
   connections), precision ``--precision`` ms: each one's lateness is the store timestamp of its
   delivered copy on the real topic minus its TIMER_DELIVER_MS (both clocks are this machine's).
   The target is p99 <= precision + 50 ms.
2. ``--pending`` timers due in an hour, all filed into the wheel: the broker process's resident
   memory (VmRSS, and its anonymous / file-backed parts) before and after. The target is <= 200 MB.
   The commit log is written through a memory mapping, so its recently written pages count as
   RssFile until the kernel reclaims them; RssAnon is the broker's own memory.

Prints figures and the commit; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import numpy as np

from benchmarks._cluster import BrokerProcess, git_commit
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import UniqIdGenerator, decode_messages, encode_properties
from rocketq.codec.timer import CheckpointValues
from rocketq.remoting import RemotingClient

TOPIC = "BenchTimer"
CONNECTIONS = 4
WINDOW = 512  # sends in flight per connection
_ids = UniqIdGenerator()


def _now() -> int:
    return int(time.time() * 1000)


def _send_request(topic: str, queue_id: int, body: bytes, props: dict[str, str]) -> RemotingCommand:
    ext = {"a": "BenchTimerP", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(_now()), "h": "0", "i": encode_properties(props), "j": "0", "k": "false", "m": "false"}
    return RemotingCommand.request(int(RequestCode.SEND_MESSAGE_V2), ext, body)


async def _send_all(addr: str, due: np.ndarray, queues: int = 4, timer: bool = True) -> float:
    """Send one timer per entry of ``due`` (ms; a plain message each without ``timer``); returns
    the seconds it took."""
    t0 = time.monotonic()
    async with RemotingClient() as client:
        async def lane(k: int) -> None:
            pending: set[asyncio.Task[RemotingCommand]] = set()
            for i in range(k, len(due), CONNECTIONS):
                props = {"UNIQ_KEY": _ids.next_id(), "WAIT": "false"}
                if timer:
                    props["TIMER_DELIVER_MS"] = str(int(due[i]))
                req = _send_request(TOPIC, i % queues, b"t", props)
                pending.add(asyncio.ensure_future(client.invoke(addr, req, 60)))
                if len(pending) >= WINDOW:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for d in done:
                        assert d.result().code == ResponseCode.SUCCESS, d.result().remark
            for d in await asyncio.gather(*pending):
                assert d.code == ResponseCode.SUCCESS, d.remark
        await asyncio.gather(*(lane(k) for k in range(CONNECTIONS)))
    return time.monotonic() - t0


async def _lateness(addr: str, expect: int, deadline_s: float, queues: int = 4) -> np.ndarray:
    """Pull the real topic until ``expect`` messages arrived: their lateness in ms."""
    late: list[int] = []
    offsets = [0] * queues
    end = time.monotonic() + deadline_s
    async with RemotingClient() as client:
        while len(late) < expect and time.monotonic() < end:
            got = 0
            for q in range(queues):
                ext = {"consumerGroup": "BenchTimerG", "topic": TOPIC, "queueId": str(q),
                       "queueOffset": str(offsets[q]), "maxMsgNums": "32", "sysFlag": "4",  # subscription
                       "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                       "subVersion": "0"}
                r = await client.invoke(addr, RemotingCommand.request(int(RequestCode.PULL_MESSAGE), ext), 30)
                if r.code != ResponseCode.SUCCESS:
                    continue
                msgs = decode_messages(r.body_bytes())
                offsets[q] += len(msgs)
                got += len(msgs)
                late += [m.store_timestamp - int(m.properties["TIMER_DELIVER_MS"]) for m in msgs]
            if not got:
                await asyncio.sleep(0.2)
    return np.array(late, dtype=np.int64)


def _rss(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0]) / 1024
    return out


async def _checkpoint(addr: str) -> CheckpointValues:
    async with RemotingClient() as client:
        r = await client.invoke(addr, RemotingCommand.request(int(RequestCode.GET_TIMER_CHECK_POINT)), 10)
        return CheckpointValues.decode(r.body_bytes())


def lateness(count: int, spread_s: float, precision: int) -> dict[str, float]:
    with BrokerProcess(f"timerPrecisionMs={precision}", "mappedFileSizeCommitLog=268435456",
                       name="bench-timer") as broker:
        lead_ms = 5000 + count // 10  # every send is in before the first one is due
        start = _now() + lead_ms
        due = start + np.arange(count, dtype=np.int64) * int(spread_s * 1000) // max(1, count)
        sent_s = asyncio.run(_send_all(broker.broker, due))
        late = asyncio.run(_lateness(broker.broker, count, lead_ms / 1000 + spread_s + 120))
    p50, p99, worst = (float(np.percentile(late, q)) for q in (50, 99, 100)) if late.size else (0.0,) * 3
    early = int((late < 0).sum())
    print(f"{count} timers over {spread_s:.0f} s at precision {precision} ms (sent in {sent_s:.1f} s): "
          f"{late.size} fired; lateness p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms, "
          f"{early} early (target p99 <= {precision + 50} ms)")
    return {f"timer lateness p50 ms ({precision} ms precision)": p50,
            f"timer lateness p99 ms ({precision} ms precision)": p99,
            "timers fired": float(late.size), "timers fired early": float(early)}


def pending_rss(pending: int, timer: bool = True) -> dict[str, float]:
    """Broker memory once ``pending`` timers are filed; with ``timer=False`` the same number of
    plain messages (the store's own share of the figure)."""
    what = "pending timers" if timer else "plain messages"
    with BrokerProcess("mappedFileSizeCommitLog=268435456", name="bench-timer-rss") as broker:
        time.sleep(2)
        before = _rss(broker.pid)
        due = np.full(pending, _now() + 3_600_000, dtype=np.int64)
        sent_s = asyncio.run(_send_all(broker.broker, due, timer=timer))
        deadline = time.monotonic() + 600
        while timer and asyncio.run(_checkpoint(broker.broker)).last_timer_queue_offset < pending:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        time.sleep(2)
        after = _rss(broker.pid)
        filed = asyncio.run(_checkpoint(broker.broker)).last_timer_queue_offset
    print(f"{pending} {what} (sent in {sent_s:.1f} s, {filed} filed): broker VmRSS "
          f"{before['VmRSS']:.0f} -> {after['VmRSS']:.0f} MB (anon {before.get('RssAnon', 0):.0f} -> "
          f"{after.get('RssAnon', 0):.0f}, file-backed {after.get('RssFile', 0):.0f})"
          + ("; target <= 200 MB" if timer else ""))
    return {f"broker VmRSS MB with {what}": after["VmRSS"],
            f"broker RssAnon MB with {what}": after.get("RssAnon", 0.0),
            f"broker RssFile MB with {what}": after.get("RssFile", 0.0)}


def run(count: int | None = None, spread: float | None = None, precision: int | None = None,
        pending: int | None = None) -> dict[str, float]:
    env = os.environ
    count = count or int(env.get("BENCH_TIMER_COUNT", 100_000))
    spread = spread or float(env.get("BENCH_TIMER_SPREAD", 60))
    precision = precision or int(env.get("BENCH_TIMER_PRECISION", 100))
    pending = pending or int(env.get("BENCH_TIMER_PENDING", 1_000_000))
    print(f"commit={git_commit()} count={count} spread={spread:.0f}s precision={precision}ms "
          f"pending={pending}")
    figures = lateness(count, spread, precision)
    figures.update(pending_rss(pending))
    figures.update(pending_rss(pending, timer=False))
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--spread", type=float, default=60.0)
    parser.add_argument("--precision", type=int, default=100)
    parser.add_argument("--pending", type=int, default=1_000_000)
    args = parser.parse_args()
    run(args.count, args.spread, args.precision, args.pending)
