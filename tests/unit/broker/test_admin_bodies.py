"""The broker's fastjson-shaped admin bodies, byte for byte: Java's mqadmin parses exactly these.

GET_TOPIC_STATS_INFO, GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS and the reset-offset tables are
maps keyed by MessageQueue objects; a change in spacing, member order or escaping is a wire change.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rocketq.broker.processors.admin import AdminBrokerProcessor, topic_stats_json
from rocketq.broker.processors.admin_group import reset_offset_body
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand

# A broker name that needs escaping and is not ASCII: the key writer must escape like orjson.
ODD = 'bro"ker-\u00e9'
ODD_JSON = b'"bro\\"ker-\xc3\xa9"'


def test_topic_stats_body_keeps_row_order_and_has_no_tps() -> None:
    body = topic_stats_json("T", ODD, [(1, 0, 5, 77), (0, 2, 9, 0)])
    assert body == (
        b'{"offsetTable":{{"brokerName":' + ODD_JSON + b',"queueId":1,"topic":"T"}:'
        b'{"lastUpdateTimestamp":77,"maxOffset":5,"minOffset":0},'
        b'{"brokerName":' + ODD_JSON + b',"queueId":0,"topic":"T"}:'
        b'{"lastUpdateTimestamp":0,"maxOffset":9,"minOffset":2}}}'
    )
    assert topic_stats_json("T", "b", []) == b'{"offsetTable":{}}'


def test_reset_offset_body_sorts_by_queue_id() -> None:
    assert reset_offset_body("T", ODD, {3: 17, 0: -1}) == (
        b'{"offsetTable":{{"brokerName":' + ODD_JSON + b',"queueId":0,"topic":"T"}:-1,'
        b'{"brokerName":' + ODD_JSON + b',"queueId":3,"topic":"T"}:17}}'
    )
    assert reset_offset_body("T", "b", {}) == b'{"offsetTable":{}}'


def _controller(queues: dict[str, int], order: frozenset[str] = frozenset()) -> Any:
    """Just what the consume-stats bodies read: queue counts, max offsets, committed offsets, times."""
    offsets = {("G", "TA", 0): 4, ("G", "TA", 1): 0, ("G", "TB", 0): 7}
    return SimpleNamespace(
        broker_name=ODD,
        address="127.0.0.1:10911",
        consumer_manager=SimpleNamespace(get_consumer_group_info=lambda group: None),
        topic_manager=SimpleNamespace(
            select_topic_config=lambda t: SimpleNamespace(read_queue_nums=queues[t], order=t in order)
            if t in queues else None
        ),
        store=SimpleNamespace(
            get_max_offset_in_queue=lambda t, q: 10 * (q + 1),
            get_message_store_timestamp=lambda t, q, off: 1000 + off,
        ),
        offset_manager=SimpleNamespace(
            query_offset=lambda g, t, q: offsets.get((g, t, q), -1),
            which_topic_by_consumer=lambda g: {"TB", "TA"} if g == "G" else set(),
        ),
        subscription_manager=SimpleNamespace(table={"G": None, "Idle": None}),
    )


def _key(topic: str, qid: int) -> bytes:
    return b'{"brokerName":' + ODD_JSON + b',"queueId":%d,"topic":"%b"}' % (qid, topic.encode())


def test_consume_stats_body() -> None:
    proc = AdminBrokerProcessor(_controller({"TA": 2, "TB": 1}))
    request = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"})
    body = proc.get_consume_stats(request, None).body
    assert body == (
        b'{"consumeTps":0.0,"offsetTable":{'
        + _key("TA", 0) + b':{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1003,"pullOffset":4,'
        b'"reviveBacklog":0},'
        + _key("TA", 1) + b':{"brokerOffset":20,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0,'
        b'"reviveBacklog":0},'
        + _key("TB", 0) + b':{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1006,"pullOffset":7,'
        b'"reviveBacklog":0}}}'
    )


def test_broker_consume_stats_body() -> None:
    proc = AdminBrokerProcessor(_controller({"TA": 1, "TB": 1}, order=frozenset({"TB"})))
    request = RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    body = proc.get_broker_consume_stats(request, None).body
    assert body == (
        b'{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"G":[{"consumeTps":0.0,"offsetTable":{'
        + _key("TB", 0) + b':{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1006,"pullOffset":7,'
        b'"reviveBacklog":0}}}]},'
        b'{"Idle":[]}],"totalDiff":3,"totalInflightDiff":0}'
    )
