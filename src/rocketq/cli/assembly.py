"""From command-line flags, a config file and the environment to the config objects of each server.

Pure (no servers, no event loop), so every rule here is unit-tested:

* the flat key space of ``-c``/``ROCKETQ_*``/``--set`` goes to the broker's classes (BrokerConfig,
  MessageStoreConfig, RemotingServerConfig); in ``up`` a key only NamesrvConfig has goes to the name
  server (``namesrv.KEY`` addresses it explicitly);
* what the CLI derives sits *below* every source: paths under ``--data-dir``, the bind host,
  ``brokerIP1`` = ``--host`` (127.0.0.1 for a wildcard host);
* the dedicated flags (``--namesrv-port``, ``--broker-port``, ``-n``, ``--host``) sit *above* ``--set``;
* the name server listens on NamesrvConfig.listenPort with the transport knobs of
  RemotingServerConfig (in ``up`` the broker's, as there is one flat key space).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rocketq.broker.config import BrokerConfig
from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.config import ConfigSet, Setting, load_configs
from rocketq.errors import ConfigError
from rocketq.namesrv.config import NamesrvConfig

if TYPE_CHECKING:
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig

Role = Literal["up", "namesrv", "broker"]

DEFAULT_DATA_DIR = "rocketq-data"
DEFAULT_HOST = "127.0.0.1"
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What the command line asked for (None: not given)."""

    role: Role
    data_dir: str = DEFAULT_DATA_DIR
    config_file: str | None = None
    sets: tuple[str, ...] = ()
    host: str | None = None
    namesrv_port: int | None = None
    broker_port: int | None = None
    grpc_port: int | None = None
    namesrv_addr: str | None = None
    replicas: int = 0  # up: slaves of the broker, each with its own store (docs/ha.md)
    controller: bool = False  # up: a controller, and the broker and its slaves in controller mode


@dataclass(frozen=True, slots=True)
class ServePlan:
    """The config objects each server of the process is built from."""

    role: Role
    data_dir: Path
    configs: ConfigSet
    namesrv: NamesrvConfig | None = None
    namesrv_server: RemotingServerConfig | None = None
    broker: BrokerConfig | None = None
    store: MessageStoreConfig | None = None
    broker_server: RemotingServerConfig | None = None
    java: JavaOnlyConfig | None = None  # Java's keys rocketq accepts but does not act on
    # up: the broker registers with the embedded name server (no namesrvAddr was given)
    use_embedded_namesrv: bool = False
    replicas: int = 0  # up: slaves started beside the broker (replica_plan)
    controller: bool = False  # up --controller: an embedded controller (docs/ha.md)


def server_config_classes() -> tuple[type[MessageStoreConfig], type[RemotingServerConfig]]:
    """(MessageStoreConfig, RemotingServerConfig), imported only when a server is wanted (importing
    the store's package maps nothing, but loads the whole store)."""
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig

    return MessageStoreConfig, RemotingServerConfig


def build_plan(opts: ServeOptions, environ: Mapping[str, str] | None = None) -> ServePlan:
    """Load and cross-wire the configs for ``opts.role``; raises ConfigError on a bad key or value."""
    store_cls, server_cls = server_config_classes()
    data_dir = Path(opts.data_dir).expanduser().absolute()
    host = opts.host if opts.host is not None else DEFAULT_HOST

    namesrv_dir = data_dir / "namesrv"
    baseline: dict[type, dict[str, object]] = {
        NamesrvConfig: {
            "kv_config_path": str(namesrv_dir / "kvConfig.json"),
            "config_store_path": str(namesrv_dir / "namesrv.properties"),
        },
        BrokerConfig: {"broker_ip1": DEFAULT_HOST if host in _WILDCARD_HOSTS else host.strip("[]")},
        # storePathCommitLog stays unset: the commit log follows storePathRootDir wherever it is set
        store_cls: {"store_path_root_dir": str(data_dir / "store")},
        server_cls: {"bind_address": host},
    }

    flags: list[Setting] = []
    if opts.namesrv_port is not None:
        flags.append(Setting("listenPort", opts.namesrv_port, "--namesrv-port", NamesrvConfig))
    if opts.broker_port is not None:
        flags.append(Setting("listenPort", opts.broker_port, "--broker-port", server_cls))
    if opts.grpc_port is not None:
        flags.append(Setting("grpcPort", opts.grpc_port, "--grpc-port", BrokerConfig))
    if opts.namesrv_addr is not None:
        flags.append(Setting("namesrvAddr", opts.namesrv_addr, "-n", BrokerConfig))
    if opts.host is not None:
        flags.append(Setting("bindAddress", opts.host, "--host", server_cls))

    if opts.role == "namesrv":
        primary: list[type] = [NamesrvConfig, server_cls]
        secondary: list[type] = []
    else:
        primary = [BrokerConfig, store_cls, server_cls, JavaOnlyConfig]
        secondary = [NamesrvConfig] if opts.role == "up" else []
    configs = load_configs(
        primary,
        secondary=secondary,
        file=opts.config_file,
        environ=os.environ if environ is None else environ,
        overrides=opts.sets,
        settings=flags,
        baseline=baseline,
        env_tolerated=[NamesrvConfig, BrokerConfig, store_cls, server_cls, JavaOnlyConfig],
    )
    server = configs[server_cls]
    if opts.role == "namesrv":
        ns = configs[NamesrvConfig]
        return ServePlan(
            "namesrv", data_dir, configs, namesrv=ns,
            namesrv_server=dataclasses.replace(server, listen_port=ns.listen_port),
        )
    plan = ServePlan(opts.role, data_dir, configs, broker=configs[BrokerConfig], store=configs[store_cls],
                     broker_server=server, java=configs[JavaOnlyConfig])
    if opts.role == "broker":
        return plan
    ns = configs[NamesrvConfig]
    if opts.replicas and configs[BrokerConfig].is_slave:
        raise ConfigError("--replicas starts slaves of the broker of `up`, which must be a master")
    return dataclasses.replace(
        plan,
        namesrv=ns,
        namesrv_server=dataclasses.replace(server, listen_port=ns.listen_port),
        use_embedded_namesrv=configs.origin(BrokerConfig, "namesrv_addr") is None,
        replicas=opts.replicas,
        controller=opts.controller,
    )


def replica_configs(plan: ServePlan, broker: BrokerConfig, index: int
                    ) -> tuple[BrokerConfig, MessageStoreConfig, RemotingServerConfig]:
    """The configs of slave `index` (1, 2, ...) of `up --replicas`: the master's, as brokerId
    `index` in SLAVE role, with its own store beside the master's and its own ports (listenPort
    + 10 * index, RocketMQ's usual layout; free ports when the master's is 0)."""
    assert plan.store is not None and plan.broker_server is not None
    store = plan.store
    commit_log = f"{store.store_path_commit_log}-slave{index}" if store.store_path_commit_log else None
    port = plan.broker_server.listen_port
    return (
        dataclasses.replace(broker, broker_id=index, broker_role="SLAVE", grpc_port=-1,
                            metrics_port=broker.metrics_port + index if broker.metrics_port > 0
                            else broker.metrics_port),
        dataclasses.replace(store, store_path_root_dir=f"{store.store_path_root_dir}-slave{index}",
                            store_path_commit_log=commit_log, ha_listen_port=None),
        dataclasses.replace(plan.broker_server, listen_port=port + 10 * index if port else 0),
    )
