"""What a rebalance works from: subscriptions built from tag expressions (refused at the call site when
malformed), consumer options, and the %RETRY% route that appears shortly after the first heartbeat."""

from __future__ import annotations

from typing import Any

import pytest

from rocketq.client.consumer.subscription import (
    build_subscription,
    check_subscribe_topic,
    reset_retry_topic,
    split_options,
)
from rocketq.client.consumer.types import LitePullConsumerConfig, PushConsumerConfig
from rocketq.client.offset_store import OffsetStore
from rocketq.client.rebalance.allocate import AllocateMessageQueueAveragely
from rocketq.client.rebalance.impl import MAX_RETRY_ROUTE_MISSES, RebalancePushImpl
from rocketq.codec.bodies import ConsumeFromWhere, MessageModel, MessageQueue
from rocketq.codec.message import MessageExt, java_string_hash
from rocketq.errors import InvalidArgument


def test_tag_expressions() -> None:
    for expr in (None, "", "  ", "*", " * "):
        sub = build_subscription("T", expr)
        assert sub.sub_string == "*" and sub.tags_set == () and sub.code_set == ()
    sub = build_subscription("T", " A || B ||A|| C ")
    assert sub.tags_set == ("A", "B", "C")
    assert sub.code_set == tuple(java_string_hash(t) for t in ("A", "B", "C"))
    assert sub.expression_type == "TAG" and sub.sub_version > 0
    for bad in ("||", " || || ", "|| "):
        with pytest.raises(InvalidArgument):
            build_subscription("T", bad)
    with pytest.raises(InvalidArgument):
        build_subscription("T", 42)  # type: ignore[arg-type]


def test_topic_names() -> None:
    check_subscribe_topic("Topic_A-1%x|y")
    for bad in ("", " ", "a b", "x" * 128, "中文"):
        with pytest.raises(InvalidArgument):
            check_subscribe_topic(bad)


def test_retry_messages_show_their_original_topic() -> None:
    retried = MessageExt(topic="%RETRY%G", body=b"x", properties={"RETRY_TOPIC": "Orig"})
    plain = MessageExt(topic="%RETRY%G", body=b"y")
    other = MessageExt(topic="Else", body=b"z", properties={"RETRY_TOPIC": "Orig"})
    assert [m.topic for m in reset_retry_topic([retried, plain, other], "%RETRY%G")] == [
        "Orig",
        "%RETRY%G",
        "Else",
    ]


def test_options_split_between_client_and_consumer_fields() -> None:
    cfg = split_options(
        PushConsumerConfig,
        "G",
        "ns:9876",
        None,
        None,
        {
            "message_model": "broadcasting",
            "consume_from_where": "consume_from_first_offset",
            "instance_name": "i1",
        },
    )
    assert (cfg.consumer_group, cfg.namesrv_addr, cfg.instance_name) == ("G", "ns:9876", "i1")
    assert cfg.message_model is MessageModel.BROADCASTING
    assert cfg.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert cfg.client_id().endswith("@i1")
    again = split_options(PushConsumerConfig, None, None, cfg, None, {"pull_batch_size": 7})
    assert again.pull_batch_size == 7 and again.consumer_group == "G"
    lite = split_options(LitePullConsumerConfig, None, None, None, cfg, {})
    assert (
        lite.consumer_group == "DEFAULT_CONSUMER"
        and lite.instance_name == "i1"
        and lite.pull_batch_size == 10
    )
    with pytest.raises(InvalidArgument):
        split_options(PushConsumerConfig, "G", None, None, None, {"nope": 1})
    with pytest.raises(InvalidArgument):
        split_options(PushConsumerConfig, "G", None, None, None, {"message_model": "SIDEWAYS"})


class _Client:
    client_id = "c0"

    def __init__(self, impl_ref: list[Any], appear_after: int) -> None:
        self.impl_ref = impl_ref
        self.fetches = 0
        self.appear_after = appear_after

    async def update_topic_route_info_from_name_server(self, topic: str) -> bool:
        self.fetches += 1
        if self.fetches >= self.appear_after:
            self.impl_ref[0].topic_subscribe_info_table[topic] = {MessageQueue(topic, "b", 0)}
        return True

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        return ["c0"]


class _NoOffsets(OffsetStore):
    async def _read_from_store(self, mq: MessageQueue) -> int:
        return -1

    async def persist_all(self, mqs: Any) -> None:
        return None

    async def persist(self, mq: MessageQueue) -> None:
        return None


class _Consumer:
    consume_orderly = False
    config = PushConsumerConfig(
        consumer_group="G", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )

    def __init__(self) -> None:
        self.offset_store = _NoOffsets("G")
        self.requests: list[Any] = []

    def dispatch_pull_requests(self, requests: list[Any]) -> None:
        self.requests += requests

    def on_message_queue_changed(self, *args: Any) -> None:
        pass


async def test_missing_retry_route_is_fetched_at_once_and_asks_for_a_quick_retry(monkeypatch: Any) -> None:
    clock = [1000.0]
    monkeypatch.setattr("rocketq.client.rebalance.impl.time.monotonic", lambda: clock[0])
    ref: list[Any] = []
    client = _Client(ref, appear_after=2)
    consumer = _Consumer()
    impl = RebalancePushImpl(consumer, "G", MessageModel.CLUSTERING, AllocateMessageQueueAveragely(), client)
    impl.settle_delay = 0.0
    ref.append(impl)
    impl.subscription_inner["%RETRY%G"] = build_subscription("%RETRY%G", "*")
    assert await impl.do_rebalance(False) is False  # fetched, still missing: come back soon
    assert await impl.do_rebalance(False) is False  # within a second: no second fetch
    assert client.fetches == 1
    clock[0] += 1.5
    assert await impl.do_rebalance(False) is True  # the route appeared: the retry queue is ours
    assert [mq.topic for mq, _, _ in consumer.requests] == ["%RETRY%G"]
    # A retry route that never appears stops asking for quick rounds after a while.
    never = _Client([None], appear_after=10**9)
    impl2 = RebalancePushImpl(consumer, "G2", MessageModel.CLUSTERING, AllocateMessageQueueAveragely(), never)
    impl2.subscription_inner["%RETRY%G2"] = build_subscription("%RETRY%G2", "*")
    results = []
    for _ in range(MAX_RETRY_ROUTE_MISSES + 2):
        clock[0] += 2
        results.append(await impl2.do_rebalance(False))
    assert results[:MAX_RETRY_ROUTE_MISSES] == [False] * MAX_RETRY_ROUTE_MISSES and results[-1] is True
