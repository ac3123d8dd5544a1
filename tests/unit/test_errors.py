"""The error tree: codes map to classes, ``retriable`` says what the producer retries, fields render."""

from __future__ import annotations

import pytest

from rocketq.codec.codes import ResponseCode
from rocketq.errors import (
    MQClientError,
    ProtocolError,
    RemotingConnectError,
    RocketQError,
    ServerError,
    TopicRouteNotFound,
    for_code,
)

# DefaultMQProducer.retryResponseCodes of RocketMQ 4.9.x, plus SYSTEM_BUSY and GO_AWAY (5.x).
JAVA_4_9_RETRY_CODES = {
    ResponseCode.TOPIC_NOT_EXIST,
    ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION,
    ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT,
}
ADDED_IN_5 = {ResponseCode.SYSTEM_BUSY, ResponseCode.GO_AWAY}


@pytest.mark.parametrize("code", sorted(int(c) for c in ResponseCode))
def test_retriable_answers_are_exactly_what_the_java_producer_retries(code: int) -> None:
    err = for_code(code, "x")
    assert err.code == code
    assert err.retriable is (code in JAVA_4_9_RETRY_CODES | ADDED_IN_5)


def test_every_java_retry_code_has_its_own_class() -> None:
    for code in JAVA_4_9_RETRY_CODES | ADDED_IN_5:
        assert type(for_code(code)) is not ServerError


def test_transport_and_garbage_are_retriable_client_mistakes_are_not() -> None:
    assert RemotingConnectError("x").retriable and ProtocolError("x").retriable
    assert not MQClientError("x").retriable and not TopicRouteNotFound("x").retriable


def test_fields_render_after_the_message_and_the_remark_stays_bare() -> None:
    answered = for_code(ResponseCode.TOPIC_NOT_EXIST, "no route", broker_addr="10.0.0.1:10911", topic="T")
    assert (answered.broker_addr, answered.topic, answered.remark) == ("10.0.0.1:10911", "T", "no route")
    assert str(answered) == "CODE: 17  DESC: no route  TOPIC: T  BROKER: 10.0.0.1:10911"
    raised_by_a_server = ServerError("bad request", code=ResponseCode.INVALID_PARAMETER)
    assert str(raised_by_a_server) == raised_by_a_server.remark == "bad request"
    plain = RocketQError("no route", topic="T")
    assert str(plain) == "no route  TOPIC: T" and plain.broker_addr is None
