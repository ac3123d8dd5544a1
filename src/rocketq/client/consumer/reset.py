"""An admin offset reset applied by a running push consumer (RESET_CONSUMER_CLIENT_OFFSET, 220).

``mqadmin resetOffsetByTime`` asks the broker, which moves the group's stored offsets and tells
every online member the new table. A member that ignored it would keep pulling from where it was
and persist its old offsets over the reset. So, as RocketMQ's MQClientInstance.resetOffset: stop
pulling, drop the topic's process queues (what they cached and what the listener is finishing no
longer counts), store and persist the new offsets, then resume; the rebalance that follows takes
the queues again and starts them at the broker's (reset) offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rocketq.client.rebalance.impl import CONSUME_LOCK_WAIT
from rocketq.codec.bodies import MessageModel, MessageQueue

if TYPE_CHECKING:
    from rocketq.client.consumer.push import PushConsumer

__all__ = ["reset_offset"]

log = logging.getLogger("rocketq.client")


async def reset_offset(consumer: PushConsumer, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
    consumer.suspend()
    try:
        table = consumer.process_queue_table
        owned = [(mq, pq) for mq, pq in table.items() if mq.topic == topic and mq in offsets]
        for _, pq in owned:
            # Dropped without a hand-over: results of batches still in the listener are discarded
            # instead of committed past the reset.
            pq.handing_over = False
            pq.dropped = True
            pq.clear()
        orderly_clustering = consumer.consume_orderly and consumer.message_model is MessageModel.CLUSTERING
        store = consumer.offset_store
        for mq, pq in owned:
            locked = False
            if orderly_clustering:
                # The orderly batch in the listener commits when it returns (even on a dropped
                # queue): let it, then overwrite. The broker lock stays ours for the re-take.
                try:
                    async with asyncio.timeout(CONSUME_LOCK_WAIT):
                        await pq.consume_lock.acquire()
                    locked = True
                except TimeoutError:
                    log.warning("[reset-offset] %s is still consuming; resetting it anyway", mq)
            try:
                store.update_offset(mq, offsets[mq], False)
                await store.persist(mq)
                # Re-read from the broker when the queue is taken again.
                store.remove_offset(mq)
            except Exception as e:
                log.warning("reset offset failed. group=%s, %s: %r", consumer.group_wire, mq, e)
            finally:
                if table.get(mq) is pq:
                    del table[mq]
                if locked:
                    pq.consume_lock.release()
        log.info(
            "[reset-offset] group=%s topic=%s: %s",
            consumer.group_wire,
            topic,
            {f"{mq.broker_name}:{mq.queue_id}": offsets[mq] for mq, _ in owned},
        )
    finally:
        consumer.resume()
