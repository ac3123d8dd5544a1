"""`make bench`: run every benchmark module and print its figures with the commit they measure.

`python -m benchmarks` runs them all; `python -m benchmarks store codec` runs a subset by name.
Every run appends its figures, with the commit, to `.bench/results.jsonl` (`--json PATH` elsewhere).
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks._record import commit, record

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    json_path: Path | None = None
    if "--json" in argv:
        at = argv.index("--json")
        if at + 1 >= len(argv):
            print("--json needs a path", file=sys.stderr)
            return 2
        json_path = Path(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    names = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    wanted = argv or names
    unknown = [n for n in wanted if n not in names]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    print(f"rocketq benchmarks  commit={commit()}  python={platform.python_version()}  "
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
    print(f"\nrecorded in {record(results, json_path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
