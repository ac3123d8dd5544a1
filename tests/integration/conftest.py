"""Fixtures shared by the integration modules (helpers live in tests/harness.py and tests/wire.py)."""

from __future__ import annotations

import pytest
from tests.harness import AdminRun, Cluster


@pytest.fixture
def admin(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> AdminRun:
    """``rocketq admin`` against the module's ``cluster``."""
    return AdminRun(capsys, cluster.namesrv)
