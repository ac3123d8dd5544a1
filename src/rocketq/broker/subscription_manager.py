"""SubscriptionGroupManager: consumer-group configs and `config/subscriptionGroup.json`.

A group a client uses is created on first sight with RocketMQ's defaults when autoCreateSubscriptionGroup is
on (the default), or always for broker-internal `CID_RMQ_SYS_` groups. Changes bump the DataVersion and are
written by the file's one writer (atomically, coalesced, in a worker thread); an admin change is answered
once it is on disk (`persisted`), as RocketMQ persists before it answers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rocketq.codec.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper
from rocketq.configfile import ConfigFileWriter, read_candidates, remove_stale_temps
from rocketq.errors import ProtocolError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.subscription")

CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"

# Groups every RocketMQ broker knows from the start (not written to disk unless changed).
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_SYS_RMQ_TRANS,
)


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


class SubscriptionGroupManager:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.forbidden_table: dict[str, dict[str, int]] = {}
        self.data_version = DataVersion()
        self._writer = ConfigFileWriter(self.path, self.encode)
        for group in SYSTEM_GROUPS:
            self.table[group] = SubscriptionGroupConfig(group_name=group)

    @property
    def path(self) -> Path:
        root = Path(self._ctl.store_config.store_path_root_dir).expanduser()
        return root / "config" / "subscriptionGroup.json"

    # -- lookups -----------------------------------------------------------------------------

    def contains(self, group: str) -> bool:
        return group in self.table

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created with RocketMQ defaults when allowed."""
        config = self.table.get(group)
        if config is not None:
            return config
        if not (self._ctl.broker_config.auto_create_subscription_group or is_sys_consumer_group(group)):
            return None
        if not group:
            return None
        config = SubscriptionGroupConfig(group_name=group)
        self.table[group] = config
        log.info("auto create a subscription group, %s", config)
        self._changed()
        return config

    # -- changes -----------------------------------------------------------------------------

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        old = self.table.get(config.group_name)
        self.table[config.group_name] = config
        if old is None:
            log.info("create new subscription group, %s", config)
        else:
            log.info("update subscription group config, old: %s new: %s", old, config)
        self._changed()

    def update_subscription_group_configs(self, configs: Iterable[SubscriptionGroupConfig]) -> None:
        for config in configs:
            self.table[config.group_name] = config
            log.info("create or update subscription group, %s", config)
        self._changed()

    def delete_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        old = self.table.pop(group, None)
        self.forbidden_table.pop(group, None)
        if old is not None:
            log.info("delete subscription group OK, subscription group:%s", old)
            self._changed()
        else:
            log.warning("delete subscription group failed, subscription groupName: %s not exist", group)
        return old

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version()
        self._writer.changed()

    async def persisted(self) -> None:
        """Wait until every change made so far is on disk; SystemError_ if its write failed."""
        await self._writer.settled()

    # -- persistence -------------------------------------------------------------------------

    def encode(self) -> bytes:
        return SubscriptionGroupWrapper(
            subscription_group_table=dict(self.table),
            forbidden_table={g: dict(t) for g, t in self.forbidden_table.items()},
            data_version=self.data_version,
        ).to_json()

    def decode(self, data: bytes) -> None:
        wrapper = SubscriptionGroupWrapper.from_json(data)
        self.table.update(wrapper.subscription_group_table)
        self.forbidden_table = {g: dict(t) for g, t in wrapper.forbidden_table.items()}
        self.data_version = wrapper.data_version

    def replace_all(self, wrapper: SubscriptionGroupWrapper) -> None:
        """A slave takes its master's groups and data version (SlaveSynchronize)."""
        self.table.clear()
        self.table.update(wrapper.subscription_group_table)
        self.forbidden_table = {g: dict(t) for g, t in wrapper.forbidden_table.items()}
        self.data_version = wrapper.data_version
        self._writer.changed()

    def load(self) -> bool:
        remove_stale_temps(self.path)
        for candidate, data in read_candidates(self.path):
            try:
                self.decode(data)
            except (ProtocolError, ValueError, TypeError) as exc:
                log.warning("load %s failed: %s", candidate, exc)
                continue
            log.info("load subscription groups OK, %s, %d groups", candidate, len(self.table))
            return True
        if self.path.exists():
            log.error("load subscription groups failed: neither %s nor its backup is readable", self.path)
            return False
        return True

    def persist(self) -> None:
        """Write the table now, synchronously (no event loop: tools and tests)."""
        self._writer.write_now()

    async def flush(self) -> None:
        """Write the latest table and wait for it (shutdown)."""
        await self._writer.write()
