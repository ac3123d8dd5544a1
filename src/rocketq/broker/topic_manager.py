"""TopicConfigManager: the broker's topic table, its system topics and `config/topics.json`.

Topic names, the system-topic set and the auto-create rules are RocketMQ's (TopicValidator,
TopicConfigManager). Every change bumps the DataVersion the name server compares, is written to
disk atomically and triggers an immediate re-registration through the `on_change` hook.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rocketq.codec.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType
from rocketq.codec.properties import reply_topic
from rocketq.codec.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_WHEEL_TIMER,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)
from rocketq.configfile import ConfigFileWriter, read_candidates, remove_stale_temps
from rocketq.errors import InvalidParameter, NoPermission, ProtocolError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.topic")

SCHEDULE_QUEUE_NUMS = 18

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

TOPIC_MAX_LENGTH = 127
# Retry and DLQ topics embed a group name (<= 120 chars) after their prefix.
RETRY_TOPIC_MAX_LENGTH = 255
VALID_TOPIC_PATTERN = "^[%|a-zA-Z0-9_-]+$"
_VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+").fullmatch


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + (
        "X" if perm & PERM_INHERIT else "-")


def check_topic_name(topic: str | None) -> str:
    """Validate a topic name as RocketMQ's TopicValidator does; raise InvalidParameter (29) if bad."""
    if not topic or not topic.strip():
        raise InvalidParameter("The specified topic is blank.")
    limit = (RETRY_TOPIC_MAX_LENGTH if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
             else TOPIC_MAX_LENGTH)
    if len(topic) > limit:
        raise InvalidParameter(
            f"The specified topic is longer than topic max length {limit}: {len(topic)} characters.")
    if _VALID_TOPIC(topic) is None:
        raise InvalidParameter(
            f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_TOPIC_PATTERN}")
    return topic


def check_send_allowed(topic: str) -> None:
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise NoPermission(f"Sending message to topic[{topic}] is forbidden.")


def new_topic_config(topic: str, read: int = 16, write: int = 16, perm: int = PERM_READ | PERM_WRITE,
                     *, topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG,
                     topic_sys_flag: int = 0,
                     order: bool = False, attributes: dict[str, str] | None = None) -> TopicConfig:
    return TopicConfig(
        topic_name=topic, read_queue_nums=read, write_queue_nums=write, perm=perm,
        topic_filter_type=topic_filter_type, topic_sys_flag=topic_sys_flag, order=order,
        attributes=dict(attributes or {}),
    )


class TopicConfigManager:
    """The broker's topic table (RocketMQ TopicConfigManager)."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.table: dict[str, TopicConfig] = {}
        self.system_topics: set[str] = set(SYSTEM_TOPICS)
        self._state_version = 0
        self._timestamp = int(time.time() * 1000)
        self._counter = 0
        # Set by the controller: called after every change (re-register with the name servers).
        self.on_change: Callable[[], None] | None = None
        self._writer = ConfigFileWriter(self.path, self.encode)
        self._add_system_topics()

    # -- paths and persistence -------------------------------------------------------------

    @property
    def path(self) -> Path:
        return Path(self._ctl.store_config.store_path_root_dir).expanduser() / "config" / "topics.json"

    @property
    def data_version(self) -> DataVersion:
        return DataVersion(state_version=self._state_version, timestamp=self._timestamp,
                           counter=self._counter)

    @property
    def changes(self) -> int:
        """Grows with every change of the table (compare two readings to see if one happened)."""
        return self._counter

    def _next_version(self) -> None:
        self._timestamp = int(time.time() * 1000)
        self._counter += 1

    def next_version(self) -> None:
        """A new data version with no topic changed, so that the name server takes the next
        registration as news: the broker's permission masks every topic's (RocketMQ does the same
        on UPDATE_BROKER_CONFIG brokerPermission)."""
        self._next_version()

    def serialize_wrapper(self, topics: Iterable[TopicConfig] | None = None) -> TopicConfigSerializeWrapper:
        table = {t.topic_name: t for t in (self.table.values() if topics is None else topics)}
        return TopicConfigSerializeWrapper(topic_config_table=table, data_version=self.data_version)

    def encode(self) -> bytes:
        return self.serialize_wrapper().to_json()

    def load(self) -> None:
        """Read config/topics.json (falling back to the .bak copy); system topics are kept."""
        remove_stale_temps(self.path)
        for candidate, data in read_candidates(self.path):
            try:
                wrapper = TopicConfigSerializeWrapper.from_json(data)
            except ProtocolError as exc:
                log.warning("load %s failed: %s", candidate, exc)
                continue
            for name, cfg in wrapper.topic_config_table.items():
                self.table[name] = cfg
            dv = wrapper.data_version
            self._state_version, self._timestamp, self._counter = dv.state_version, dv.timestamp, dv.counter
            log.info("load topic config OK, %s, %d topics", candidate, len(wrapper.topic_config_table))
            break
        self._add_system_topics(overwrite=False)

    def replace_all(self, table: dict[str, TopicConfig], version: DataVersion) -> None:
        """A slave takes its master's table and data version (SlaveSynchronize)."""
        self.table.clear()
        self.table.update(table)
        self._state_version, self._timestamp, self._counter = version.state_version, version.timestamp, \
            version.counter
        self._writer.changed()
        if self.on_change is not None:
            self.on_change()

    def persist(self) -> None:
        """Write the table now, synchronously (no event loop: start-up tools and tests)."""
        self._writer.write_now()

    def _changed(self) -> None:
        self._next_version()
        self._writer.changed()
        if self.on_change is not None:
            self.on_change()

    async def persisted(self) -> None:
        """Wait until every change made so far is on disk; SystemError_ if its write failed.

        Whoever acknowledges a change awaits this first: a topic acknowledged and then lost to a
        kill -9 would orphan the messages already acknowledged on it, or bring a deleted one back.
        """
        await self._writer.settled()

    async def flush(self) -> None:
        """Write the latest table and wait for it (shutdown)."""
        await self._writer.write()

    # -- system topics ---------------------------------------------------------------------

    def _add_system_topics(self, overwrite: bool = True) -> None:
        bc = self._ctl.broker_config
        rw = PERM_READ | PERM_WRITE
        entries = [new_topic_config(RMQ_SYS_SELF_TEST_TOPIC, 1, 1, rw)]
        if bc.auto_create_topic_enable:
            n = bc.default_topic_queue_nums
            entries.append(new_topic_config(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, rw | PERM_INHERIT))
        cluster_perm = PERM_INHERIT | (rw if bc.cluster_topic_enable else 0)
        entries.append(new_topic_config(bc.broker_cluster_name, 16, 16, cluster_perm))
        broker_perm = PERM_INHERIT | (rw if bc.broker_topic_enable else 0)
        entries.append(new_topic_config(bc.broker_name, 1, 1, broker_perm))
        entries.append(new_topic_config(RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1, rw))
        entries.append(new_topic_config(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS, SCHEDULE_QUEUE_NUMS, rw))
        if bc.trace_topic_enable:
            entries.append(new_topic_config(bc.msg_trace_topic_name, 1, 1, rw))
            self.system_topics.add(bc.msg_trace_topic_name)
        entries.append(new_topic_config(RMQ_SYS_WHEEL_TIMER, 1, 1, rw))  # timer messages wait here
        # Where repliers send (request-reply); never consumed, the broker pushes replies.
        reply = reply_topic(bc.broker_cluster_name)
        entries.append(new_topic_config(reply, 1, 1, rw))
        self.system_topics.update((bc.broker_cluster_name, bc.broker_name, reply))
        for cfg in entries:
            if overwrite or cfg.topic_name not in self.table:
                self.table[cfg.topic_name] = cfg

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    # -- queries -----------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        cfg = self.table.get(topic)
        return cfg is not None and cfg.order

    # -- changes -----------------------------------------------------------------------------

    def update_topic_config(self, cfg: TopicConfig) -> None:
        old = self.table.get(cfg.topic_name)
        self.table[cfg.topic_name] = cfg
        if old is None:
            log.info("create new topic [%s]", cfg)
        else:
            log.info("update topic config, old:[%s] new:[%s]", old, cfg)
        self._changed()

    def update_order_topic_config(self, order_topics: dict[str, str]) -> None:
        """Mark topics listed in the name server's ORDER_TOPIC_CONFIG as order topics.

        Like RocketMQ, never clears the flag from this source (the name server's table is not
        authoritative; admins change `order` through UPDATE_AND_CREATE_TOPIC), and does not
        re-register: the next periodic registration carries the new version.
        """
        changed = False
        for name in order_topics:
            cfg = self.table.get(name)
            if cfg is not None and not cfg.order:
                self.table[name] = replace(cfg, order=True)
                changed = True
        if changed:
            self._next_version()
            self._writer.changed()

    def delete_topic_config(self, topic: str) -> TopicConfig | None:
        old = self.table.pop(topic, None)
        if old is not None:
            log.info("delete topic config OK, topic: %s", old)
            self._changed()
        else:
            log.warning("delete topic config failed, topic: %s not exists", topic)
        return old

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str, remote_address: str,
        client_default_topic_queue_nums: int, topic_sys_flag: int,
    ) -> TopicConfig | None:
        """Auto-create `topic` from the template `default_topic` (PROTOCOL.md §4.3)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning("Create new topic failed, because the default topic[%s] not exist. producer:[%s]",
                        default_topic, remote_address)
            return None
        auto_create = self._ctl.broker_config.auto_create_topic_enable
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not auto_create:
            return None
        if not is_inherited(template.perm):
            log.warning("Create new topic failed, because the default topic[%s] has no perm [%s] "
                        "producer:[%s]", default_topic, template.perm, remote_address)
            return None
        nums = max(0, min(client_default_topic_queue_nums, template.write_queue_nums))
        perm = template.perm & ~PERM_INHERIT
        cfg = new_topic_config(topic, nums, nums, perm, topic_sys_flag=topic_sys_flag)
        self.table[topic] = cfg
        log.info("Create new topic by default topic:[%s] config:[%s] producer:[%s]", default_topic, cfg,
                 remote_address)
        self._changed()
        return cfg

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int = 0,
    ) -> TopicConfig:
        """Create a %RETRY%/%DLQ% topic (or return the existing one)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        n = client_default_topic_queue_nums
        cfg = new_topic_config(topic, n, n, perm, topic_sys_flag=topic_sys_flag)
        self.table[topic] = cfg
        log.info("create new topic [%s]", cfg)
        self._changed()
        return cfg

    def create_topic_if_absent(self, cfg: TopicConfig) -> TopicConfig:
        existing = self.table.get(cfg.topic_name)
        if existing is not None:
            return existing
        self.table[cfg.topic_name] = cfg
        log.info("create new topic [%s]", cfg)
        self._changed()
        return cfg
