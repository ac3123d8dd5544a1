"""GET_BROKER_CONFIG answers the key set of Apache RocketMQ 4.9.8's broker (issue 15): every field of
its BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig, as
``Configuration.getAllConfigsFormatString()`` writes them, with the live listen port; and no key
rocketq does not act on can change over the wire."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.java_4_9_8 import JAVA_4_9_8_KEYS, JAVA_NULL_BY_DEFAULT, ROCKETQ_ONLY
from tests.wire import in_process_cluster, invoke

from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.config import config_fields, parse_properties

pytestmark = pytest.mark.timeout(60)

async def test_get_broker_config_answers_java_4_9_8_key_for_key(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await invoke(client, broker.address, RequestCode.GET_BROKER_CONFIG)
        assert r.code == ResponseCode.SUCCESS, r.remark
        got = {s.key: str(s.value) for s in parse_properties(r.body_bytes().decode())}
        expected = set(JAVA_4_9_8_KEYS) - JAVA_NULL_BY_DEFAULT
        assert sorted(expected - set(got)) == []
        assert sorted(set(got) - expected - {"namesrvAddr"}) == sorted(ROCKETQ_ONLY)
        # live values where rocketq has the field, Java's defaults for the rest, the live port
        assert got["listenPort"] == str(broker.listen_port) != "0"
        assert got["brokerName"] == broker.broker_config.broker_name
        assert got["storePathRootDir"] == broker.store_config.store_path_root_dir
        assert got["haListenPort"] == str(broker.replication.service.port) != "0"
        assert got["useTLS"] == "false"
        assert got["configBlackList"] == "configBlackList;brokerConfigPath"
        assert got["isEnableBatchPush"] == "false" and got["enableDLegerCommitLog"] == "false"


async def test_no_key_rocketq_does_not_honour_can_be_updated(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        before = (await invoke(client, broker.address, RequestCode.GET_BROKER_CONFIG)).body_bytes()
        for f in config_fields(JavaOnlyConfig).values():
            assert not f.honoured
            body = f"{f.key}=1\n".encode()
            r = await invoke(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=body)
            assert r.code == ResponseCode.NO_PERMISSION, (f.key, r.remark)
            remark = r.remark or ""
            assert f.key in remark and ("not honoured" in remark or "path or command" in remark), remark
        assert (await invoke(client, broker.address, RequestCode.GET_BROKER_CONFIG)).body_bytes() == before


async def test_an_accepted_update_is_written_to_broker_properties(tmp_path: Path) -> None:
    """As Java's Configuration.persist: the whole configuration, after each accepted update."""
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        path = Path(broker.store_config.store_path_root_dir) / "config" / "broker.properties"
        assert not path.exists()  # nothing changed yet
        r = await invoke(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=b"regionId=Mars\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        written = {s.key: str(s.value) for s in parse_properties(path.read_text())}
        served = (await invoke(client, broker.address, RequestCode.GET_BROKER_CONFIG)).body_bytes().decode()
        assert written == {s.key: str(s.value) for s in parse_properties(served)}
        assert written["regionId"] == "Mars" and written["listenPort"] == str(broker.listen_port)
        # a refused update writes nothing
        path.unlink()
        r = await invoke(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=b"haListenPort=1\n")
        assert r.code == ResponseCode.NO_PERMISSION and not path.exists()
