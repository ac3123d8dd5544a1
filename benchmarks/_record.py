"""Benchmark results as JSON lines, each with the commit it measured, so a regression shows as a
step between two commits (`.bench/results.jsonl` by default; `.bench/` is not committed)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATH = ROOT / ".bench" / "results.jsonl"


def commit() -> str:
    """`git describe --always --dirty` of the checkout the benchmarks run from."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def record(results: dict[str, Any], path: Path | None = None) -> Path:
    """Append one line: the commit, when, where (python, cpus, load average) and `results`
    ({benchmark: {figure: value}})."""
    path = path or DEFAULT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {
        "commit": commit(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    return path
