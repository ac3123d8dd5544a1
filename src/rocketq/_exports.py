"""The public names of ``rocketq`` and ``rocketq.aio`` and where they live.

Both facades load these on first access (PEP 562): ``import rocketq`` stays as light as the
servers need it (the broker and name server import the package but never the client), and a
program that only produces never imports consumer code.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

__all__ = ["COMMON", "lazy_getattr"]

_MESSAGE: Final = "rocketq.client.message"
_CONSUMER: Final = "rocketq.client.consumer"
_PRODUCER: Final = "rocketq.client.producer"
_ERRORS: Final = "rocketq.errors"

# Names that are the same object in the sync and the asyncio API.
COMMON: Final[dict[str, str]] = {
    "Message": _MESSAGE,
    "MessageExt": _MESSAGE,
    "MessageQueue": _MESSAGE,
    "SendResult": _MESSAGE,
    "SendStatus": _MESSAGE,
    "PullResult": _MESSAGE,
    "PullStatus": _MESSAGE,
    "ClientConfig": "rocketq.client.config",
    "SessionCredentials": "rocketq.acl.signature",
    "ServiceState": "rocketq.client.config",
    "ProducerConfig": _PRODUCER,
    "MessageQueueSelector": _PRODUCER,
    "SelectMessageQueueByHash": _PRODUCER,
    "SelectMessageQueueByRandom": _PRODUCER,
    "create_reply_message": _PRODUCER,
    "RequestCallback": _PRODUCER,
    "LocalTransactionState": "rocketq.client.producer.transaction",
    "TransactionListener": "rocketq.client.producer.transaction",
    "TransactionSendResult": "rocketq.client.producer.transaction",
    "ConsumeStatus": _CONSUMER,
    "ConsumeOrderlyStatus": _CONSUMER,
    "ConsumeConcurrentlyContext": _CONSUMER,
    "ConsumeOrderlyContext": _CONSUMER,
    "MessageModel": _CONSUMER,
    "MessageSelector": _CONSUMER,
    "ConsumeFromWhere": _CONSUMER,
    "PushConsumerConfig": _CONSUMER,
    "LitePullConsumerConfig": _CONSUMER,
    "MessageView": "rocketq.client.consumer.simple",
    "ConsumeMode": _CONSUMER,
    "MessageRequestMode": _CONSUMER,
    "AllocateMessageQueueAveragely": _CONSUMER,
    "AllocateMessageQueueAveragelyByCircle": _CONSUMER,
    "AllocateMessageQueueConsistentHash": _CONSUMER,
    "AllocateMessageQueueByConfig": _CONSUMER,
    "AllocateMessageQueueByMachineRoom": _CONSUMER,
    "RocketQError": _ERRORS,
    "MQClientError": _ERRORS,
    "MQBrokerError": _ERRORS,
    "ServerError": _ERRORS,
    "RemotingError": _ERRORS,
    "RemotingConnectError": _ERRORS,
    "RemotingTimeoutError": _ERRORS,
    "ServiceStateError": _ERRORS,
    "GroupAlreadyRegistered": _ERRORS,
    "InvalidMessage": _ERRORS,
    "InvalidArgument": _ERRORS,
    "NoNameServer": _ERRORS,
    "TopicRouteNotFound": _ERRORS,
    "PullFailed": _ERRORS,
    "RequestTimeout": _ERRORS,
    "CreateReplyMessageError": _ERRORS,
}


def lazy_getattr(namespace: dict[str, Any], table: dict[str, str], name: str) -> Any:
    """Import ``name`` from its module, cache it in the facade's globals and return it."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
