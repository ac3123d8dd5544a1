"""Operating a broker group: `rocketq up --replicas 1` starts a master and a slave, and clusterList,
haStatus and the Prometheus endpoint show the roles, the slave's acked offset and the lag."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from tests.harness import (
    SMALL_STORE,
    AdminRun,
    ManagedProcess,
    rocketq_command,
    start_process,
    unique_name,
    wait_until,
)
from tests.integration.test_metrics import one, samples
from tests.wire import create_topic, send_message

from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(120)]

READY = re.compile(r"^READY namesrv=(?P<namesrv>\S+) broker=(?P<broker>\S+) slave1=(?P<slave>\S+) "
                   r"metrics=(?P<metrics>\S+)(?: grpc=\S+)?$", re.MULTILINE)


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[re.Match[str]]:
    tmp = tmp_path_factory.mktemp("ha-up")
    proc: ManagedProcess = start_process(
        [*rocketq_command(), "up", "--data-dir", str(tmp / "data"), "--namesrv-port", "0",
         "--broker-port", "0", "--replicas", "1", "--set", "metricsPort=0", *SMALL_STORE],
        name="rocketq-up-ha", log_dir=tmp / "logs")
    try:
        yield proc.wait_for(READY, 30.0)
        assert (tmp / "data" / "store-slave1" / "commitlog").is_dir()
    finally:
        assert proc.stop(20.0) == 0, proc.describe()


async def test_up_replicas_cluster_list_ha_status_and_metrics(group: re.Match[str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    admin = AdminRun(capsys, group["namesrv"])
    topic = unique_name("HaOp")
    async with RemotingClient() as client:
        await create_topic(client, group["broker"], topic, read=2, write=2)
        for i in range(20):
            assert (await send_message(client, group["broker"], topic, b"x" * 100, queue_id=i % 2)).code == 0

    def replicated() -> dict[str, object]:
        info = admin.json("haStatus", "-b", group["broker"])[0]
        assert info["master"] is True
        [slave] = info["haConnectionInfo"]
        assert slave["slaveAckOffset"] == info["masterCommitLogMaxOffset"] > 0 and slave["diff"] == 0
        return info

    await wait_until(replicated, timeout=30)
    [slave] = admin.json("haStatus", "-b", group["slave"])
    assert slave["master"] is False and slave["haClientRuntimeInfo"]["isActivated"] is True
    rows = {r["brokerId"]: r for r in admin.json("clusterList")}
    assert rows[0]["role"] == "ASYNC_MASTER" and rows[1]["role"] == "SLAVE"
    assert rows[0]["addr"] == group["broker"] and rows[1]["addr"] == group["slave"]
    assert rows[0]["replicationLagBytes"] == 0
    assert "#SlaveAckOffset" in admin.raw("haStatus")[1]

    data = samples(group["metrics"])
    assert one(data, "rocketq_replication_slaves") == 1
    assert one(data, "rocketq_replication_lag_bytes") == 0
