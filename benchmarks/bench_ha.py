"""Replication benchmarks (docs/ha.md): a master and a slave, each its own core's worth of Python.

    .venv/bin/python -m benchmarks ha
    .venv/bin/python benchmarks/bench_ha.py [--duration S] [--backlog-mb N] [--rounds N]

Three measurements, each against `rocketq up --replicas 1` (master and slave in one process, as a
newcomer starts them) or two processes where stated:

* send rate at 64 in flight (SEND_MESSAGE_V2, 128 B, one connection, ASYNC_FLUSH), the master an
  ASYNC_MASTER and then a SYNC_MASTER (each ack waits for the slave's report): the ratio is the
  price of synchronous replication;
* slave lag at full produce rate: batches of 100 x 128 B, 8 in flight, into an ASYNC_MASTER whose
  slave runs in its own process, while GET_BROKER_HA_STATUS is sampled every 100 ms; the lag in
  bytes and in time at the measured rate;
* catch-up: a master (its own process) holds a backlog of --backlog-mb MiB (default 512), then an
  empty slave (its own process) starts; the time from its start to having everything, in MB/s,
  and from its connection on (the copy alone), with the slave's CPU seconds (MB per CPU second
  hardly depends on how busy the shared machine is).

Each measurement runs --rounds times (default 3; the catch-up against one backlog, a new empty
slave each time) and shows the best and the median with the load average. The client is
bench_send's pre-encoded, pipelining sender, so the figures are the brokers'. Prints figures and
returns them from `run()`; never asserts times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):  # run as a script: make `benchmarks._cluster` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._cluster import BrokerProcess, rocketq_command
from benchmarks.bench_send import PHASES, _create_topic, _drive, batch_pool, single_pool
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

DURATION = 5.0
BACKLOG_MB = 512
ROUNDS = 3
GROUP = "bench-ha"
SEGMENT = ("mappedFileSizeCommitLog=268435456",)  # 256 MiB: the backlog spans segments


async def ha_status(client: RemotingClient, addr: str) -> dict[str, Any]:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS, {}), 5)
    info: dict[str, Any] = orjson.loads(r.body_bytes())
    return info


async def _send_rate(role: str, duration: float) -> dict[str, float]:
    with BrokerProcess(f"brokerRole={role}", f"brokerName={GROUP}", *SEGMENT, name=f"bench-ha-{role}",
                       args=("--replicas", "1")) as broker:
        await _create_topic(broker.broker)
        async with RemotingClient() as client:  # wait until the slave is connected
            for _ in range(200):
                if (await ha_status(client, broker.broker))["haConnectionInfo"]:
                    break
                await asyncio.sleep(0.05)
        figures, _, _ = await _drive(PHASES["single"], broker, single_pool(), duration, None)
    print(f"  {role:<13} {figures['msgs_per_s']:>10,.0f} msgs/s  ack p50 {figures['ack_p50_ms']:.2f} ms  "
          f"p99 {figures['ack_p99_ms']:.2f} ms  broker cpu {figures['broker_cpu_pct']:.0f}%  "
          f"errors {figures['errors']:.0f}")
    return figures


def start_slave(master: BrokerProcess, name: str = "slave") -> subprocess.Popen[bytes]:
    """A slave of `master`'s group in its own process (as on its own machine), empty."""
    return subprocess.Popen(
        [*rocketq_command(), "broker", "--data-dir", str(master.data_dir / name), "--broker-port", "0",
         "-n", master.namesrv, "--log-level", "WARNING", "--set", f"brokerName={GROUP}",
         "--set", "brokerId=1", "--set", "brokerRole=SLAVE", *(a for s in SEGMENT for a in ("--set", s))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_slave(slave: subprocess.Popen[bytes]) -> None:
    slave.terminate()
    try:
        slave.wait(60)
    except subprocess.TimeoutExpired:
        slave.kill()
        slave.wait()


async def _lag(duration: float) -> dict[str, float]:
    with BrokerProcess(f"brokerName={GROUP}", *SEGMENT, name="bench-ha-lag") as broker:
        slave = start_slave(broker)
        try:
            await _create_topic(broker.broker)
            samples: list[int] = []
            offsets: list[tuple[float, int]] = []  # (time, master max offset): the rate in bytes
            stop = asyncio.Event()
            async with RemotingClient() as client:
                while not (await ha_status(client, broker.broker))["haConnectionInfo"]:
                    await asyncio.sleep(0.05)

                async def sample() -> None:
                    while not stop.is_set():
                        info = await ha_status(client, broker.broker)
                        if info["haConnectionInfo"]:
                            samples.append(int(info["haConnectionInfo"][0]["diff"]))
                            offsets.append((time.monotonic(), int(info["masterCommitLogMaxOffset"])))
                        await asyncio.sleep(0.1)

                sampler = asyncio.ensure_future(sample())
                try:
                    figures, _, _ = await _drive(PHASES["batch"], broker, batch_pool(), duration, None)
                finally:
                    stop.set()
                    await sampler
        finally:
            stop_slave(slave)
    (t0, o0), (t1, o1) = offsets[len(offsets) // 5], offsets[-1]  # past the warm-up
    bytes_per_s = (o1 - o0) / (t1 - t0) if t1 > t0 else 0.0
    worst = max(samples, default=0)
    mean = sum(samples) / len(samples) if samples else 0.0
    out = {"msgs_per_s": figures["msgs_per_s"], "lag_max_bytes": worst, "lag_mean_bytes": mean,
           "lag_max_ms": 1000 * worst / bytes_per_s if bytes_per_s else 0.0,
           "lag_mean_ms": 1000 * mean / bytes_per_s if bytes_per_s else 0.0}
    print(f"  batch 100 x 128 B into an ASYNC_MASTER, the slave in its own process: "
          f"{out['msgs_per_s']:,.0f} msgs/s ({bytes_per_s / 1e6:.0f} MB/s of commit log); slave lag max "
          f"{worst / 1e6:.2f} MB (~{out['lag_max_ms']:.0f} ms), mean {mean / 1e6:.2f} MB "
          f"(~{out['lag_mean_ms']:.0f} ms) over {len(samples)} samples")
    return out


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _catch_up(backlog_mb: int, rounds: int) -> list[dict[str, float]]:
    target = backlog_mb << 20
    out = []
    with BrokerProcess(f"brokerName={GROUP}", *SEGMENT, name="bench-ha-backlog") as master:
        await _create_topic(master.broker)
        async with RemotingClient() as client:
            while (await ha_status(client, master.broker))["masterCommitLogMaxOffset"] < target:
                await _drive(PHASES["batch"], master, batch_pool(), 3.0, None)
            total = (await ha_status(client, master.broker))["masterCommitLogMaxOffset"]
            for i in range(rounds):
                t0 = time.monotonic()
                slave = start_slave(master, f"slave{i}")
                try:
                    acked, connected = 0, 0.0
                    while acked < total:
                        conns = (await ha_status(client, master.broker))["haConnectionInfo"]
                        if conns and not connected:
                            connected = time.monotonic()
                        acked = int(conns[0]["slaveAckOffset"]) if conns else 0
                        await asyncio.sleep(0.02)
                    done = time.monotonic()
                    cpu = _cpu_seconds(slave.pid)
                finally:
                    stop_slave(slave)
                f = {"backlog_mib": total / 2**20, "seconds": done - t0,
                     "mb_per_s": total / 1e6 / (done - t0),
                     "copy_mb_per_s": total / 1e6 / (done - connected), "slave_cpu_s": cpu,
                     "mb_per_cpu_s": total / 1e6 / cpu, "load_avg_1min": os.getloadavg()[0]}
                print(f"  empty slave beside a {total / 2**20:,.0f} MiB backlog: caught up in "
                      f"{f['seconds']:.1f} s (process start included) = {f['mb_per_s']:,.0f} MB/s; from its "
                      f"connection {f['copy_mb_per_s']:,.0f} MB/s; slave CPU {cpu:.1f} s = "
                      f"{f['mb_per_cpu_s']:,.0f} MB per CPU second; load {f['load_avg_1min']:.1f}")
                out.append(f)
    return out


def _best_median(rounds: list[dict[str, float]], key: str, lowest: bool = False) -> tuple[float, float]:
    values = [r[key] for r in rounds]
    return (min(values) if lowest else max(values)), statistics.median(values)


def run(duration: float = DURATION, backlog_mb: int = BACKLOG_MB, rounds: int = ROUNDS) -> dict[str, float]:
    async def main() -> dict[str, float]:
        print("send rate, SEND_MESSAGE_V2 128 B, 64 in flight, 1 connection, ASYNC_FLUSH, one slave:")
        a = [await _send_rate("ASYNC_MASTER", duration) for _ in range(rounds)]
        s = [await _send_rate("SYNC_MASTER", duration) for _ in range(rounds)]
        a_best, a_med = _best_median(a, "msgs_per_s")
        s_best, s_med = _best_median(s, "msgs_per_s")
        ratio = s_med / a_med if a_med else 0.0
        print(f"  ASYNC_MASTER best {a_best:,.0f} median {a_med:,.0f} msgs/s "
              f"({statistics.median(r['broker_cpu_us_per_msg'] for r in a):.1f} broker CPU us/msg); "
              f"SYNC_MASTER best {s_best:,.0f} median {s_med:,.0f} msgs/s "
              f"({statistics.median(r['broker_cpu_us_per_msg'] for r in s):.1f} us/msg); "
              f"SYNC / ASYNC (medians) = {ratio:.0%}; load {os.getloadavg()[0]:.1f}")
        print("slave lag at full produce rate:")
        lag = [await _lag(duration) for _ in range(rounds)]
        lag_rate_best, lag_rate_med = _best_median(lag, "msgs_per_s")
        print(f"  produce best {lag_rate_best:,.0f} median {lag_rate_med:,.0f} msgs/s; lag max "
              f"(best/median) {_best_median(lag, 'lag_max_ms', lowest=True)[0]:.0f}/"
              f"{_best_median(lag, 'lag_max_ms')[1]:.0f} ms, mean "
              f"{_best_median(lag, 'lag_mean_ms')[1]:.0f} ms median; load {os.getloadavg()[0]:.1f}")
        print("catch-up:")
        up = await _catch_up(backlog_mb, rounds)
        up_best, up_med = _best_median(up, "mb_per_s")
        copy_best, copy_med = _best_median(up, "copy_mb_per_s")
        print(f"  catch-up best {up_best:,.0f} median {up_med:,.0f} MB/s (start included); the copy "
              f"alone best {copy_best:,.0f} median {copy_med:,.0f} MB/s; "
              f"{statistics.median(r['mb_per_cpu_s'] for r in up):,.0f} MB per slave CPU second (median)")
        return {
            "async_master_msgs_per_s": a_med,
            "sync_master_msgs_per_s": s_med,
            "sync_over_async": ratio,
            "sync_master_ack_p50_ms": statistics.median(r["ack_p50_ms"] for r in s),
            "lag_produce_msgs_per_s": lag_rate_med,
            "lag_max_ms": _best_median(lag, "lag_max_ms")[1],
            "lag_mean_ms": _best_median(lag, "lag_mean_ms")[1],
            "lag_max_bytes": _best_median(lag, "lag_max_bytes")[1],
            "catch_up_backlog_mib": up[0]["backlog_mib"],
            "catch_up_mb_per_s": up_med,
            "catch_up_copy_mb_per_s": copy_med,
            "catch_up_mb_per_slave_cpu_s": statistics.median(r["mb_per_cpu_s"] for r in up),
        }

    return asyncio.run(main())


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=DURATION)
    p.add_argument("--backlog-mb", type=int, default=BACKLOG_MB)
    p.add_argument("--rounds", type=int, default=ROUNDS)
    a = p.parse_args(argv)
    run(a.duration, a.backlog_mb, a.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
