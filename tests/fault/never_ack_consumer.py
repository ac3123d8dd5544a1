"""A push consumer whose listener never returns, run as its own process by the flow-control
campaign: ``python never_ack_consumer.py NAMESRV TOPIC GROUP``.

Every second it prints one JSON line with the messages it holds in its process queues (the
cache that pullThresholdForQueue bounds), so the test can read both that and the process's RSS.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def main(namesrv: str, topic: str, group: str) -> None:
    from rocketq.aio import PushConsumer

    never = asyncio.Event()

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        await never.wait()  # never acknowledges: what it was given stays cached

    consumer = PushConsumer(group, namesrv_addr=namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            instance_name="never-ack")
    consumer.subscribe(topic, "*")
    consumer.register_listener(listener)
    await consumer.start()
    while True:
        queues = [pq for mq, pq in consumer.process_queue_table.items()
                  if mq.topic == topic and not pq.dropped]
        line = {"event": "cache", "queues": len(queues), "cached": sum(pq.msg_count for pq in queues),
                "cached_bytes": sum(pq.msg_size for pq in queues)}
        print(json.dumps(line), flush=True)
        await asyncio.sleep(1.0)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
