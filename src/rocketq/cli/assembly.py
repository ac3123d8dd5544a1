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
from typing import Any, Literal

from rocketq.broker.config import BrokerConfig
from rocketq.cli.errors import CliError
from rocketq.config import ConfigSet, Setting, load_configs
from rocketq.namesrv.config import NamesrvConfig

Role = Literal["up", "namesrv", "broker"]

DEFAULT_DATA_DIR = "rocketq-data"
DEFAULT_HOST = "127.0.0.1"
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}
# RemotingServerConfig's name for the address to bind, whichever spelling the transport chose.
_HOST_FIELDS = ("bind_address", "listen_host", "host", "bind_host")


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
    namesrv_addr: str | None = None


@dataclass(frozen=True, slots=True)
class ServePlan:
    """The config objects each server of the process is built from."""

    role: Role
    data_dir: Path
    configs: ConfigSet
    namesrv: NamesrvConfig | None = None
    namesrv_server: Any = None  # RemotingServerConfig
    broker: BrokerConfig | None = None
    store: Any = None  # MessageStoreConfig
    broker_server: Any = None  # RemotingServerConfig
    # up: the broker registers with the embedded name server (no namesrvAddr was given)
    use_embedded_namesrv: bool = False


def server_config_classes() -> tuple[type, type]:
    """(MessageStoreConfig, RemotingServerConfig), imported only when a server is wanted."""
    try:
        from rocketq.remoting.config import RemotingServerConfig
        from rocketq.store.config import MessageStoreConfig
    except ImportError as exc:
        raise CliError(f"this build of rocketq has no server configuration yet ({exc})") from None
    return MessageStoreConfig, RemotingServerConfig


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _host_field(server_cls: type) -> str | None:
    names = _field_names(server_cls)
    return next((n for n in _HOST_FIELDS if n in names), None)


def build_plan(
    opts: ServeOptions,
    environ: Mapping[str, str] | None = None,
    *,
    store_cls: type | None = None,
    server_cls: type | None = None,
) -> ServePlan:
    """Load and cross-wire the configs for ``opts.role``; raises ConfigError on a bad key or value."""
    if store_cls is None or server_cls is None:
        store_cls, server_cls = server_config_classes()
    data_dir = Path(opts.data_dir).expanduser().absolute()
    host = opts.host if opts.host is not None else DEFAULT_HOST
    host_field = _host_field(server_cls)
    if opts.host is not None and host_field is None and host != DEFAULT_HOST:
        raise CliError(f"--host: {server_cls.__name__} has no bind address field", exit_code=2)

    namesrv_dir = data_dir / "namesrv"
    baseline: dict[type, dict[str, object]] = {
        NamesrvConfig: {
            "kv_config_path": str(namesrv_dir / "kvConfig.json"),
            "config_store_path": str(namesrv_dir / "namesrv.properties"),
        },
        BrokerConfig: {"broker_ip1": DEFAULT_HOST if host in _WILDCARD_HOSTS else host.strip("[]")},
        store_cls: _store_baseline(store_cls, data_dir / "store"),
        server_cls: {host_field: host} if host_field else {},
    }

    flags: list[Setting] = []
    if opts.namesrv_port is not None:
        flags.append(Setting("listenPort", opts.namesrv_port, "--namesrv-port", NamesrvConfig))
    if opts.broker_port is not None:
        flags.append(Setting("listenPort", opts.broker_port, "--broker-port", server_cls))
    if opts.namesrv_addr is not None:
        flags.append(Setting("namesrvAddr", opts.namesrv_addr, "-n", BrokerConfig))
    if opts.host is not None and host_field is not None:
        flags.append(Setting(host_field, opts.host, "--host", server_cls))

    if opts.role == "namesrv":
        primary: list[type] = [NamesrvConfig, server_cls]
        secondary: list[type] = []
    else:
        primary = [BrokerConfig, store_cls, server_cls]
        secondary = [NamesrvConfig] if opts.role == "up" else []
    configs = load_configs(
        primary,
        secondary=secondary,
        file=opts.config_file,
        environ=os.environ if environ is None else environ,
        overrides=opts.sets,
        settings=flags,
        baseline=baseline,
        env_tolerated=[NamesrvConfig, BrokerConfig, store_cls, server_cls],
    )
    server: Any = configs[server_cls]
    if opts.role == "namesrv":
        ns = configs[NamesrvConfig]
        return ServePlan(
            "namesrv", data_dir, configs, namesrv=ns,
            namesrv_server=dataclasses.replace(server, listen_port=ns.listen_port),
        )
    store = _derive_store_paths(configs, store_cls)
    plan = ServePlan(
        opts.role, data_dir, configs, broker=configs[BrokerConfig], store=store, broker_server=server
    )
    if opts.role == "broker":
        return plan
    ns = configs[NamesrvConfig]
    return dataclasses.replace(
        plan,
        namesrv=ns,
        namesrv_server=dataclasses.replace(server, listen_port=ns.listen_port),
        use_embedded_namesrv=configs.origin(BrokerConfig, "namesrv_addr") is None,
    )


def _store_baseline(store_cls: type, root: Path) -> dict[str, object]:
    names = _field_names(store_cls)
    base: dict[str, object] = {}
    if "store_path_root_dir" in names:
        base["store_path_root_dir"] = str(root)
    if _has_concrete_default(store_cls, "store_path_commit_log"):
        base["store_path_commit_log"] = str(root / "commitlog")
    return base


def _has_concrete_default(cls: type, name: str) -> bool:
    """True when the field exists and defaults to a path of its own rather than 'under the root'."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return bool(f.default)
            if f.default_factory is not dataclasses.MISSING:
                return bool(f.default_factory())
    return False


def _derive_store_paths(configs: ConfigSet, store_cls: type) -> Any:
    # RocketMQ 4.x's classic trap: moving storePathRootDir leaves storePathCommitLog in the old place.
    # When only the root was given, the commit log follows it.
    store: Any = configs[store_cls]
    if (
        _has_concrete_default(store_cls, "store_path_commit_log")
        and configs.origin(store_cls, "store_path_root_dir") is not None
        and configs.origin(store_cls, "store_path_commit_log") is None
    ):
        root = Path(str(store.store_path_root_dir))
        store = dataclasses.replace(store, store_path_commit_log=str(root / "commitlog"))
    return store
