"""The controller's admin commands, metrics and dashboard section against `rocketq up --replicas 1
--controller` (docs/ha.md): getControllerMetaData, getSyncStateSet, get/updateControllerConfig,
cleanBrokerMetadata, and electMaster moving the master to the slave, after which pop is served
by the new master and refused by the old one. The controller's series are on the name server's
metrics endpoint (the controller runs in its process), the cluster page shows the SyncStateSet.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.harness import SMALL_STORE, AdminRun, rocketq_command, start_process, wait_until
from tests.integration.test_metrics import one, samples
from tests.wire import create_topic, get_all_topic_config, pop, send_message

from rocketq.admin import AdminClient
from rocketq.codec.codes import ResponseCode
from rocketq.dashboard.pages import cluster_page
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(180)

GROUP = "ctl-admin"
READY = re.compile(r"^READY (?P<fields>namesrv=\S+ broker=\S+ slave1=\S+ controller=\S+.*)$", re.MULTILINE)


async def test_controller_commands_metrics_dashboard_and_elect_master(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["up", "--replicas", "1", "--controller", "--namesrv-port", "0", "--broker-port", "0",
            "--data-dir", str(tmp_path / "data"), "--set", f"brokerName={GROUP}",
            "--set", "namesrv.metricsPort=0", *SMALL_STORE]
    proc = start_process([*rocketq_command(), *args], name="up-ctl-admin", log_dir=tmp_path / "logs")
    with proc:
        m = proc.wait_for(READY, 60)
        up = dict(f.split("=", 1) for f in m["fields"].split())
        ctl, broker, slave = up["controller"], up["broker"], up["slave1"]
        admin = AdminRun(capsys, up["namesrv"])

        def group() -> dict[str, object]:
            table = admin.json("getSyncStateSet", "-a", ctl, "-b", GROUP)["replicasInfoTable"]
            return table[GROUP]  # type: ignore[no-any-return]

        def master_with_set(addr: str, size: int) -> bool:
            g = group()
            return g["masterAddress"] == addr and len(g["inSyncReplicas"]) == size  # type: ignore[arg-type]

        await wait_until(lambda: master_with_set(broker, 2), timeout=60, interval=0.5)
        meta = admin.json("getControllerMetaData", "-a", ctl)
        assert meta["controllerLeaderAddress"] == ctl and meta["isLeader"] is True and meta["peers"] == [ctl]
        code, out, _ = admin.raw("getSyncStateSet", "-a", ctl, "-b", GROUP)
        assert code == 0 and "#SyncStateSetNums" in out and "InSyncReplica" in out
        cluster = admin.json("clusterList")[0]["clusterName"]
        assert GROUP in admin.json("getSyncStateSet", "-a", ctl, "-c", cluster)["replicasInfoTable"]
        before = group()
        ids = {r["brokerAddress"]: r["brokerId"] for r in before["inSyncReplicas"]}  # type: ignore[attr-defined]

        # the controller's own settings: one is changeable at runtime, the others are refused
        assert admin.json("getControllerConfig", "-a", ctl)[ctl]["enableElectUncleanMaster"] == "false"
        admin.json("updateControllerConfig", "-a", ctl, "-k", "enableElectUncleanMaster", "-v", "true")
        assert admin.json("getControllerConfig", "-a", ctl)[ctl]["enableElectUncleanMaster"] == "true"
        refused = admin.fails("updateControllerConfig", "-a", ctl, "-k", "controllerStorePath", "-v", "/x")
        assert "Can not update config controllerStorePath" in refused

        # a living group is not forgotten without -l; an unknown one is an error
        assert "still alive" in admin.fails("cleanBrokerMetadata", "-a", ctl, "-bn", GROUP, "-c", cluster)
        assert "not known" in admin.fails("cleanBrokerMetadata", "-a", ctl, "-bn", "no-such", "-c", cluster)
        assert "-c/--clusterName is required" in admin.fails("cleanBrokerMetadata", "-a", ctl, "-bn", GROUP,
                                                              code=2)

        # the controller's series, on the name server's endpoint of the same process
        data = samples(up["namesrvMetrics"])
        assert one(data, "rocketq_controller_is_leader", controller=ctl) == 1
        assert one(data, "rocketq_controller_sync_state_set_size", broker_name=GROUP) == 2
        assert one(data, "rocketq_controller_master_epoch", broker_name=GROUP) == before["masterEpoch"]
        assert one(data, "rocketq_controller_alive_replicas", broker_name=GROUP) == 2

        # the dashboard's cluster page finds the controllers through a broker's config
        async with AdminClient(up["namesrv"]) as client_admin:
            html = await cluster_page(client_admin)
        assert 'id="controller-leader"' in html and f"leader: {ctl}" in html
        assert f"{ids[slave]}@{slave}" in html and 'id="sync-state-sets"' in html

        async with RemotingClient() as client:
            topic, cg = "CtlAdminPop", "CtlAdminCG"
            assert (await create_topic(client, broker, topic, read=1, write=1)).code == 0
            assert (await send_message(client, broker, topic, b"m")).code == 0

            async def slave_has_topic() -> bool:
                return topic in await get_all_topic_config(client, slave)

            await wait_until(slave_has_topic, timeout=30, interval=0.5)

            elected = admin.json("electMaster", "-a", ctl, "-c", cluster, "-bn", GROUP, "-b", str(ids[slave]))
            assert elected["masterAddress"] == slave
            assert elected["masterEpoch"] == before["masterEpoch"] + 1  # type: ignore[operator]
            assert set(elected["brokerAddrs"].values()) == {broker, slave}
            await wait_until(lambda: master_with_set(slave, 2), timeout=60, interval=0.5)

            async def pop_code(addr: str) -> int:
                return (await pop(client, addr, cg, topic)).code

            # the members switch roles at their next round: pop follows the master
            await wait_until(lambda: _eq(pop_code(broker), ResponseCode.SERVICE_NOT_AVAILABLE), timeout=30)
            r = await pop(client, slave, cg, topic, poll_ms=1000)
            assert r.code == 0 and r.body

        # electing the master again is refused (it is the master)
        again = admin.fails("electMaster", "-a", ctl, "-c", cluster, "-bn", GROUP, "-b", str(ids[slave]))
        assert "CODE: 2011" in again
        # forced: the controllers forget the group
        admin.json("cleanBrokerMetadata", "-a", ctl, "-bn", GROUP, "-l")
        assert admin.json("getSyncStateSet", "-a", ctl, "-b", GROUP)["replicasInfoTable"] == {}


async def _eq(coro: object, want: object) -> bool:
    return bool(await coro == want)  # type: ignore[misc]
