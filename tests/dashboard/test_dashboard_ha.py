"""The cluster page of a broker group with a slave (`rocketq up --replicas 1`): each broker's role
and the master's replication lag, as `clusterList` shows them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from tests.dashboard.conftest import Dashboard, run_dashboard
from tests.harness import SMALL_STORE, ManagedProcess, eventually, rocketq_command, start_process

pytestmark = [pytest.mark.timeout(120)]

READY = re.compile(r"^READY namesrv=(?P<namesrv>\S+) broker=(?P<broker>\S+) slave1=(?P<slave>\S+)",
                   re.MULTILINE)


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[re.Match[str]]:
    tmp = tmp_path_factory.mktemp("ha-dash")
    proc: ManagedProcess = start_process(
        [*rocketq_command(), "up", "--data-dir", str(tmp / "data"), "--namesrv-port", "0",
         "--broker-port", "0", "--replicas", "1", *SMALL_STORE],
        name="rocketq-up-ha-dash", log_dir=tmp / "logs")
    try:
        yield proc.wait_for(READY, 30.0)
    finally:
        assert proc.stop(20.0) == 0, proc.describe()


@pytest.fixture(scope="module")
def ha_dashboard(group: re.Match[str]) -> Iterator[Dashboard]:
    yield from run_dashboard(group["namesrv"])


def _cells(page: Any, addr: str) -> dict[str, str]:
    brokers = page.locator("#brokers")
    headers = brokers.locator("thead th").all_inner_texts()
    row = brokers.locator("tbody tr", has_text=addr)
    assert row.count() == 1
    return dict(zip(headers, row.locator("td").all_inner_texts(), strict=True))


def test_cluster_page_shows_master_and_slave_roles_and_lag(
    page: Any, ha_dashboard: Dashboard, group: re.Match[str]
) -> None:
    def shown() -> bool:
        page.goto(ha_dashboard.url + "/")
        # the slave registers with the name server a moment after the master
        return page.locator("#brokers tbody tr").count() == 2

    eventually(shown, timeout=30)
    master, slave = _cells(page, group["broker"]), _cells(page, group["slave"])
    assert (master["id"], master["role"], master["lag (B)"]) == ("0", "ASYNC_MASTER", "0")
    assert (slave["id"], slave["role"]) == ("1", "SLAVE")
    assert master["broker"] == slave["broker"]
