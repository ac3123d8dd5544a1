"""A real cluster, a real ``rocketq dashboard`` process and a real headless Chromium, per module.

Chromium is Debian's (/usr/bin/chromium, installed by the Makefile's test setup); Playwright only
drives it. Both are installed by `make test`; a missing one is a failure, never a skip.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.testing import RocketQCluster, start_cluster

CHROMIUM = "/usr/bin/chromium"
READY_TIMEOUT = 30.0
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@dataclass(frozen=True, slots=True)
class Dashboard:
    url: str
    host: str
    port: int
    proc: subprocess.Popen[str]
    stderr: list[str]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketQCluster]:
    with start_cluster(tmp_path_factory.mktemp("mq")) as c:
        yield c


def _pump(stream: Any, lines: queue.Queue[str], keep: list[str] | None) -> None:
    for line in stream:
        if keep is not None:
            keep.append(line)
        lines.put(line)


@pytest.fixture(scope="module")
def dashboard(cluster: RocketQCluster) -> Iterator[Dashboard]:
    yield from run_dashboard(cluster.namesrv_addr)


def run_dashboard(namesrv: str, *extra: str, env: dict[str, str] | None = None) -> Iterator[Dashboard]:
    """A ``rocketq dashboard`` process on a free port (with ``extra`` arguments) until closed."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    env.pop("NAMESRV_ADDR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli.main", "dashboard", "-n", namesrv, "--port", "0",
         "--log-level", "WARNING", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    out: queue.Queue[str] = queue.Queue()
    err_lines: list[str] = []
    threading.Thread(target=_pump, args=(proc.stdout, out, None), daemon=True).start()
    threading.Thread(target=_pump, args=(proc.stderr, queue.Queue(), err_lines), daemon=True).start()
    deadline = time.monotonic() + READY_TIMEOUT
    url = None
    try:
        while url is None:
            try:
                line = out.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no READY line from the dashboard; stderr: {''.join(err_lines)}")
            if line.startswith("READY dashboard="):
                url = line.strip().split("=", 1)[1]
        hostport = url.removeprefix("http://")
        host, port = hostport.rsplit(":", 1)
        yield Dashboard(url, host, int(port), proc, err_lines)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: `make test` installs Debian's chromium"
    from playwright import sync_api
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
        )
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab that fails the test on any JavaScript dialog (an executed alert())."""
    tab = browser.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.set_default_timeout(15_000)
    try:
        yield tab
    finally:
        tab.close()
    assert not dialogs, f"a script ran in the page: dialogs {dialogs}"
    assert not errors, f"JavaScript errors in the page: {errors}"
