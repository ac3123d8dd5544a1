"""Fixtures of the Spark connector tests: one local[2] SparkSession (loopback only, UI off) and
one real ``rocketq up`` cluster for the whole session, plus a seeding helper that sends messages
over the wire (SEND_BATCH_MESSAGE) independently of the connector's own sink."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.harness import (
    DEFAULT_READY_TIMEOUT,
    READY_RE,
    Cluster,
    ManagedProcess,
    rocketq_command,
    start_process,
    unique_name,
)
from tests.wire import create_topic, send_header

from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import BatchItem, UniqIdGenerator, encode_batch_body, encode_properties
from rocketq.remoting import RemotingClient
from rocketq.spark import register

_uniq = UniqIdGenerator()


@pytest.fixture(scope="session")
def _cluster_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ManagedProcess, Path]]:
    """``rocketq up`` started first and waited for last: it boots while the JVM does.

    Small segments: the default 1 GiB commit-log files are preallocated on disk.
    """
    root = tmp_path_factory.mktemp("spark-cluster")
    data = root / "data"
    data.mkdir()
    args = [*rocketq_command(), "up", "--data-dir", str(data), "--namesrv-port", "0", "--broker-port", "0",
            "--set", "mappedFileSizeCommitLog=67108864"]
    proc = start_process(args, name="rocketq-up", log_dir=root / "logs")
    yield proc, data
    proc.stop()


@pytest.fixture(scope="session")
def spark(_cluster_process: tuple[ManagedProcess, Path]) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.stopTimeout", "10s")
        # Short-lived test JVM: the C1 compiler alone warms up in a fraction of the CPU time C2
        # takes, which matters on a 2-core machine; one GC thread for the same reason.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster(_cluster_process: tuple[ManagedProcess, Path]) -> Cluster:
    proc, data = _cluster_process
    ready = proc.wait_for(READY_RE, DEFAULT_READY_TIMEOUT)
    return Cluster(ready["namesrv"], ready["broker"], proc, data)


@dataclass
class Sent:
    """What a test sent: one dict per message, in send order per queue."""

    topic: str
    rows: list[dict[str, object]] = field(default_factory=list)


def make_topic(cluster: Cluster, queues: int = 4, prefix: str = "SparkT") -> str:
    topic = unique_name(prefix)

    async def go() -> None:
        async with RemotingClient() as client:
            r = await create_topic(client, cluster.broker, topic, read=queues, write=queues)
            assert r.code == 0, r
    asyncio.run(go())
    wait_route(cluster, topic)
    return topic


def wait_route(cluster: Cluster, topic: str, timeout: float = 15.0) -> None:
    """A topic created at the broker reaches the name server with the next registration."""
    from tests.wire import get_route

    async def poll() -> None:
        async with RemotingClient() as client:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if await get_route(client, cluster.namesrv, topic) is not None:
                    return
                await asyncio.sleep(0.2)
            raise AssertionError(f"no route for {topic} after {timeout}s")
    asyncio.run(poll())


def seed(cluster: Cluster, topic: str, messages: Sequence[dict[str, object]], *, queues: int = 4,
         batch: int = 200) -> list[dict[str, object]]:
    """Send messages ({"body", "tags", "keys", "props"}) round-robin over queues in batches.

    Returns them with queue_id / queue_offset / msg_id filled from the send answers.
    """
    out: list[dict[str, object]] = []

    async def go() -> None:
        async with RemotingClient() as client:
            for i in range(0, len(messages), batch):
                chunk = messages[i : i + batch]
                qid = (i // batch) % queues
                items, uniqs = [], []
                for m in chunk:
                    uniq = _uniq.next_id()
                    props: dict[str, str] = {}
                    if m.get("keys") is not None:
                        props["KEYS"] = str(m["keys"])
                    if m.get("tags") is not None:
                        props["TAGS"] = str(m["tags"])
                    props["UNIQ_KEY"] = uniq
                    props.update(m.get("props") or {})  # type: ignore[arg-type]
                    uniqs.append(uniq)
                    items.append(BatchItem(0, bytes(m["body"]), encode_properties(props)))  # type: ignore[arg-type]
                ext = send_header(topic, queue_id=qid, batch=True)
                req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch_body(items))
                resp = await client.invoke(cluster.broker, req, 10.0)
                assert resp.code == 0, resp
                first = int(resp.ext_fields["queueOffset"])
                for j, m in enumerate(chunk):
                    out.append({**m, "queue_id": qid, "queue_offset": first + j, "msg_id": uniqs[j],
                                "topic": topic})
    asyncio.run(go())
    return out
