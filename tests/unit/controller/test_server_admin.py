"""The controller's admin requests, handler by handler on a one-node controller (its Raft elects
itself): ELECT_MASTER's Java body, CLEAN_BROKER_DATA's refusals, GET/UPDATE_CONTROLLER_CONFIG and
the Prometheus series."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from tests.harness import free_port_pair, wait_until

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.controller.server import ControllerServer


@pytest.fixture
async def ctl() -> AsyncIterator[ControllerServer]:
    addr = f"127.0.0.1:{free_port_pair()}"
    server = ControllerServer(addr, [addr])
    await server.start()
    try:
        await wait_until(lambda: server.raft is not None and server.raft.is_leader, timeout=30)
        yield server
    finally:
        await server.shutdown()


def req(code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
    return RemotingCommand.request(code, ext, body)


async def register(ctl: ControllerServer, broker_id: int, addr: str) -> None:
    ids = {"clusterName": "C", "brokerName": "g"}
    r = await ctl.apply_broker_id(req(RequestCode.CONTROLLER_APPLY_BROKER_ID, appliedBrokerId=str(broker_id),
                                      registerCheckCode=f"code-{broker_id}", **ids), None)
    assert r.code == 0, r.remark
    r = await ctl.register_broker(req(RequestCode.CONTROLLER_REGISTER_BROKER, brokerId=str(broker_id),
                                      brokerAddress=addr, **ids), None)
    assert r.code == 0, r.remark


async def elect(ctl: ControllerServer, broker_id: int, designate: bool = False) -> RemotingCommand:
    return await ctl.elect_master(req(RequestCode.CONTROLLER_ELECT_MASTER, clusterName="C", brokerName="g",
                                      brokerId=str(broker_id), designateElect=str(designate).lower()), None)


async def test_elect_answers_java_elect_master_response_body(ctl: ControllerServer) -> None:
    await register(ctl, 1, "h:1")
    await register(ctl, 2, "h:2")
    r = await elect(ctl, 1)
    assert r.code == 0 and r.ext("masterAddress") == "h:1" and r.ext("masterEpoch") == "1"
    body = orjson.loads(r.body_bytes())
    group = {"cluster": "C", "brokerName": "g", "brokerAddrs": {"1": "h:1", "2": "h:2"}}
    assert body == {"brokerMemberGroup": group, "syncStateSet": [1]}
    # an admin naming a broker outside the SyncStateSet: refused, the master stays
    assert (await elect(ctl, 2, designate=True)).code == 2012
    assert (await elect(ctl, 1, designate=True)).code == 2011  # it is the master already
    r = ctl.get_sync_state_data(req(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, orjson.dumps(["g"])), None)
    info = orjson.loads(r.body_bytes())["replicasInfoTable"]["g"]
    master = {"brokerName": "g", "brokerId": 1, "brokerAddress": "h:1", "alive": True}
    assert info["inSyncReplicas"] == [master]
    assert [m["brokerId"] for m in info["notInSyncReplicas"]] == [2]


async def test_clean_broker_data_refuses_living_members_unless_told(ctl: ControllerServer) -> None:
    await register(ctl, 1, "h:1")
    await register(ctl, 2, "h:2")
    assert (await elect(ctl, 1)).code == 0

    async def clean(**ext: str) -> RemotingCommand:
        return await ctl.clean_broker_data(req(RequestCode.CLEAN_BROKER_DATA, clusterName="C", **ext), None)

    r = await clean(brokerName="g")
    assert r.code == 2009 and "still alive" in (r.remark or "")
    r = await clean(brokerName="g", brokerControllerIdsToClean="2")
    assert r.code == 2009 and "[g, 2]" in (r.remark or "")
    assert (await clean(brokerName="g", brokerControllerIdsToClean="x")).code == 2009
    assert (await clean(brokerName="nope", isCleanLivingBroker="true")).code == 2009
    assert (await clean(brokerName="g", brokerControllerIdsToClean="2", isCleanLivingBroker="true")).code == 0
    assert set(ctl.raft.state.groups["g"].brokers) == {1}  # type: ignore[union-attr]
    assert (await clean(brokerName="g", isCleanLivingBroker="true")).code == 0
    assert "g" not in ctl.raft.state.groups  # type: ignore[union-attr]


async def test_controller_config_get_and_update(ctl: ControllerServer) -> None:
    def config() -> dict[str, str]:
        text = ctl.get_controller_config(req(RequestCode.GET_CONTROLLER_CONFIG), None).body_bytes().decode()
        return dict(line.split("=", 1) for line in text.splitlines())

    assert config()["enableElectUncleanMaster"] == "false" and config()["controllerAddr"] == ctl.address

    def update(text: str) -> RemotingCommand:
        return ctl.update_controller_config(req(RequestCode.UPDATE_CONTROLLER_CONFIG, text.encode()), None)

    assert update("enableElectUncleanMaster=maybe\n").code == 2005
    r = update("enableElectUncleanMaster=true\ncontrollerStorePath=/x\n")
    assert r.code == ResponseCode.NO_PERMISSION and "controllerStorePath" in (r.remark or "")
    assert not ctl.unclean_elect  # nothing changed when a key is refused
    assert update("enableElectUncleanMaster=true\n").code == 0
    assert ctl.unclean_elect and config()["enableElectUncleanMaster"] == "true"


async def test_metric_families_report_leader_epoch_and_sets(ctl: ControllerServer) -> None:
    await register(ctl, 1, "h:1")
    await register(ctl, 2, "h:2")
    assert (await elect(ctl, 1)).code == 0
    # the slave caught up with the master: the leader's scan adds it to the set
    await ctl._scan()  # the first scan as leader starts a fresh view of the heartbeats
    now = int(time.monotonic() * 1000)
    ctl.heartbeats.beat("g", 1, "h:1", now, epoch=1, max_offset=100)
    ctl.heartbeats.beat("g", 2, "h:2", now, epoch=1, max_offset=100)
    await ctl._scan()

    def values() -> dict[str, Any]:
        return {f.name: {tuple(s.labels.values()): s.value for s in f.samples} for f in ctl.metric_families()}

    await wait_until(lambda: values()["rocketq_controller_sync_state_set_size"][(ctl.address, "g")] == 2)
    v = values()
    assert v["rocketq_controller_is_leader"] == {(ctl.address,): 1}
    assert v["rocketq_controller_master_epoch"] == {(ctl.address, "g"): 1}
    assert v["rocketq_controller_replicas"] == {(ctl.address, "g"): 2}
    assert v["rocketq_controller_has_master"] == {(ctl.address, "g"): 1}
    assert v["rocketq_controller_alive_replicas"] == {(ctl.address, "g"): 2}


async def test_standalone_endpoint_serves_the_series(ctl: ControllerServer) -> None:
    """`rocketq controller --metrics-port`: the series and the process's, over HTTP."""
    import asyncio
    import urllib.request

    from rocketq.controller.metrics import ControllerMetrics

    metrics = ControllerMetrics(ctl)
    await metrics.start("127.0.0.1", 0)
    try:
        def scrape() -> str:
            with urllib.request.urlopen(f"http://{metrics.address}/metrics", timeout=10) as resp:
                return str(resp.read().decode())

        text = await asyncio.to_thread(scrape)
    finally:
        await metrics.stop()
    assert f'rocketq_controller_is_leader{{controller="{ctl.address}"}} 1.0' in text
    assert "process_cpu_seconds_total" in text
