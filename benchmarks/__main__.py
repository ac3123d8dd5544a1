"""`make bench`: run every benchmark module and print its figures with the commit they measure.

`python -m benchmarks` runs them all; `python -m benchmarks store codec` runs a subset by name.
"""

from __future__ import annotations

import importlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(HERE.parent), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str]) -> int:
    names = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    wanted = argv or names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    print(f"rocketq benchmarks  commit={_commit()}  python={platform.python_version()}  "
          f"cpus={os.cpu_count()}  {time.strftime('%Y-%m-%d %H:%M:%S')}")
    results = {}
    for name in wanted:
        print(f"\n== {name}")
        mod = importlib.import_module(f"benchmarks.bench_{name}")
        results[name] = mod.run()
    print("\n== summary")
    for name, figures in results.items():
        for key, value in (figures or {}).items():
            shown = f"{value:,.0f}" if isinstance(value, float | int) and abs(value) >= 100 else f"{value}"
            print(f"{name:>10}  {key:<48} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
