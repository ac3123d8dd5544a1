"""SimpleConsumer: a receive, ack or change-invisible that cannot reach its broker asks the client
instance for the topic's route at once (the master may have moved); a broker's refusal does not."""

from __future__ import annotations

from typing import Any

import pytest

from rocketq.client.config import ServiceState
from rocketq.client.consumer import simple
from rocketq.client.consumer.simple import MessageView, SimpleConsumer
from rocketq.codec.message import MessageExt
from rocketq.errors import NoPermission, RemotingConnectError


class _Client:
    def __init__(self) -> None:
        self.refreshed: list[str] = []
        self.remoting_client = None
        self.config = type("Config", (), {"mq_client_api_timeout": 3000})()

    def refresh_route_soon(self, topic: str) -> None:
        self.refreshed.append(topic)


def _consumer() -> tuple[SimpleConsumer, _Client]:
    consumer = SimpleConsumer("G", namesrv_addr="127.0.0.1:9876", namespace="NS", subscription={"T": "*"})
    client = _Client()
    consumer._client = client  # type: ignore[assignment]
    consumer.service_state = ServiceState.RUNNING
    return consumer, client


def _view() -> MessageView:
    return MessageView(MessageExt(topic="NS%T", body=b"x"), "T", "b", "127.0.0.1:1", "handle")


async def test_unreachable_broker_asks_for_the_wire_topic_route(monkeypatch: pytest.MonkeyPatch) -> None:
    async def gone(*args: Any) -> None:
        raise RemotingConnectError("connect to <127.0.0.1:1> failed")

    monkeypatch.setattr(simple, "ack_message", gone)
    monkeypatch.setattr(simple, "change_invisible_time", gone)
    consumer, client = _consumer()
    with pytest.raises(RemotingConnectError):
        await consumer.ack(_view())
    with pytest.raises(RemotingConnectError):
        await consumer.change_invisible_duration(_view(), 10)
    assert client.refreshed == ["NS%T", "NS%T"]


async def test_a_broker_refusal_keeps_the_route(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refused(*args: Any) -> None:
        raise NoPermission("no permission")

    monkeypatch.setattr(simple, "ack_message", refused)
    consumer, client = _consumer()
    with pytest.raises(NoPermission):
        await consumer.ack(_view())
    assert client.refreshed == []
