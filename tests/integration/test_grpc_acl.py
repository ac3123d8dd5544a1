"""ACL on the gRPC endpoint: the official RocketMQ 5 Python client (tests/compat/py5, its own
virtualenv) against a `rocketq up` with aclEnable=true. The client signs each call with its
ClientConfiguration's credentials (``authorization: MQv2-HMAC-SHA1 ...``); the broker checks them
against plain_acl.yml's accounts, as it checks remoting requests: the right key sends and
receives, a wrong secret is refused (UNAUTHORIZED), a missing permission too (FORBIDDEN), and a
refused send stores nothing."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.harness import Cluster, grpc_address, start_acl_cluster, unique_name
from tests.wire import create_topic, get_max_offset, send_message
from tests.wire import signed_client as signed

from rocketq.acl import SessionCredentials
from rocketq.codec.codes import ResponseCode

pytestmark = [pytest.mark.timeout(180)]

PY5_DIR = Path(__file__).resolve().parents[1] / "compat" / "py5"
PY5_PYTHON = PY5_DIR / ".venv" / "bin" / "python"

ADMIN = SessionCredentials("adminAccount", "adminSecret1")
APP = SessionCredentials("grpcAppKey", "grpcAppSecret")
TOPIC = unique_name("GAclTopic")
SUB_ONLY = unique_name("GAclSubOnly")

PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
- accessKey: {ADMIN.access_key}
  secretKey: {ADMIN.secret_key}
  admin: true
- accessKey: {APP.access_key}
  secretKey: {APP.secret_key}
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - {TOPIC}=PUB|SUB
  - {SUB_ONLY}=SUB
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_acl_cluster(tmp_path_factory.mktemp("grpc-acl"), PLAIN_ACL, "--grpc-port", "0")
    try:
        yield c
    finally:
        c.stop()


def py5(creds: SessionCredentials | None, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    if not PY5_PYTHON.exists():
        pytest.fail(f"{PY5_PYTHON} is missing: `make setup` creates it (tests/compat/py5/requirements.txt)")
    env = dict(os.environ)
    env.pop("RQ_ACCESS_KEY", None)
    env.pop("RQ_SECRET_KEY", None)
    if creds is not None:
        env["RQ_ACCESS_KEY"], env["RQ_SECRET_KEY"] = creds.access_key, creds.secret_key
    run = subprocess.run([str(PY5_PYTHON), "official_client.py", *args], capture_output=True, text=True,
                         timeout=150, cwd=PY5_DIR, env=env)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return run.returncode, lines, run.stderr[-3000:]


def _log(cluster: Cluster) -> str:
    return cluster.proc.stderr_path.read_text("utf-8", "replace")


async def _offsets(cluster: Cluster, topic: str) -> list[int]:
    async with signed(ADMIN) as rc:
        return [await get_max_offset(rc, cluster.broker, topic, q) for q in range(4)]


async def _topic(cluster: Cluster, topic: str) -> None:
    async with signed(ADMIN) as rc:
        assert (await create_topic(rc, cluster.broker, topic)).code == ResponseCode.SUCCESS


async def test_right_key_sends_and_receives(cluster: Cluster) -> None:
    await _topic(cluster, TOPIC)
    ep = grpc_address(cluster)
    rc, out, err = py5(APP, "produce", ep, TOPIC, "--count", "3", "--prefix", "ok")
    assert rc == 0, err
    assert sum(await _offsets(cluster, TOPIC)) == 3
    rc, out, err = py5(APP, "consume", ep, TOPIC, unique_name("GAclGroup"), "--count", "3")
    assert rc == 0, err
    got = [line["received_all"] for line in out if "received_all" in line][-1]
    assert sorted(m["body"] for m in got) == ["ok-0", "ok-1", "ok-2"]


@pytest.mark.parametrize(("creds", "topic", "expected"), [
    (SessionCredentials(APP.access_key, "wrongSecret1"), "TOPIC",
     f"Check signature failed for accessKey={APP.access_key}"),
    (SessionCredentials("unknownKey1", "whatever1"), "TOPIC", "No acl config for unknownKey1"),
    (APP, "SUB_ONLY", f"No default permission for topic:{SUB_ONLY}"),
    (None, "TOPIC", "authorization header has no Credential"),
], ids=["wrong-secret", "unknown-key", "missing-permission", "unsigned"])
async def test_refused_sends_store_nothing(cluster: Cluster, creds: SessionCredentials | None, topic: str,
                                           expected: str) -> None:
    name = {"TOPIC": TOPIC, "SUB_ONLY": SUB_ONLY}[topic]
    await _topic(cluster, name)
    before = await _offsets(cluster, name)
    rc, out, err = py5(creds, "produce", grpc_address(cluster), name, "--count", "1", "--prefix", "no")
    assert rc != 0 and not any("sent" in line for line in out), err
    # the client shows a refused QueryRoute only as "failed to fetch route": the broker says why
    log = _log(cluster)
    assert f"refused: {expected}" in log
    assert "wrongSecret1" not in log + err and APP.secret_key not in log + err
    assert await _offsets(cluster, name) == before


async def test_receive_needs_sub_on_the_topic(cluster: Cluster) -> None:
    await _topic(cluster, SUB_ONLY)
    async with signed(ADMIN) as rc:
        assert (await send_message(rc, cluster.broker, SUB_ONLY, b"sub-0", queue_id=0)).code == 0
    ep = grpc_address(cluster)
    rc, out, err = py5(APP, "consume", ep, SUB_ONLY, unique_name("GAclSub"), "--count", "1")
    assert rc == 0, err
    # a topic the account has no permission on (defaultTopicPerm DENY): the receive is refused
    await _topic(cluster, "GAclNoSuchPerm")
    rc, out, err = py5(APP, "consume", ep, "GAclNoSuchPerm", unique_name("GAclSub"), "--count", "1",
                       "--timeout", "5")
    assert rc != 0 and not [line for line in out if "received" in line], err
    assert "refused: No default permission for topic:GAclNoSuchPerm" in _log(cluster)
