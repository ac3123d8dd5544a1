"""Producer.recall: cancel a pending timer message (RocketMQ 5.3.2's recallMessage).

The handle (``SendResult.recall_handle``) names the broker that holds the timer; the request goes
to that broker's master, found in the topic's route, as RECALL_MESSAGE (370). The broker answers
the message's id; the message is then never delivered. A broker refuses a recall unless
``recallMessageEnable``, and once the message's time has come (ILLEGAL_OPERATION
"recall failed, timestamp invalid").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketq.client.producer.validators import check_topic
from rocketq.codec.headers.timer import RecallMessageRequestHeader
from rocketq.codec.recall import RecallHandle
from rocketq.errors import InvalidParameter, MQClientError

if TYPE_CHECKING:
    from rocketq.client.producer.producer import Producer

__all__ = ["recall_message"]


async def recall_message(producer: Producer, topic: str, recall_handle: str,
                         timeout: float | None = None) -> str:
    """Recall the timer message of ``recall_handle`` on ``topic``; returns its message id."""
    check_topic(topic)
    try:
        handle = RecallHandle.decode(recall_handle)
    except InvalidParameter:
        raise MQClientError("recall handle is invalid") from None
    wire_topic = producer.config.with_namespace(topic)
    instance = producer.instance
    addr = instance.find_broker_address_in_publish(handle.broker_name)
    if addr is None:
        await producer.find_topic_publish_info(wire_topic)
        addr = instance.find_broker_address_in_publish(handle.broker_name)
    if addr is None:
        raise MQClientError("The broker service address not found")
    header = RecallMessageRequestHeader(wire_topic, recall_handle, producer.group)
    timeout = producer.config.send_msg_timeout / 1000.0 if timeout is None else timeout
    return await instance.api.recall_message(addr, header, timeout)
