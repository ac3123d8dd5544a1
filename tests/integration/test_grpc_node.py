"""The official RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8, gRPC; installed in
tests/compat/node by `make setup`) against the broker's apache.rocketmq.v2 endpoint of a real
`rocketq up`: a producer and a SimpleConsumer, and its messages read by a remoting consumer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.harness import (
    SMALL_STORE,
    AdminRun,
    Cluster,
    eventually,
    grpc_address,
    module_cluster,
    unique_name,
)

import rocketq
from rocketq.client.consumer import ConsumeStatus

pytestmark = [pytest.mark.timeout(180)]

NODE_DIR = Path(__file__).resolve().parents[1] / "compat" / "node"
SCRIPT = NODE_DIR / "grpc_client.js"
CLUSTER = "DefaultCluster"

cluster = module_cluster("grpc-node", *SMALL_STORE)


def node(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    exe = shutil.which("node")
    if exe is None:
        pytest.fail("node is not on PATH: the gRPC Node.js tests need Node.js >= 16")
    if not (NODE_DIR / "node_modules" / "rocketmq-client-nodejs" / "package.json").exists():
        pytest.fail(f"rocketmq-client-nodejs is not installed in {NODE_DIR}: run `make setup`")
    # the client logs under ~/logs/rocketmq: keep that out of the real home
    env = {**os.environ, "HOME": str(tmp_path)}
    run = subprocess.run([exe, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                         cwd=NODE_DIR, env=env)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no output (exit {run.returncode})\n{run.stderr[-3000:]}"
    return run.returncode, lines[-1], run.stderr[-3000:]


def test_node_producer_and_simple_consumer(cluster: Cluster, admin: AdminRun, tmp_path: Path) -> None:
    ep = grpc_address(cluster)
    topic = unique_name("GNode")
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", "4", "-w", "4")
    rc, out, err = node(tmp_path, "produce", ep, topic, "4", "nd")
    assert rc == 0 and [m["body"] for m in out["sent"]] == [f"nd-{i}" for i in range(4)], err
    rc, out, err = node(tmp_path, "consume", ep, topic, unique_name("GNodeC"), "4", "60")
    assert rc == 0, err
    got = out["received_all"]
    assert sorted(m["body"] for m in got) == [f"nd-{i}" for i in range(4)]
    assert {m["tag"] for m in got} == {"node"} and all(m["props"].get("origin") == "node" for m in got)

    # the same messages, as a remoting push consumer reads them
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], _ctx: Any) -> ConsumeStatus:
        with lock:
            seen.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = rocketq.PushConsumer(unique_name("GNodeR"), namesrv_addr=cluster.namesrv,
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                    instance_name=unique_name("i"))
    consumer.subscribe(topic, "node")
    consumer.register_listener(listener)
    consumer.start()
    try:
        eventually(lambda: len(seen) >= 4, timeout=60)
    finally:
        consumer.shutdown()
    assert sorted(seen) == [b"nd-%d" % i for i in range(4)]
