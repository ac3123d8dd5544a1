"""failOnDataLoss against real retention: a broker with 1 MiB commit-log segments that deletes
every full segment at once (fileReservedTime=0, any hour), so offsets fall behind its minimum."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator

import pytest
from tests.harness import Cluster, start_cluster
from tests.spark.conftest import make_topic, seed
from tests.wire import get_max_offset, invoke, send_batch

from rocketq.codec.codes import RequestCode
from rocketq.remoting import RemotingClient
from rocketq.spark._broker import BrokerSession
from rocketq.spark.schema import RowSchema
from rocketq.spark.store_reader import StoreDirectory

pytestmark = pytest.mark.timeout(240)

_EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


@pytest.fixture(scope="module")
def short_retention(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("spark-retention"),
        "--set", "mappedFileSizeCommitLog=1048576", "--set", "fileReservedTime=0",
        "--set", f"deleteWhen={_EVERY_HOUR}", "--set", "cleanResourceInterval=200",
        "--set", "maxHashSlotNum=10000", "--set", "maxIndexNum=40000",
    )
    yield c
    c.stop()


def _bounds(cluster: Cluster, topic: str) -> tuple[int, int]:
    async def go() -> tuple[int, int]:
        async with RemotingClient() as client:
            ext = {"topic": topic, "queueId": 0}
            lo = await invoke(client, cluster.broker, RequestCode.GET_MIN_OFFSET, ext)
            return int(lo.ext_fields["offset"]), await get_max_offset(client, cluster.broker, topic, 0)
    return asyncio.run(go())


def _push_past(cluster: Cluster, topic: str, offset: int) -> tuple[int, int]:
    """Append ~4 MiB and wait until retention has deleted every message before ``offset``."""
    async def fill() -> None:
        async with RemotingClient() as client:
            for _ in range(40):
                r = await send_batch(client, cluster.broker, topic, [os.urandom(1000) for _ in range(100)])
                assert r.code == 0, r
    asyncio.run(fill())
    deadline = time.monotonic() + 30
    last = (-1, -1)
    while time.monotonic() < deadline:
        now = _bounds(cluster, topic)
        if now[0] > offset and now == last:  # stable: the cleaner has deleted all it will
            return now
        last = now
        time.sleep(0.5)
    raise AssertionError(f"retention did not pass offset {offset}: {_bounds(cluster, topic)}")


def test_fail_on_data_loss_against_retention(spark, short_retention, tmp_path):
    cluster = short_retention
    topic = make_topic(cluster, queues=1)
    seed(cluster, topic, [{"body": f"early{i}".encode()} for i in range(50)], queues=1)
    out, chk = tmp_path / "out", tmp_path / "chk"

    def stream(fail_on_data_loss: bool):  # type: ignore[no-untyped-def]
        q = (spark.readStream.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
             .option("startingOffsets", "earliest").option("failOnDataLoss", str(fail_on_data_loss).lower())
             .load().select("queue_offset")
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(chk))
             .trigger(availableNow=True).start())
        try:
            q.awaitTermination(120)
        except Exception as e:  # a failed query raises from awaitTermination
            return e
        return q.exception()

    assert stream(True) is None
    lo, hi = _push_past(cluster, topic, 50)  # the checkpoint now points at deleted messages

    with BrokerSession(cluster.namesrv) as session:
        ref = session.queues(topic)[0]
    from_zero = json.dumps({topic: {ref.broker: {"0": 0}}})

    def read(flag: str):  # type: ignore[no-untyped-def]
        return (spark.read.format("rocketq").option("namesrv", cluster.namesrv).option("topic", topic)
                .option("startingOffsets", from_zero).option("failOnDataLoss", flag).load())

    with pytest.raises(Exception, match="failOnDataLoss"):
        read("true").count()
    assert read("false").count() == hi - lo

    # The store-directory reader meets the same gap in the files themselves.
    store = StoreDirectory(str(cluster.data_dir), ref.broker)
    lost: list[tuple[int, int]] = []
    rows = sum(b.num_rows for b in store.read(ref, 0, hi, RowSchema.default(),
                                              on_loss=lambda _, a, b: lost.append((a, b))))
    assert rows == hi - lo and lost == [(0, lo)]

    error = stream(True)
    assert error is not None and "failOnDataLoss" in str(error)
    assert stream(False) is None
    offsets = sorted(r.queue_offset for r in spark.read.parquet(str(out)).collect())
    assert offsets == list(range(50)) + list(range(lo, hi))
