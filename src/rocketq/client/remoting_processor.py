"""ClientRemotingProcessor: requests a broker sends to a client over the client's own connection.

NOTIFY_CONSUMER_IDS_CHANGED (a consumer joined or left a group: rebalance now) and
GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``, relayed by the broker). Other broker ->
client codes are answered REQUEST_CODE_NOT_SUPPORTED by the transport.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from rocketq.codec.bodies import ConsumerData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import Channel, RemotingClient

if TYPE_CHECKING:
    from rocketq.client.instance import MQClientInstance

__all__ = ["ClientRemotingProcessor"]

log = logging.getLogger("rocketq.client")


class ClientRemotingProcessor:
    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance

    def register(self, client: RemotingClient) -> None:
        client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self.notify_consumer_ids_changed)
        client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info)

    def notify_consumer_ids_changed(self, request: RemotingCommand, channel: Channel) -> None:
        log.info("receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                 channel.remote_address, request.ext("consumerGroup"))
        self.instance.rebalance_immediately()

    def get_consumer_running_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """ConsumerRunningInfo JSON: the consumer's own, when it provides ``consumer_running_info()``,
        else its config and subscriptions (what the heartbeat carries)."""
        group = request.ext("consumerGroup") or ""
        consumer = self.instance.consumer_table.get(group)
        if consumer is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
            )
        running_info = getattr(consumer, "consumer_running_info", None)
        if running_info is not None:
            body = running_info()
        else:
            body = self._basic_running_info(consumer.consumer_data())
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    def _basic_running_info(self, data: ConsumerData) -> bytes:
        instance = self.instance
        props = {
            "PROP_CLIENT_VERSION": "rocketq",
            "PROP_CONSUME_TYPE": data.consume_type.name,
            "PROP_CONSUMER_START_TIMESTAMP": str(instance.boot_timestamp),
            "PROP_NAMESERVER_ADDR": ";".join(instance.api.namesrv_addr_list),
            "messageModel": data.message_model.name,
            "consumeFromWhere": data.consume_from_where.name,
        }
        return orjson.dumps({
            "properties": props,
            "subscriptionSet": [s.to_obj() for s in data.subscription_data_set],
            "mqTable": {},
            "mqPopTable": {},
            "statusTable": {},
            "userConsumerInfo": {},
        })
