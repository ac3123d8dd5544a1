"""`rocketq up|namesrv|broker` as real processes: the READY line, listening ports, clean stop, errors."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

READY_UP = re.compile(
    r"^READY namesrv=(127\.0\.0\.1:(\d+)) broker=(127\.0\.0\.1:(\d+)) grpc=127\.0\.0\.1:\d+$")
READY_ONE = re.compile(r"^READY (namesrv|broker)=(127\.0\.0\.1:(\d+))(?: grpc=127\.0\.0\.1:\d+)?$")
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0

pytestmark = pytest.mark.timeout(120)


def _command() -> list[str]:
    script = Path(sys.executable).with_name("rocketq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rocketq.cli"]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ROCKETQ_") and k != "NAMESRV_ADDR"}


class Proc:
    def __init__(self, popen: subprocess.Popen[bytes], err_path: Path) -> None:
        self.popen = popen
        self.err_path = err_path

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-3000:]

    def read_line(self, timeout: float = READY_TIMEOUT) -> str | None:
        """One stdout line, or None at EOF/deadline (never blocks past the deadline)."""
        assert self.popen.stdout is not None
        deadline = time.monotonic() + timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.popen.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                byte = os.read(self.popen.stdout.fileno(), 1)
                if not byte:
                    return None
                if byte == b"\n":
                    return buf.decode()
                buf += byte
        return None

    def rest_of_stdout(self) -> bytes:
        assert self.popen.stdout is not None
        return self.popen.stdout.read()

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        self.popen.send_signal(sig)
        return self.popen.wait(timeout=STOP_TIMEOUT)


@contextmanager
def rocketq(tmp_path: Path, name: str, *args: str) -> Iterator[Proc]:
    err_path = tmp_path / f"{name}.stderr"
    with err_path.open("wb") as err:
        popen = subprocess.Popen(
            [*_command(), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            env=_clean_env(), start_new_session=True,
        )
    try:
        yield Proc(popen, err_path)
    finally:
        if popen.poll() is None:
            popen.kill()  # only the process this test started, by its own handle
            popen.wait()
        if popen.stdout is not None:
            popen.stdout.close()


def _accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        return True


def test_up_serves_announces_ready_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    args = ["up", "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0", "--broker-port", "0"]
    with rocketq(tmp_path, "up", *args) as p:
        line = p.read_line()
        assert line is not None, f"no READY line (exit {p.popen.poll()}):\n{p.stderr()}"
        match = READY_UP.match(line)
        assert match, line
        namesrv_port, broker_port = int(match.group(2)), int(match.group(4))
        assert namesrv_port > 0 and broker_port > 0 and namesrv_port != broker_port
        assert _accepts(namesrv_port) and _accepts(broker_port)
        assert p.stop() == 0, p.stderr()
        assert p.rest_of_stdout() == b"", "exactly one line on stdout"
    assert (tmp_path / "data" / "store").is_dir()


def test_namesrv_and_broker_as_separate_processes(tmp_path: Path) -> None:
    ns_args = ["namesrv", "--data-dir", str(tmp_path / "ns"), "--namesrv-port", "0"]
    with rocketq(tmp_path, "namesrv", *ns_args) as ns:
        line = ns.read_line()
        assert line is not None, ns.stderr()
        match = READY_ONE.match(line)
        assert match and match.group(1) == "namesrv", line
        namesrv_addr = match.group(2)
        broker_args = ["broker", "--data-dir", str(tmp_path / "b"), "--broker-port", "0", "-n", namesrv_addr]
        with rocketq(tmp_path, "broker", *broker_args) as broker:
            line = broker.read_line()
            assert line is not None, broker.stderr()
            match = READY_ONE.match(line)
            assert match and match.group(1) == "broker", line
            assert _accepts(int(match.group(3)))
            assert broker.stop(signal.SIGINT) == 0, broker.stderr()  # Ctrl-C is a clean stop too
        assert ns.stop() == 0, ns.stderr()
    assert (tmp_path / "b" / "store").is_dir()


def test_a_port_in_use_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        with rocketq(tmp_path, "busy", "namesrv", "--data-dir", str(tmp_path), "--namesrv-port", port) as p:
            assert p.popen.wait(timeout=STOP_TIMEOUT) == 1
            assert p.rest_of_stdout() == b""
            errors = [line for line in p.stderr().splitlines() if line.startswith("rocketq: error:")]
            assert len(errors) == 1 and "failed to start" in errors[0], p.stderr()
            assert "Traceback" not in p.stderr()
