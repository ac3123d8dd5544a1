"""HEART_BEAT / UNREGISTER_CLIENT / CHECK_CLIENT_CONFIG (RocketMQ ClientManageProcessor)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.broker.client_manager import ClientChannelInfo
from rocketq.broker.filter import (
    Subscription,
    check_expression,
    is_tag_type,
    not_supported,
    subscription_from_heartbeat,
)
from rocketq.codec.bodies import HeartbeatData, SubscriptionData
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import UnregisterClientRequestHeader
from rocketq.errors import ProtocolError, SubscriptionParseFailed
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.client")

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
PERM_READ_WRITE = 4 | 2
TOPIC_SYS_FLAG_UNIT_SUB = 0x2

# Answered on every heartbeat. IS_SUB_CHANGE is always true: a V2 client then keeps sending full
# heartbeats, so a restarted broker never has to ask for subscriptions it lost.
HEARTBEAT_RESPONSE_EXT = {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}


def to_subscriptions(data: tuple[SubscriptionData, ...]) -> list[Subscription]:
    return [subscription_from_heartbeat(s.topic, s.sub_string, s.tags_set, s.expression_type, s.sub_version,
                                        s.class_filter_mode) for s in data]


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value))


class ClientManageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    def _client_info(self, request: RemotingCommand, channel: Any, client_id: str) -> ClientChannelInfo:
        return ClientChannelInfo(channel, client_id, request.language, request.version)

    def heart_beat(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        try:
            heartbeat = HeartbeatData.from_json(request.body_bytes())
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}")
        ctl = self._ctl
        client = self._client_info(request, channel, heartbeat.client_id)
        for data in heartbeat.consumer_data_set:
            group = data.group_name
            sgc = ctl.subscription_manager.find_subscription_group_config(group)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable
                topic_sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if data.unit_mode else 0
                ctl.topic_manager.create_topic_in_send_message_back_method(
                    RETRY_GROUP_TOPIC_PREFIX + group, sgc.retry_queue_nums, PERM_READ_WRITE, topic_sys_flag)
            # A V2 heartbeat "without subscriptions" only refreshes the channel.
            subs = None if heartbeat.without_sub else to_subscriptions(data.subscription_data_set)
            changed = ctl.consumer_manager.register_consumer(
                group, ClientChannelInfo(channel, heartbeat.client_id, request.language, request.version),
                _enum_name(data.consume_type), _enum_name(data.message_model),
                _enum_name(data.consume_from_where), subs, notify)
            if changed:
                log.info("registerConsumer info changed %s %s", data, channel_address(channel))
        for pdata in heartbeat.producer_data_set:
            ctl.producer_manager.register_producer(pdata.group_name, client)
        return request.make_response(ResponseCode.SUCCESS, None, dict(HEARTBEAT_RESPONSE_EXT))

    def unregister_client(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        client = self._client_info(request, channel, h.client_id)
        if h.producer_group:
            ctl.producer_manager.unregister_producer(h.producer_group, client)
        if h.consumer_group:
            sgc = ctl.subscription_manager.find_subscription_group_config(h.consumer_group)
            notify = True if sgc is None else sgc.notify_consumer_ids_changed_enable
            ctl.consumer_manager.unregister_consumer(h.consumer_group, client, notify)
        return request.make_response(ResponseCode.SUCCESS)

    def check_client_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CheckClientRequestBody {"clientId","group","subscriptionData"}; only SQL92 clients send it.

        TAG subscriptions pass unchecked; anything else needs enablePropertyFilter (else SYSTEM_ERROR, with
        RocketMQ's text) and an expression that compiles (else SUBSCRIPTION_PARSE_FAILED saying where)."""
        body = request.body_bytes()
        if not body:
            return request.make_response(ResponseCode.SUCCESS)
        try:
            doc = orjson.loads(body)
            sub_doc = doc.get("subscriptionData") if isinstance(doc, dict) else None
            sub = SubscriptionData.from_obj(sub_doc) if sub_doc is not None else None
        except (orjson.JSONDecodeError, ProtocolError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad check client config body: {exc}")
        if sub is None or is_tag_type(sub.expression_type):
            return request.make_response(ResponseCode.SUCCESS)
        if not self._ctl.broker_config.enable_property_filter:
            return request.make_response(ResponseCode.SYSTEM_ERROR, not_supported(sub.expression_type))
        try:
            check_expression(sub.expression_type, sub.sub_string)
        except SubscriptionParseFailed as exc:
            log.warning("check client config failed, group=%s, %s: %s",
                        doc.get("group"), sub.expression_type, exc.remark)
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, exc.remark)
        return request.make_response(ResponseCode.SUCCESS)

    # -- connection events -------------------------------------------------------------------
