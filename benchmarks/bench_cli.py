"""`rocketq bench` (RocketMQ's benchmark tools) against a real `rocketq up`, as `make bench` runs it.

The other benchmarks drive the wire directly to measure one layer; this one measures what an operator
sees from the shipped tool: the SDK producer (sync and async, single and batch) and the end-to-end
send -> listener path, each for a few seconds, quoting the tool's own summary lines.
"""

from __future__ import annotations

import re
import subprocess

from benchmarks._cluster import BrokerProcess, rocketq_command

SUMMARY = re.compile(r"\[(?P<title>[^\]]+) summary\] total: (?P<total>\d+) \| failed: (?P<failed>\d+) \| "
                     r"TPS: (?P<tps>\d+)(?P<rest>.*)")

RUNS: dict[str, list[str]] = {
    "producer sync x16": ["producer", "--sync", "--threads", "16"],
    "producer async x4 window 64": ["producer", "--async", "--threads", "4", "--window", "64"],
    "producer batch 32 x4": ["producer", "--threads", "4", "--batch", "32"],
    "e2e": ["e2e"],
}


def run(duration: float = 5.0) -> dict[str, float]:
    figures: dict[str, float] = {}
    with BrokerProcess(name="bench-cli") as cluster:
        for i, (label, args) in enumerate(RUNS.items()):
            # A topic per run: the e2e consumer must not start on the producers' backlog.
            cmd = [*rocketq_command(), "bench", args[0], "-n", cluster.namesrv, "-t", f"BenchCli{i}",
                   "-d", str(duration), *args[1:]]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120)
            lines = [line for line in done.stdout.splitlines() if "summary]" in line]
            for line in lines:
                print(f"{label:<30} {line}")
                m = SUMMARY.search(line)
                if m:
                    figures[f"{label} {m['title']} TPS"] = float(m["tps"])
            if done.returncode != 0:
                print(f"{label}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    return figures


if __name__ == "__main__":
    run()
