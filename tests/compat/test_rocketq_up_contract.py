"""The `rocketq up` contract every cluster-based test relies on (tests/harness.py).

READY names two listening 127.0.0.1 addresses on the ports it picked for port 0, and SIGTERM is a
clean stop (exit code 0) well inside the harness' grace period.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from tests.harness import start_cluster

pytestmark = [pytest.mark.compat, pytest.mark.timeout(60)]


def _accepts(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5):
        return True


def test_ready_line_then_clean_sigterm(_server_ready: None, tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    try:
        assert cluster.namesrv.startswith("127.0.0.1:") and cluster.broker.startswith("127.0.0.1:"), cluster
        assert cluster.namesrv_port > 0 and cluster.broker_port > 0
        assert cluster.namesrv_port != cluster.broker_port
        assert _accepts(cluster.namesrv) and _accepts(cluster.broker)
        assert cluster.proc.stdout().count("READY ") == 1, cluster.describe()
    finally:
        code = cluster.stop(grace=10.0)
    assert code == 0, f"SIGTERM should stop rocketq up cleanly\n{cluster.describe()}"
    assert any(cluster.data_dir.iterdir()), "the broker keeps its store under --data-dir"
