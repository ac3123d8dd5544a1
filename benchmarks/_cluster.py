"""Start ``rocketq up`` as a subprocess for a benchmark, and read its CPU time.

The broker runs exactly as a user starts it (its own process, event loop and core), so a figure
measured against it is the broker's, and the client in the benchmark's process can be charged
separately: `BrokerProcess.cpu_seconds()` against `time.process_time()`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

READY_RE = re.compile(
    r"^READY namesrv=(?P<namesrv>\S+:\d+) broker=(?P<broker>\S+:\d+)(?P<more>(?: \S+=\S+)*)\s*$",
    re.MULTILINE)
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def git_commit() -> str:
    """The commit a figure measures (``git describe --always --dirty`` of this checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "describe", "--always",
                              "--dirty"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rocketq_command() -> list[str]:
    script = Path(sys.executable).with_name("rocketq")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "rocketq.cli"]


def host_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat), steal included."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    # user nice system idle iowait irq softirq steal ...: everything but idle and iowait
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / _CLK_TCK


class BrokerProcess:
    """A running ``rocketq up`` in a temporary data dir; a context manager that removes it after."""

    def __init__(self, *sets: str, name: str = "bench", ready_timeout: float = 60.0,
                 log_level: str = "WARNING", args: tuple[str, ...] = ()) -> None:
        self.name = name
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"rocketq-{name}-"))
        self.log_path = self.data_dir / "broker.log"
        args = [*rocketq_command(), "up", "--data-dir", str(self.data_dir / "data"),
                "--namesrv-port", "0", "--broker-port", "0", "--log-level", log_level, *args]
        self.ready: dict[str, str] = {}  # every key=value of the READY line (slave1=..., metrics=...)
        for s in sets:
            args += ["--set", s]
        self._out = (self.data_dir / "stdout").open("wb")
        self._err = self.log_path.open("wb")
        self.popen = subprocess.Popen(args, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
        self.namesrv, self.broker = self._wait_ready(ready_timeout)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _wait_ready(self, timeout: float) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        stdout = self.data_dir / "stdout"
        while time.monotonic() < deadline:
            m = READY_RE.search(stdout.read_text("utf-8", "replace"))
            if m:
                self.ready = dict(kv.split("=", 1) for kv in m.group(0).split()[1:])
                return m["namesrv"], m["broker"]
            if self.popen.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log_path.read_text("utf-8", "replace")[-3000:]
        self.close()
        raise RuntimeError(f"rocketq up ({self.name}) did not become ready:\n{tail}")

    def cpu_seconds(self) -> float:
        """User + system CPU the broker process has used so far (Linux /proc)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def close(self) -> int | None:
        """SIGTERM (clean stop), SIGKILL after 60 s; remove the data dir. The exit code."""
        code = self.popen.poll()
        if code is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                code = self.popen.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                code = self.popen.wait()
        self._out.close()
        self._err.close()
        if code != 0:  # keep the evidence of a crash or an unclean stop
            tail = self.log_path.read_text("utf-8", "replace")[-4000:]
            print(f"rocketq up ({self.name}) exited with {code}; log tail:\n{tail}", file=sys.stderr)
        shutil.rmtree(self.data_dir, ignore_errors=True)
        return code

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


@contextlib.contextmanager
def child_server(target: Callable[..., None], *args: Any, prefix: str,
                 start_timeout: float = 300) -> Iterator[tuple[Any, int]]:
    """Run ``target(data_dir, *args, conn)`` in a spawned process (an in-process broker built by the
    benchmark itself) and yield (what it sent on ``conn`` once serving, its pid). On exit it is
    told to stop, killed if it does not, and its data dir removed."""
    import multiprocessing as mp

    data_dir = tempfile.mkdtemp(prefix=prefix)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(data_dir, *args, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(start_timeout):
            raise RuntimeError("the benchmark server did not start")
        yield parent.recv(), proc.pid or 0
    finally:
        try:
            parent.send("stop")
        except OSError:
            pass
        proc.join(30)
        if proc.is_alive():
            proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
