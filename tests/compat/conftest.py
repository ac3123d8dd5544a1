"""Fixtures for interop with real third-party RocketMQ clients (docs/interop.md).

Clients: the npm package ``ali-ons`` (tests/compat/node, installed by ``make setup``) and the PyPI
package ``rocketmq`` 0.4.4 (the Apache C++ client in a wheel, the ``compat`` extra). Both run as
subprocesses against a real ``rocketq up`` cluster. A missing client is a failure, never a skip:
``make test`` installs both. The only skip is while the server modules (rocketq/namesrv/server.py,
rocketq/broker/controller.py) do not exist yet; ``ROCKETQ_REQUIRE_SERVER=1`` makes that a failure too.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    # harness.py is shared with tests/integration; tests/ is not a package.
    sys.path.insert(0, str(TESTS_DIR))

from tests.harness import ClientRunner, Cluster, CompletedRun, run_process, server_available, start_cluster  # noqa: E402

COMPAT_DIR = Path(__file__).resolve().parent
NODE_DIR = COMPAT_DIR / "node"
ALI_ONS_SCRIPT = NODE_DIR / "ali_ons_roundtrip.js"
CPP_SCRIPT = COMPAT_DIR / "cpp_client.py"
CPP_WHEEL_VERSION = "0.4.4"


@pytest.fixture(scope="session")
def _server_ready() -> None:
    ok, why = server_available()
    if ok:
        return
    pytest.fail(f"there is no rocketq server to test against: {why}")


@pytest.fixture(scope="session")
def compat_cluster(_server_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # One cluster for all compat tests (each uses its own topics and groups): starting the
    # server per test would cost more than the tests themselves on two shared cores.
    cluster = start_cluster(tmp_path_factory.mktemp("compat-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(compat_cluster: Cluster) -> Iterator[Cluster]:
    assert compat_cluster.alive(), f"the shared cluster died in an earlier test\n{compat_cluster.describe()}"
    yield compat_cluster
    assert compat_cluster.alive(), f"the cluster died during this test\n{compat_cluster.describe()}"


def _client_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    # The C++ client logs under ~/logs/rocketmq-cpp; keep that (and anything else) out of $HOME.
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def node_executable() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the ali-ons interop tests need Node.js >= 16 (see docs/interop.md)")
    if not (NODE_DIR / "node_modules" / "ali-ons" / "package.json").exists():
        pytest.fail(
            f"ali-ons is not installed in {NODE_DIR}/node_modules: run `make setup` "
            f"(or `npm install` in {NODE_DIR})"
        )
    return node


@pytest.fixture(scope="session")
def cpp_wheel() -> str:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.fail(
            f"the PyPI package rocketmq=={CPP_WHEEL_VERSION} (Apache C++ client) is not installed: "
            "run `make setup` (it installs the `compat` extra)"
        )
    version = importlib.metadata.version("rocketmq")
    if version != CPP_WHEEL_VERSION:
        pytest.fail(f"rocketmq {version} is installed; the interop tests pin {CPP_WHEEL_VERSION}")
    return version


@pytest.fixture
def ali_ons(node_executable: str, tmp_path: Path, cluster: Cluster) -> ClientRunner:
    """``ali_ons(mode, topic, group, count, *options, timeout=...)`` -> CompletedRun."""
    home = tmp_path / "ali-ons-home"
    home.mkdir()

    def run(
        mode: str, topic: str, group: str, count: int, *options: str, timeout: float = 25.0
    ) -> CompletedRun:
        args = [
            node_executable, str(ALI_ONS_SCRIPT), cluster.namesrv, topic, group, str(count),
            "--mode", mode, "--timeout", str(int(timeout)), *options,
        ]
        # The script stops itself at --timeout; the extra margin only catches a wedged runtime.
        return run_process(args, timeout=timeout + 10, env=_client_env(home), cwd=NODE_DIR)

    return run


@pytest.fixture
def cpp(cpp_wheel: str, tmp_path: Path, cluster: Cluster) -> ClientRunner:
    """``cpp(mode, topic, group, count, *options, timeout=...)`` -> CompletedRun."""
    home = tmp_path / "cpp-home"
    home.mkdir()

    def run(
        mode: str, topic: str, group: str, count: int, *options: str, timeout: float = 25.0
    ) -> CompletedRun:
        args = [
            sys.executable, str(CPP_SCRIPT), mode, cluster.namesrv, topic, group, str(count),
            "--timeout", str(timeout), *options,
        ]
        return run_process(args, timeout=timeout + 15, env=_client_env(home), cwd=COMPAT_DIR)

    return run
