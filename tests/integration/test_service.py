"""Running rocketq as a service: one broker per data directory (PID/lock file), SIGTERM, a rotating
log file, the READY line with metrics, and the example systemd units."""

from __future__ import annotations

import configparser
import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest
from tests.harness import ManagedProcess, rocketq_command, run_process, start_process

pytestmark = [pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]
BROKER_READY = re.compile(
    r"^READY broker=(?P<broker>\S+:\d+)(?: metrics=(?P<metrics>\S+:\d+))?(?: grpc=\S+)?$", re.MULTILINE)


def _broker(tmp_path: Path, name: str, *extra: str) -> ManagedProcess:
    args = [*rocketq_command(), "broker", "--data-dir", str(tmp_path / "data"), "--broker-port", "0", *extra]
    return start_process(args, name=name, log_dir=tmp_path / "logs")


def test_second_broker_on_the_same_data_dir_refuses(tmp_path: Path) -> None:
    first = _broker(tmp_path, "first")
    try:
        first.wait_for(BROKER_READY, 30.0)
        pid_file = tmp_path / "data" / "store" / "broker.pid"
        assert pid_file.read_text().strip() == str(first.pid)

        second = run_process([*rocketq_command(), "broker", "--data-dir", str(tmp_path / "data"),
                              "--broker-port", "0"], timeout=30)
        assert second.returncode == 1, second.describe()
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert "in use by another broker" in lines[0] and f"pid {first.pid}" in lines[0]
        assert "Traceback" not in second.stderr and "READY" not in second.stdout
        assert first.alive(), first.describe()  # the first one is untouched
        assert pid_file.read_text().strip() == str(first.pid)

        # kill -9: the kernel drops the flock, the stale PID in the file blocks nobody
        os.kill(first.pid, signal.SIGKILL)
        first.kill()
        third = _broker(tmp_path, "third")
        try:
            third.wait_for(BROKER_READY, 30.0)
            assert pid_file.read_text().strip() == str(third.pid)
        finally:
            assert third.stop(20.0) == 0, third.describe()  # SIGTERM: graceful, exit 0
        assert pid_file.read_text() == ""  # emptied on a clean exit
    finally:
        first.stop(5.0)


def test_sigterm_shutdown_rotating_log_file_and_metrics_ready_line(tmp_path: Path) -> None:
    log_file = tmp_path / "rocketmqlogs" / "broker.log"
    proc = _broker(tmp_path, "broker", "--set", "metricsPort=0", "--log-file", str(log_file),
                   "--log-max-bytes", "400", "--log-backups", "2")
    try:
        match = proc.wait_for(BROKER_READY, 30.0)
        assert match["metrics"], proc.stdout()
        with urllib.request.urlopen(f"http://{match['metrics']}/metrics", timeout=10) as resp:
            assert b"rocketmq_storage_size_bytes" in resp.read()
    finally:
        assert proc.stop(20.0) == 0, proc.describe()
    files = sorted(p.name for p in log_file.parent.iterdir())
    assert files == ["broker.log", "broker.log.1", "broker.log.2"], files  # rotated, only 2 backups kept
    text = "".join(p.read_text() for p in log_file.parent.iterdir())
    assert "shut down" in text  # the graceful shutdown's last lines reached the file


def test_name_server_ready_line_ends_with_metrics(tmp_path: Path) -> None:
    args = [*rocketq_command(), "namesrv", "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0",
            "--set", "metricsPort=0"]
    proc = start_process(args, name="namesrv", log_dir=tmp_path / "logs")
    try:
        ready = re.compile(r"^READY namesrv=\S+:\d+ metrics=(?P<m>\S+:\d+)$", re.MULTILINE)
        match = proc.wait_for(ready, 30.0)
        with urllib.request.urlopen(f"http://{match['m']}/metrics", timeout=10) as resp:
            assert b"rocketmq_namesrv_topics" in resp.read()
    finally:
        assert proc.stop(20.0) == 0, proc.describe()


def test_bad_metrics_port_and_log_file_are_one_line_errors(tmp_path: Path) -> None:
    bad = run_process([*rocketq_command(), "broker", "--data-dir", str(tmp_path / "d"),
                       "--set", "metricsPort=70000"], timeout=30)
    assert bad.returncode == 2 and "metricsPort" in bad.stderr and "Traceback" not in bad.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    bad = run_process([*rocketq_command(), "broker", "--data-dir", str(tmp_path / "d"),
                       "--log-file", str(blocker / "broker.log")], timeout=30)
    assert bad.returncode == 2 and "cannot open log file" in bad.stderr, bad.describe()


@pytest.mark.parametrize("unit", ["rocketq-namesrv.service", "rocketq-broker.service"])
def test_systemd_units_parse_and_stop_with_sigterm(unit: str) -> None:
    cfg = configparser.ConfigParser(strict=True, interpolation=None)
    cfg.optionxform = str  # type: ignore[assignment,method-assign]
    cfg.read_string((ROOT / "deploy" / "systemd" / unit).read_text())
    role = "namesrv" if "namesrv" in unit else "broker"
    assert re.search(rf"\brocketq {role}\b", cfg["Service"]["ExecStart"])
    assert cfg["Service"]["KillSignal"] == "SIGTERM"
    assert cfg["Install"]["WantedBy"] == "multi-user.target"
