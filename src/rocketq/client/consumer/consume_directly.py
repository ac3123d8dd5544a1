"""CONSUME_MESSAGE_DIRECTLY (309): hand one message to a push consumer's listener, outside its queues.

``mqadmin queryMsgById -g -d`` (and the Dashboard's "consume directly") name a message; the broker
forwards it to one client, whose listener consumes it as a one-message batch. Nothing is committed
or sent back: the answer (RocketMQ's ConsumeMessageDirectlyResult) only says what the listener did.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import traceback
from typing import Any

import orjson

from rocketq.client.consumer.consume_concurrently import is_async_listener, listener_status
from rocketq.client.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
)
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import MessageExt

__all__ = ["consume_message_directly"]

# RocketMQ's CMResult names, by listener answer.
_CONCURRENT_RESULT = {ConsumeStatus.CONSUME_SUCCESS: "CR_SUCCESS", ConsumeStatus.RECONSUME_LATER: "CR_LATER"}
_ORDERLY_RESULT = {
    ConsumeOrderlyStatus.SUCCESS: "CR_SUCCESS",
    ConsumeOrderlyStatus.COMMIT: "CR_COMMIT",
    ConsumeOrderlyStatus.ROLLBACK: "CR_ROLLBACK",
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: "CR_LATER",
}

_ORDERLY_JUNK = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


async def consume_message_directly(listener: Any, orderly: bool, msg: MessageExt, mq: MessageQueue) -> bytes:
    """The ConsumeMessageDirectlyResult JSON for ``msg`` (as the listener sees it) consumed by
    ``listener`` as if pulled from ``mq``."""
    msgs = [msg]
    context: Any = ConsumeOrderlyContext(mq) if orderly else ConsumeConcurrentlyContext(mq)
    remark = None
    start = time.monotonic()
    try:
        if is_async_listener(listener):
            answer = await listener(msgs, context)
        else:
            # A sync listener may block: off the loop, as the consume threads run it.
            answer = await asyncio.to_thread(listener, msgs, context)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as e:
        result = "CR_THROW_EXCEPTION"
        remark = "".join(traceback.format_exception(e))
    else:
        if answer is None:
            result = "CR_RETURN_NULL"
        elif orderly:
            status, _ = listener_status(answer, ConsumeOrderlyStatus, _ORDERLY_JUNK)
            result = _ORDERLY_RESULT[status]
        else:
            status, _ = listener_status(answer, ConsumeStatus, ConsumeStatus.RECONSUME_LATER)
            result = _CONCURRENT_RESULT[status]
    spent = int((time.monotonic() - start) * 1000)
    return orjson.dumps({
        "autoCommit": True,
        "consumeResult": result,
        "order": orderly,
        "remark": remark,
        "spentTimeMills": spent,
    })
