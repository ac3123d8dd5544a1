"""Typed configuration with RocketMQ's key names, defaults and sources (DESIGN principle 7).

Every knob is a field of a frozen dataclass owned by the layer that uses it — ``RemotingServerConfig``
(remoting), ``MessageStoreConfig`` (store), ``NamesrvConfig`` (namesrv), ``BrokerConfig`` (broker) — and
its name is the snake_case of RocketMQ's camelCase key (``flushDiskType`` <-> ``flush_disk_type``). This
package is the framework they all use, so it imports no layer:

* :mod:`~rocketq.config.keys` — key spelling both ways;
* :mod:`~rocketq.config.fields` — declaring a field once, with its default and whether it is
  ``runtime_updatable``, ``restart_required`` or ``not_honoured`` yet; coercion from text;
* :mod:`~rocketq.config.sources` — properties text (both ways), TOML, environment, ``--set``;
* :mod:`~rocketq.config.loading` — routing a flat key space over several classes, ``load_configs``;
* :mod:`~rocketq.config.runtime` — UPDATE_*_CONFIG: which keys may change, and the one change
  listener a running server applies them through.

``BrokerConfig`` and ``NamesrvConfig`` are still importable from here (they lived here before each
layer owned its config); they are resolved on first use, so importing the framework from the store
or the transport never pulls in a layer above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketq.config.fields import (
    ConfigField,
    Update,
    config_fields,
    invalid,
    not_honoured,
    restart_required,
    rocketmq_key,
    runtime_updatable,
)
from rocketq.config.keys import camel_to_snake, snake_to_camel
from rocketq.config.loading import ConfigSet, load_configs
from rocketq.config.runtime import ConfigChange, RuntimeConfig, check_updatable, plan_update, update_configs
from rocketq.config.sources import (
    ENV_PREFIX,
    NOT_CONFIG_ENV,
    Setting,
    dump_properties,
    parse_properties,
    read_config_file,
)

if TYPE_CHECKING:
    from rocketq.broker.config import BrokerConfig
    from rocketq.namesrv.config import NamesrvConfig

__all__ = [
    "ENV_PREFIX",
    "NOT_CONFIG_ENV",
    "BrokerConfig",
    "ConfigChange",
    "ConfigField",
    "ConfigSet",
    "NamesrvConfig",
    "RuntimeConfig",
    "Setting",
    "Update",
    "camel_to_snake",
    "check_updatable",
    "config_fields",
    "dump_properties",
    "invalid",
    "load_configs",
    "not_honoured",
    "parse_properties",
    "plan_update",
    "read_config_file",
    "restart_required",
    "rocketmq_key",
    "runtime_updatable",
    "snake_to_camel",
    "update_configs",
]


def __getattr__(name: str) -> Any:
    # The two server configs moved to their layers; resolving them lazily keeps the old import
    # path without making this package (which store and remoting import) depend upward.
    if name == "BrokerConfig":
        from rocketq.broker.config import BrokerConfig

        return BrokerConfig
    if name == "NamesrvConfig":
        from rocketq.namesrv.config import NamesrvConfig

        return NamesrvConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
