"""Producer and consumer connections known to the broker (RocketMQ ProducerManager / ConsumerManager).

Clients announce themselves by HEART_BEAT every 30 s; a channel silent for channelExpiredTimeout (120 s) is
closed and forgotten by a scan every 10 s, and a channel that closes is forgotten at once. Whenever the set
of consumers of a group changes (or their subscribed topics do), every member gets a one-way
NOTIFY_CONSUMER_IDS_CHANGED so it rebalances now instead of at its next 20 s tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocketq.broker.filter import Subscription
from rocketq.codec.codes import RequestCode
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.remoting.channel import Channel

log = logging.getLogger("rocketq.broker.client")

CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
CONSUME_POP = "CONSUME_POP"
CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _is_active(channel: Any) -> bool:
    return bool(getattr(channel, "is_active", True))


def _close(channel: Any) -> None:
    try:
        channel.close()
    except Exception:
        log.debug("closing channel %s failed", channel_address(channel), exc_info=True)


@dataclass(slots=True)
class ClientChannelInfo:
    """One client connection (mutable: its heartbeat time moves)."""

    channel: Channel
    client_id: str
    language: int | str = 0
    version: int = 0
    last_update_timestamp: int = field(default_factory=_now_ms)

    @property
    def address(self) -> str:
        return channel_address(self.channel)


class ConsumerGroupInfo:
    """The live members of one consumer group and what they subscribe to."""

    __slots__ = ("channel_info_table", "consume_from_where", "consume_type", "group_name",
                 "last_update_timestamp", "message_model", "subscription_table")

    def __init__(self, group_name: str, consume_type: str = CONSUME_PASSIVELY,
                 message_model: str = CLUSTERING,
                 consume_from_where: str = "CONSUME_FROM_LAST_OFFSET") -> None:
        self.group_name = group_name
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.channel_info_table: dict[Channel, ClientChannelInfo] = {}
        self.subscription_table: dict[str, Subscription] = {}
        self.last_update_timestamp = _now_ms()

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channel_info_table.values():
            if info.client_id == client_id:
                return info
        return None

    def get_all_channel(self) -> list[Channel]:
        return list(self.channel_info_table)

    def get_all_client_id(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def find_subscription_data(self, topic: str) -> Subscription | None:
        return self.subscription_table.get(topic)

    def get_subscribe_topics(self) -> set[str]:
        return set(self.subscription_table)

    def update_channel(self, info: ClientChannelInfo, consume_type: str, message_model: str,
                       consume_from_where: str) -> bool:
        """Add or refresh a member; True when it is new to the group."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        updated = False
        old = self.channel_info_table.get(info.channel)
        if old is None:
            self.channel_info_table[info.channel] = info
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group_name, consume_type,
                     message_model, info.address)
            updated = True
            old = info
        elif old.client_id != info.client_id:
            log.error("[BUG] consumer channel exist in broker, but clientId not equal. "
                      "GROUP: %s OLD: %s NEW: %s", self.group_name, old.client_id, info.client_id)
            self.channel_info_table[info.channel] = info
            old = info
        now = _now_ms()
        self.last_update_timestamp = now
        old.last_update_timestamp = now
        return updated

    def update_subscription(self, subs: Iterable[Subscription]) -> bool:
        """Replace the subscriptions; True when a topic was added or dropped (a rebalance is needed)."""
        updated = False
        wanted: dict[str, Subscription] = {}
        for sub in subs:
            wanted[sub.topic] = sub
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                log.info("subscription changed, add new topic, group: %s %s", self.group_name, sub.topic)
                updated = True
            elif sub.sub_version > old.sub_version:
                if self.consume_type == CONSUME_PASSIVELY:
                    log.info("subscription changed, group: %s OLD: %s NEW: %s", self.group_name,
                             old.sub_string, sub.sub_string)
                self.subscription_table[sub.topic] = sub
        for topic in [t for t in self.subscription_table if t not in wanted]:
            log.warning("subscription changed, group: %s remove topic %s", self.group_name, topic)
            del self.subscription_table[topic]
            updated = True
        self.last_update_timestamp = _now_ms()
        return updated

    def unregister_channel(self, channel: Channel) -> bool:
        info = self.channel_info_table.pop(channel, None)
        if info is not None:
            log.info("unregister a consumer[%s] from consumerGroupInfo %s", info.client_id, self.group_name)
            return True
        return False

    def do_channel_close_event(self, channel: Channel) -> ClientChannelInfo | None:
        info = self.channel_info_table.pop(channel, None)
        if info is not None:
            log.warning("NETTY EVENT: remove not active channel[%s] from ConsumerGroupInfo "
                        "groupChannelTable, consumer group: %s", info.address, self.group_name)
        return info


class ConsumerManager:
    """Consumer groups by name (RocketMQ ConsumerManager); NOTIFY_CONSUMER_IDS_CHANGED on changes."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}

    @property
    def channel_expired_timeout(self) -> int:
        return self._ctl.broker_config.channel_expired_timeout

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data(self, group: str, topic: str) -> Subscription | None:
        info = self.consumer_table.get(group)
        return None if info is None else info.find_subscription_data(topic)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        return None if info is None else info.find_channel(client_id)

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}

    def register_consumer(self, group: str, client: ClientChannelInfo, consume_type: str, message_model: str,
                          consume_from_where: str, subscriptions: Iterable[Subscription] | None,
                          is_notify_consumer_ids_changed_enable: bool = True) -> bool:
        """Register a heartbeat. `subscriptions=None` (a V2 heartbeat without subs) keeps the old ones."""
        info = self.consumer_table.get(group)
        if info is None:
            info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
            self.consumer_table[group] = info
        r1 = info.update_channel(client, consume_type, message_model, consume_from_where)
        r2 = False if subscriptions is None else info.update_subscription(subscriptions)
        if (r1 or r2) and is_notify_consumer_ids_changed_enable:
            self.notify_consumer_ids_changed(group, info.get_all_channel())
        return r1 or r2

    def unregister_consumer(self, group: str, client: ClientChannelInfo,
                            is_notify_consumer_ids_changed_enable: bool = True) -> bool:
        info = self.consumer_table.get(group)
        if info is None:
            return False
        removed = info.unregister_channel(client.channel)
        if not info.channel_info_table:
            del self.consumer_table[group]
            log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
        if removed and is_notify_consumer_ids_changed_enable:
            self.notify_consumer_ids_changed(group, info.get_all_channel())
        return removed

    def do_channel_close_event(self, channel: Channel) -> None:
        """A client connection closed: drop it from every group and tell the rest of each group."""
        for group, info in list(self.consumer_table.items()):
            if info.do_channel_close_event(channel) is None:
                continue
            if not info.channel_info_table:
                if self.consumer_table.get(group) is info:
                    del self.consumer_table[group]
                log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
            self.notify_consumer_ids_changed(group, info.get_all_channel())

    def scan_not_active_channel(self, now_ms: int | None = None) -> int:
        """Close and forget channels silent for longer than the expiry; returns how many went."""
        now = _now_ms() if now_ms is None else now_ms
        timeout = self.channel_expired_timeout
        removed = 0
        for group, info in list(self.consumer_table.items()):
            expired = [ch for ch, c in info.channel_info_table.items()
                       if now - c.last_update_timestamp > timeout or not _is_active(ch)]
            for ch in expired:
                c = info.channel_info_table.pop(ch)
                log.warning("SCAN: remove expired channel from ConsumerManager consumerTable. channel=%s, "
                            "consumerGroup=%s", c.address, group)
                _close(ch)
                removed += 1
            if expired:
                if not info.channel_info_table:
                    log.warning("SCAN: remove expired channel from ConsumerManager consumerTable, all clear, "
                                "consumerGroup=%s", group)
                    del self.consumer_table[group]
                self.notify_consumer_ids_changed(group, info.get_all_channel())
        return removed

    def notify_consumer_ids_changed(self, group: str, channels: Iterable[Channel]) -> None:
        """One-way NOTIFY_CONSUMER_IDS_CHANGED to each channel (Broker2Client.notifyConsumerIdsChanged)."""
        if not self._ctl.broker_config.notify_consumer_ids_changed_enable:
            return
        from rocketq.codec.command import RemotingCommand

        for ch in channels:
            if not _is_active(ch):
                continue
            cmd = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                          ext_fields={"consumerGroup": group}, oneway=True)
            try:
                ch.invoke_oneway(cmd)
            except Exception as exc:
                log.error("notifyConsumerIdsChanged exception. group=%s, %s", group, exc)


class ProducerManager:
    """Producer groups by name (RocketMQ ProducerManager); used for transaction checks and admin."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self.group_channel_table: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self.client_channel_table: dict[str, Channel] = {}
        self._rr = 0

    @property
    def channel_expired_timeout(self) -> int:
        return self._ctl.broker_config.channel_expired_timeout

    def group_size(self) -> int:
        return len(self.group_channel_table)

    def register_producer(self, group: str, client: ClientChannelInfo) -> None:
        channels = self.group_channel_table.setdefault(group, {})
        old = channels.get(client.channel)
        if old is None:
            channels[client.channel] = client
            log.info("new producer connected, group: %s channel: %s", group, client.address)
            old = client
        # Every heartbeat (not only a new channel's, as in RocketMQ): an entry another group of
        # the same client dropped on unregister comes back, so request-reply finds it again.
        self.client_channel_table[client.client_id] = client.channel
        old.last_update_timestamp = _now_ms()

    def unregister_producer(self, group: str, client: ClientChannelInfo) -> None:
        channels = self.group_channel_table.get(group)
        if not channels:
            return
        old = channels.pop(client.channel, None)
        if old is not None:
            # The client id's connection stays known while another producer group of it uses it
            # (replies to its requests are pushed there).
            if not any(old.channel in other for other in self.group_channel_table.values()):
                self.client_channel_table.pop(old.client_id, None)
            log.info("unregister a producer[%s] from groupChannelTable %s", group, old.address)
        if not channels:
            del self.group_channel_table[group]
            log.info("unregister a producer group[%s] from groupChannelTable", group)

    def do_channel_close_event(self, channel: Channel) -> None:
        for group, channels in list(self.group_channel_table.items()):
            info = channels.pop(channel, None)
            if info is None:
                continue
            if self.client_channel_table.get(info.client_id) is channel:
                del self.client_channel_table[info.client_id]
            log.info("NETTY EVENT: remove channel[%s][%s] from ProducerManager groupChannelTable, "
                     "producer group: %s", info.client_id, info.address, group)
            if not channels:
                del self.group_channel_table[group]

    def scan_not_active_channel(self, now_ms: int | None = None) -> int:
        now = _now_ms() if now_ms is None else now_ms
        timeout = self.channel_expired_timeout
        removed = 0
        for group, channels in list(self.group_channel_table.items()):
            for ch, info in list(channels.items()):
                if now - info.last_update_timestamp > timeout or not _is_active(ch):
                    del channels[ch]
                    if self.client_channel_table.get(info.client_id) is ch:
                        del self.client_channel_table[info.client_id]
                    log.warning("SCAN: remove expired channel[%s] from ProducerManager groupChannelTable, "
                                "producer group name: %s", info.address, group)
                    _close(ch)
                    removed += 1
            if not channels:
                del self.group_channel_table[group]
        return removed

    def get_available_channel(self, group: str) -> Channel | None:
        """An active channel of the group, round robin (for CHECK_TRANSACTION_STATE)."""
        channels = [ch for ch in self.group_channel_table.get(group, {}) if _is_active(ch)]
        if not channels:
            return None
        self._rr += 1
        return channels[self._rr % len(channels)]

    def find_channel(self, client_id: str) -> Channel | None:
        return self.client_channel_table.get(client_id)

