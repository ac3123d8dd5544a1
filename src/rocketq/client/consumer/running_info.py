"""ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO, what `mqadmin consumerStatus` shows) of a consumer.

Written as standard JSON. Java's ``mqTable`` is a map keyed by MessageQueue objects, which only
fastjson can write; the per-queue snapshots go to ``mqTable`` as ``{"<topic>@<broker>@<queueId>": ...}``
keys instead, so every JSON reader can take the body.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from rocketq.client.consumer.types import PushConsumerConfig

__all__ = ["consumer_running_info"]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def consumer_running_info(consumer: Any, consume_type: str, orderly: bool) -> bytes:
    cfg: PushConsumerConfig = consumer.config
    client = consumer.client
    props: dict[str, str] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, bool | int | str) or value is None:
            props[_camel(f.name)] = (
                "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
            )
        elif hasattr(value, "name"):
            props[_camel(f.name)] = str(value.name)
    props.update(
        {
            "PROP_CLIENT_VERSION": "rocketq",
            "PROP_CONSUME_TYPE": consume_type,
            "PROP_CONSUMEORDERLY": "true" if orderly else "false",
            "PROP_THREADPOOL_CORE_SIZE": str(cfg.consume_thread_min),
            "PROP_CONSUMER_START_TIMESTAMP": str(client.boot_timestamp),
            "PROP_NAMESERVER_ADDR": ";".join(client.api.namesrv_addr_list),
        }
    )
    rebalance = consumer.rebalance_impl
    store = consumer.offset_store
    mq_table = {
        f"{mq.topic}@{mq.broker_name}@{mq.queue_id}": _camel_keys(
            dataclasses.asdict(pq.info(store.read_offset_in_memory(mq)))
        )
        for mq, pq in sorted(rebalance.process_queue_table.items())
    }
    group = consumer.group_wire
    status = {}
    for topic in rebalance.subscription_inner:
        s = consumer.stats.consume_status(group, topic)
        status[topic] = {
            "pullRT": s.pull_rt,
            "pullTPS": s.pull_tps,
            "consumeRT": s.consume_rt,
            "consumeOKTPS": s.consume_ok_tps,
            "consumeFailedTPS": s.consume_failed_tps,
            "consumeFailedMsgs": s.consume_failed_msgs,
        }
    return orjson.dumps(
        {
            "properties": props,
            "subscriptionSet": [s.to_obj() for s in rebalance.subscription_inner.values()],
            "mqTable": mq_table,
            "mqPopTable": {},
            "statusTable": status,
            "userConsumerInfo": {},
        }
    )


def _camel_keys(d: dict[str, Any]) -> dict[str, Any]:
    return {_camel(k): v for k, v in d.items()}
