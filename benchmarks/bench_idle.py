"""What an idle `rocketq up` costs: CPU share of one core and wake-ups per second.

    .venv/bin/python benchmarks/bench_idle.py [--seconds 10] [--strace]

Starts `rocketq up` on free ports, lets it settle, then samples it for a window with nobody
connected. Wake-ups are the process's context switches over all its threads (each time a thread
sleeping in epoll_wait, a futex or a timer is woken): a timer that polls every 10 ms shows up
here as 100/s even when each poll costs microseconds. `--strace` also runs `strace -c -f` for
the window, to name the syscalls behind the wake-ups. Never asserts: prints figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path

from benchmarks._cluster import BrokerProcess

SETTLE = 3.0  # start-up work (first registration, first flush) is not idle cost


def context_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of every thread of `pid` so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text()
        except OSError:
            continue  # a worker thread that ended meanwhile
        for line in text.splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def _strace(pid: int, seconds: float) -> tuple[str, float]:
    """strace -c -f's table for `seconds`, and its epoll waits per second (event-loop turns)."""
    if shutil.which("strace") is None:
        return "strace not installed", float("nan")
    done = subprocess.run(["timeout", "-s", "INT", str(seconds), "strace", "-c", "-f", "-p", str(pid)],
                          capture_output=True, text=True)
    table = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("strace:"))
    turns = sum(int(line.split()[3]) for line in table.splitlines()
                if line.split()[-1:] in (["epoll_wait"], ["epoll_pwait"]))
    return table, turns / seconds


def run(seconds: float = 10.0, strace: bool = False) -> dict[str, float]:
    with BrokerProcess(name="bench-idle") as broker:
        time.sleep(SETTLE)
        cpu0, sw0, t0 = broker.cpu_seconds(), context_switches(broker.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, sw1, t1 = broker.cpu_seconds(), context_switches(broker.pid), time.monotonic()
        span = t1 - t0
        cpu_pct = 100.0 * (cpu1 - cpu0) / span
        wakeups = (sw1 - sw0) / span
        threads = len(os.listdir(f"/proc/{broker.pid}/task"))
        print(f"idle rocketq up over {span:.1f} s: CPU {cpu_pct:.2f} % of a core, "
              f"{wakeups:.1f} wake-ups/s ({threads} threads)")
        figures = {"idle CPU % of a core": round(cpu_pct, 3), "idle wake-ups/s": round(wakeups, 1)}
        if strace:  # a second window: strace itself costs the traced process CPU
            table, turns = _strace(broker.pid, seconds)
            print(f"{table}\nevent-loop turns (epoll waits): {turns:.1f}/s")
            figures["idle epoll waits/s"] = round(turns, 1)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--strace", action="store_true", help="also count syscalls with strace -c -f")
    args = parser.parse_args()
    run(args.seconds, args.strace)
