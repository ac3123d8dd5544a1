"""Sending failed messages back (DefaultMQPushConsumerImpl.sendMessageBack).

First CONSUMER_SEND_MSG_BACK: the broker looks the message up by its commit-log offset and
re-queues it to %RETRY%<group> with the next delay level (or to %DLQ%<group> past the retry limit).
If the broker will not do it, a copy is re-sent to %RETRY%<group> through the client instance's
own producer, carrying RETRY_TOPIC, ORIGIN_MESSAGE_ID, RECONSUME_TIME and MAX_RECONSUME_TIMES so
it ends up exactly where the broker would have put it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from rocketq.client.message import Message
from rocketq.codec.message import MessageConst, MessageExt

__all__ = ["MessageBackSender"]

log = logging.getLogger("rocketq.client")

SEND_BACK_TIMEOUT = 5.0  # s, as RocketMQ's sendMessageBack
DEAD_LETTER_DELAY_LEVEL = -1  # asks the broker for the DLQ straight away

# Properties a re-sent copy must not inherit: set anew, or added by the client on pull.
_NOT_COPIED = frozenset(
    {
        MessageConst.PROPERTY_TAGS,
        MessageConst.PROPERTY_KEYS,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
        MessageConst.PROPERTY_REAL_TOPIC,
        MessageConst.PROPERTY_REAL_QUEUE_ID,
    }
)


class MessageBackSender:
    def __init__(self, consumer: Any) -> None:
        # The push consumer: client, config, consumer_group, and its group / retry topic on the wire.
        self.consumer = consumer

    def max_reconsume_times(self) -> int:
        configured = int(self.consumer.config.max_reconsume_times)
        return 16 if configured == -1 else configured

    def _addr(self, msg: MessageExt, broker_name: str | None) -> str:
        addr = self.consumer.client.find_broker_address_in_publish(broker_name) if broker_name else None
        return str(addr) if addr is not None else f"{msg.store_host[0]}:{msg.store_host[1]}"

    def _on_wire(self, msg: MessageExt) -> MessageExt:
        """The message as the broker knows it: listeners saw its topic without the namespace."""
        wire = self.consumer.config.with_namespace(msg.topic)
        return msg if wire == msg.topic else dataclasses.replace(msg, topic=wire)

    async def send_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> bool:
        msg = self._on_wire(msg)
        max_times = self.max_reconsume_times()
        if await self._ask_broker(msg, delay_level, max_times, broker_name, "sendMessageBack"):
            return True
        return await self._resend_to_retry_topic(
            msg, reconsume_times=msg.reconsume_times + 1, delay_level=3 + msg.reconsume_times,
            max_times=max_times,
        )

    async def send_to_dlq(self, msg: MessageExt, max_times: int, broker_name: str | None) -> bool:
        dlq = DEAD_LETTER_DELAY_LEVEL
        msg = self._on_wire(msg)
        if await self._ask_broker(msg, dlq, max_times, broker_name, "sendMessageBack to DLQ"):
            return True
        # As a normal message whose reconsume count already reached the limit: the broker's send
        # path moves it to the DLQ.
        return await self._resend_to_retry_topic(
            msg, reconsume_times=msg.reconsume_times, delay_level=0, max_times=msg.reconsume_times
        )

    async def _ask_broker(
        self, msg: MessageExt, delay_level: int, max_times: int, broker_name: str | None, what: str
    ) -> bool:
        """CONSUMER_SEND_MSG_BACK; False (logged) when the broker will not re-queue the message."""
        consumer = self.consumer
        try:
            await consumer.client.api.consumer_send_message_back(
                self._addr(msg, broker_name), broker_name or "", msg, consumer.group_wire, delay_level,
                SEND_BACK_TIMEOUT, max_times,
            )
            return True
        except Exception as e:
            log.error("%s Exception, %s: %r", what, consumer.consumer_group, e)
            return False

    async def _resend_to_retry_topic(
        self, msg: MessageExt, *, reconsume_times: int, delay_level: int, max_times: int
    ) -> bool:
        consumer = self.consumer
        props = {k: v for k, v in msg.properties.items() if k not in _NOT_COPIED}
        props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        props.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
        props[MessageConst.PROPERTY_RECONSUME_TIME] = str(reconsume_times)
        props[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
        copy = Message(
            topic=consumer.retry_topic_wire,
            body=msg.body,
            tags=msg.tags,
            keys=msg.keys,
            flag=msg.flag,
            delay_level=delay_level,
            properties=props,
        )
        try:
            producer = await consumer.client.default_producer()
            await producer.send(copy)
            return True
        except Exception as e:
            log.error("send message back to %s failed: %r", consumer.retry_topic_wire, e)
            return False
