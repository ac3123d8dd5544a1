"""How `rocketq up|namesrv|broker` turns flags, a config file and the environment into configs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rocketq.cli.assembly import ServeOptions, build_plan, replica_configs
from rocketq.config import BrokerConfig, NamesrvConfig
from rocketq.errors import ConfigError
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store.config import MessageStoreConfig

DEFAULT_BROKER_PORT = RemotingServerConfig().listen_port


def _plan(tmp_path: Path, role: str = "up", env: dict[str, str] | None = None, **kw: object):  # type: ignore[no-untyped-def]
    return build_plan(ServeOptions(role=role, data_dir=str(tmp_path / "data"), **kw), env or {})  # type: ignore[arg-type]


def test_up_defaults_live_under_the_data_dir_and_wire_the_embedded_namesrv(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    data = tmp_path / "data"
    assert plan.data_dir == data
    assert plan.namesrv.listen_port == 9876
    assert plan.namesrv_server.listen_port == 9876
    assert plan.broker_server.listen_port == DEFAULT_BROKER_PORT == 10911
    assert plan.namesrv.kv_config_path == str(data / "namesrv" / "kvConfig.json")
    assert plan.namesrv.config_store_path == str(data / "namesrv" / "namesrv.properties")
    assert Path(plan.store.store_path_root_dir) == data / "store"
    assert plan.broker.broker_ip1 == "127.0.0.1"
    assert plan.use_embedded_namesrv and plan.broker.namesrv_addr is None
    assert plan.broker_server.bind_address == plan.namesrv_server.bind_address == "127.0.0.1"


def test_port_flags_and_port_zero(tmp_path: Path) -> None:
    plan = _plan(tmp_path, namesrv_port=0, broker_port=0)
    ports = (plan.namesrv.listen_port, plan.namesrv_server.listen_port, plan.broker_server.listen_port)
    assert ports == (0, 0, 0)


def test_flat_listen_port_is_the_brokers_in_up_and_a_section_reaches_the_namesrv(tmp_path: Path) -> None:
    plan = _plan(tmp_path, sets=("listenPort=12000", "namesrv.listenPort=9000"))
    assert plan.broker_server.listen_port == 12000
    assert plan.namesrv.listen_port == 9000 and plan.namesrv_server.listen_port == 9000


def test_dedicated_flags_beat_set_which_beats_env_and_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=1\nbrokerName=file\nregionId=file\n")
    env = {"ROCKETQ_LISTEN_PORT": "2", "ROCKETQ_BROKER_NAME": "env"}
    plan = _plan(tmp_path, env=env, config_file=str(conf), sets=("listenPort=3",), broker_port=4)
    assert plan.broker_server.listen_port == 4
    assert plan.broker.broker_name == "env" and plan.broker.region_id == "file"


def test_namesrv_addr_from_flag_or_environment_disables_the_embedded_wiring(tmp_path: Path) -> None:
    plan = _plan(tmp_path, namesrv_addr="10.0.0.1:9876;10.0.0.2:9876")
    assert not plan.use_embedded_namesrv
    assert plan.broker.namesrv_addr_list == ("10.0.0.1:9876", "10.0.0.2:9876")
    plan = _plan(tmp_path, env={"NAMESRV_ADDR": "10.0.0.3:9876"})
    assert not plan.use_embedded_namesrv and plan.broker.namesrv_addr == "10.0.0.3:9876"


def test_a_config_file_can_move_every_derived_path(tmp_path: Path) -> None:
    conf = tmp_path / "rocketq.toml"
    conf.write_text(
        f'storePathRootDir = "{tmp_path / "elsewhere"}"\n'
        f'[namesrv]\nkvConfigPath = "{tmp_path / "kv.json"}"\n'
    )
    plan = _plan(tmp_path, config_file=str(conf))
    assert Path(plan.store.store_path_root_dir) == tmp_path / "elsewhere"
    assert plan.namesrv.kv_config_path == str(tmp_path / "kv.json")


def test_host_binds_and_is_advertised_unless_it_is_a_wildcard(tmp_path: Path) -> None:
    plan = _plan(tmp_path, host="0.0.0.0")
    assert plan.broker_server.bind_address == "0.0.0.0"
    assert plan.broker.broker_ip1 == "127.0.0.1"
    plan = _plan(tmp_path, host="127.0.0.2")
    assert plan.namesrv_server.bind_address == "127.0.0.2"
    assert plan.broker.broker_ip1 == "127.0.0.2"
    plan = _plan(tmp_path, host="127.0.0.2", sets=("brokerIP1=192.0.2.7",))
    assert plan.broker.broker_ip1 == "192.0.2.7"


def test_namesrv_role_has_only_namesrv_configs(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=19876\norderMessageEnable=true\n")
    plan = _plan(tmp_path, role="namesrv", config_file=str(conf))
    assert plan.broker is None and plan.store is None and plan.broker_server is None
    assert plan.namesrv.listen_port == plan.namesrv_server.listen_port == 19876
    assert plan.namesrv.order_message_enable is True


def test_broker_role_has_no_namesrv_and_tolerates_namesrv_environment(tmp_path: Path) -> None:
    plan = _plan(tmp_path, role="broker", env={"ROCKETQ_KV_CONFIG_PATH": "/x/kv.json", "NAMESRV_ADDR": "a:1"})
    assert plan.namesrv is None and not plan.use_embedded_namesrv
    assert plan.broker.namesrv_addr == "a:1"
    with pytest.raises(ConfigError, match="orderMessageEnable"):
        _plan(tmp_path, role="broker", sets=("orderMessageEnable=true",))


def test_configs_are_the_real_classes(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert isinstance(plan.namesrv, NamesrvConfig) and isinstance(plan.broker, BrokerConfig)
    assert isinstance(plan.store, MessageStoreConfig) and isinstance(plan.broker_server, RemotingServerConfig)
    # the name server's transport is the broker's with the name server's port
    same_port = dataclasses.replace(plan.namesrv_server, listen_port=plan.broker_server.listen_port)
    assert same_port == plan.broker_server


def test_a_java_broker_conf_with_keys_rocketq_does_not_act_on_loads(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nsendMessageThreadPoolNums=16\nhaListenPort=20912\n"
                    "transientStorePoolEnable=true\nuseTLS=false\n")
    plan = _plan(tmp_path, role="broker", config_file=str(conf))
    assert plan.broker.broker_name == "b1"
    assert plan.java is not None
    assert plan.java.send_message_thread_pool_nums == 16
    assert plan.store is not None and plan.store.ha_listen_port == 20912  # honoured since replication
    assert plan.java.transient_store_pool_enable is True


def test_up_replicas_are_slaves_with_their_own_store_and_ports(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "up", broker_port=10911, replicas=2, sets=("brokerName=g", "metricsPort=9100"))
    assert plan.replicas == 2 and plan.broker is not None
    broker, store, server = replica_configs(plan, plan.broker, 2)
    assert (broker.broker_name, broker.broker_id, broker.broker_role) == ("g", 2, "SLAVE")
    assert store.store_path_root_dir == str(tmp_path / "data" / "store") + "-slave2"
    assert (server.listen_port, broker.metrics_port) == (10931, 9102)
    free = _plan(tmp_path, "up", broker_port=0, replicas=1)
    assert free.broker is not None and replica_configs(free, free.broker, 1)[2].listen_port == 0


def test_up_replicas_of_a_slave_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--replicas"):
        _plan(tmp_path, "up", replicas=1, sets=("brokerRole=SLAVE", "brokerId=1"))
