"""The official RocketMQ 5 Python client (PyPI rocketmq-python-client 5.1.2, gRPC) against the
broker's apache.rocketmq.v2 endpoint of a real `rocketq up` (docs/grpc.md): send normal, FIFO and
transactional messages (with a checker for the orphaned ones), receive / ack / change invisible
duration with a SimpleConsumer, a consumer killed mid-batch, and topics shared with remoting
clients both ways. The client runs from its own virtualenv (tests/compat/py5, `make setup`)."""

from __future__ import annotations

import json
import subprocess
import sys
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
from rocketq.client.message import Message

pytestmark = [pytest.mark.timeout(180)]

PY5_DIR = Path(__file__).resolve().parents[1] / "compat" / "py5"
PY5_PYTHON = PY5_DIR / ".venv" / "bin" / "python"
CLIENT = PY5_DIR / "official_client.py"
CLUSTER = "DefaultCluster"

# Orphaned half messages are checked after 2 s, every second (the defaults wait 6 s and 60 s).
cluster = module_cluster("grpc-py5", *SMALL_STORE, "--set", "transactionTimeOut=2000",
                         "--set", "transactionCheckInterval=1000")


def py5(*args: str, timeout: float = 120) -> tuple[int, list[dict[str, Any]], str]:
    """Run the official client's driver; (exit code, its JSON lines, its stderr)."""
    if not PY5_PYTHON.exists():
        pytest.fail(f"{PY5_PYTHON} is missing: `make setup` creates it (tests/compat/py5/requirements.txt)")
    run = subprocess.run([str(PY5_PYTHON), str(CLIENT), *args], capture_output=True, text=True,
                         timeout=timeout, cwd=PY5_DIR)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return run.returncode, lines, run.stderr[-3000:]


def _topic(admin: AdminRun, prefix: str, queues: int = 4) -> str:
    topic = unique_name(prefix)
    admin.json("updateTopic", "-t", topic, "-c", CLUSTER, "-r", str(queues), "-w", str(queues))
    return topic


def _last(lines: list[dict[str, Any]], key: str) -> Any:
    found = [line[key] for line in lines if key in line]
    assert found, f"no {key!r} in {lines}"
    return found[-1]


def test_send_normal_then_receive_and_ack(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Normal")
    rc, out, err = py5("produce", ep, topic, "--count", "5", "--tag", "TagA", "--prefix", "n")
    assert rc == 0, err
    sent = _last(out, "sent")
    assert [s["body"] for s in sent] == [f"n-{i}" for i in range(5)] and all(s["id"] for s in sent)

    group = unique_name("G5c")
    rc, out, err = py5("consume", ep, topic, group, "--count", "5")
    assert rc == 0, err
    got = _last(out, "received_all")
    assert sorted(m["body"] for m in got) == [f"n-{i}" for i in range(5)]
    assert {m["tag"] for m in got} == {"TagA"} and all(m["props"].get("origin") == "py5" for m in got)
    # acked: a second consumer of the group finds nothing
    rc, out, _ = py5("consume", ep, topic, group, "--count", "1", "--timeout", "8")
    assert rc == 1 and _last(out, "received_all") == []


def test_fifo_group_lands_on_one_queue_in_order(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Fifo")
    rc, out, err = py5("produce", ep, topic, "--count", "6", "--group", "order-42", "--prefix", "f")
    assert rc == 0, err
    rc, out, err = py5("consume", ep, topic, unique_name("G5fc"), "--count", "6")
    assert rc == 0, err
    got = _last(out, "received_all")
    assert [m["body"] for m in got] == [f"f-{i}" for i in range(6)]
    assert {m["group"] for m in got} == {"order-42"}


def test_change_invisible_duration_and_redelivery(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Inv", queues=1)
    assert py5("produce", ep, topic, "--count", "2", "--prefix", "v")[0] == 0
    group = unique_name("G5ic")
    # received, then made visible again in 1 s instead of acked
    rc, out, err = py5("consume", ep, topic, group, "--count", "2", "--change-invisible", "1")
    assert rc == 0, err
    rc, out, err = py5("consume", ep, topic, group, "--count", "2", "--timeout", "60")
    assert rc == 0, err
    got = _last(out, "received_all")
    assert sorted(m["body"] for m in got) == ["v-0", "v-1"]
    assert all(m["attempt"] >= 2 for m in got), got


def test_consumer_killed_mid_batch_gets_its_messages_back(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Kill", queues=1)
    assert py5("produce", ep, topic, "--count", "4", "--prefix", "k")[0] == 0
    group = unique_name("G5kc")
    rc, out, _ = py5("consume", ep, topic, group, "--count", "4", "--invisible", "3", "--exit-after", "1")
    assert rc == 3 and len([line for line in out if "received" in line]) == 1
    rc, out, err = py5("consume", ep, topic, group, "--count", "4", "--timeout", "90")
    assert rc == 0, err
    assert sorted(m["body"] for m in _last(out, "received_all")) == [f"k-{i}" for i in range(4)]


def test_push_consumer_gets_a_failed_message_again(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Push")
    assert py5("produce", ep, topic, "--count", "3", "--prefix", "u")[0] == 0
    rc, out, err = py5("push", ep, topic, unique_name("G5pc"), "--count", "3", "--timeout", "120",
                       timeout=170)
    assert rc == 0, err
    assert _last(out, "consumed") == ["u-0", "u-1", "u-2"]


def test_transactions_commit_rollback_and_check_back(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Txn")
    rc, out, err = py5("transaction", ep, topic, "--commit", "2", "--rollback", "2", "--orphan", "1",
                       "--wait", "90")
    assert rc == 0, err
    assert _last(out, "checked") == ["orphan-0"]
    rc, out, err = py5("consume", ep, topic, unique_name("G5tc"), "--count", "3")
    assert rc == 0, err
    got = sorted(m["body"] for m in _last(out, "received_all"))
    assert got == ["commit-0", "commit-1", "orphan-0"]


def test_grpc_producer_to_remoting_push_consumer(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Mix")
    got: list[Any] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], _ctx: Any) -> ConsumeStatus:
        with lock:
            got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = rocketq.PushConsumer(unique_name("G5rc"), namesrv_addr=cluster.namesrv,
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                    instance_name=unique_name("i"))
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    consumer.start()
    try:
        rc, _, err = py5("produce", ep, topic, "--count", "3", "--tag", "T", "--prefix", "m")
        assert rc == 0, err
        eventually(lambda: len(got) >= 3, timeout=60)
    finally:
        consumer.shutdown()
    assert sorted(m.body for m in got) == [b"m-0", b"m-1", b"m-2"]
    assert {m.tags for m in got} == {"T"} and all(m.properties.get("origin") == "py5" for m in got)


def test_remoting_producer_to_grpc_simple_consumer(cluster: Cluster, admin: AdminRun) -> None:
    ep = grpc_address(cluster)
    topic = _topic(admin, "G5Rev")
    with rocketq.Producer(unique_name("G5rp"), namesrv_addr=cluster.namesrv) as p:
        for i in range(3):
            p.send(Message(topic, b"r-%d" % i, tags="R", properties={"who": "remoting"}))
    rc, out, err = py5("consume", ep, topic, unique_name("G5gc"), "--count", "3")
    assert rc == 0, err
    got = _last(out, "received_all")
    assert sorted(m["body"] for m in got) == ["r-0", "r-1", "r-2"]
    assert {m["tag"] for m in got} == {"R"} and all(m["props"].get("who") == "remoting" for m in got)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
