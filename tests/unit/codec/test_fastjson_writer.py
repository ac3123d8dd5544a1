"""The writer of fastjson's MessageQueue-keyed maps, byte for byte (Java's fastjson parses these)."""

from __future__ import annotations

from rocketq.codec.bodies import ConsumerOffsetSerializeWrapper, DataVersion, MessageQueue
from rocketq.codec.bodies._schema import JsonBody
from rocketq.codec.bodies.admin import (
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
    consume_stats_json,
    consume_stats_list_json,
    offset_wrapper_json,
    topic_offset_json,
    topic_stats_table_json,
)
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.fastjson import dumps_mq_table, loads, mq_key, mq_keys

ODD = 'bro"ker-\u00e9'
ODD_KEY = b'{"brokerName":"bro\\"ker-\xc3\xa9","queueId":1,"topic":"T2"}'
PLAIN_KEY = b'{"brokerName":"b","queueId":0,"topic":"T1"}'


def test_topic_stats_table_sorts_queues_and_members() -> None:
    table = TopicStatsTable(
        {MessageQueue("T2", ODD, 1): TopicOffset(1, 9, 77), MessageQueue("T1", "b", 0): TopicOffset(0, 5, 0)},
        2.5,
    )
    data = table.to_json()
    assert data == (
        b'{"offsetTable":{' + PLAIN_KEY + b':{"lastUpdateTimestamp":0,"maxOffset":5,"minOffset":0},'
        + ODD_KEY + b':{"lastUpdateTimestamp":77,"maxOffset":9,"minOffset":1}},"topicPutTps":2.5}'
    )
    assert TopicStatsTable.from_json(data) == table
    assert TopicStatsTable().to_json() == b'{"offsetTable":{},"topicPutTps":0.0}'


def test_consume_stats_sorts_queues_and_members() -> None:
    stats = ConsumeStats(
        {MessageQueue("T2", ODD, 1): OffsetWrapper(9, 4, 4, 77), MessageQueue("T1", "b", 0): OffsetWrapper()}
    )
    data = stats.to_json()
    assert data == (
        b'{"consumeTps":0.0,"offsetTable":{'
        + PLAIN_KEY + b':{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0,'
        b'"reviveBacklog":0},'
        + ODD_KEY + b':{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":77,"pullOffset":4,'
        b'"reviveBacklog":0}}}'
    )
    assert ConsumeStats.from_json(data) == stats
    assert ConsumeStats().to_json() == b'{"consumeTps":0.0,"offsetTable":{}}'


def test_the_reader_reads_what_the_writer_wrote() -> None:
    data = TopicStatsTable({MessageQueue("T2", ODD, 1): TopicOffset()}).to_json()
    assert list(mq_table(loads(data)["offsetTable"], "t")) == [MessageQueue("T2", ODD, 1)]


def test_mq_key_is_the_queue_body_itself() -> None:
    for mq in (MessageQueue("T1", "b", 0), MessageQueue("%RETRY%G", ODD, 2**31 - 1)):
        assert mq_key(mq.topic, mq.broker_name, mq.queue_id) == mq.to_json()
        assert mq_keys(mq.topic, mq.broker_name)(mq.queue_id) == mq.to_json()


def test_value_templates_write_what_the_generic_plan_writes() -> None:
    # The fast %-formats must not drift from the dataclasses' own member plan.
    offset = TopicOffset(1, -2, 3)
    wrapper = OffsetWrapper(4, 5, 6, 7)
    assert offset.to_json() == JsonBody.to_json(offset)
    assert wrapper.to_json() == JsonBody.to_json(wrapper)


def test_table_members_go_in_name_order_and_entries_as_given() -> None:
    entries = [(b"{2}", b"20"), (b"{1}", b"10")]
    assert dumps_mq_table(entries) == b'{"offsetTable":{{2}:20,{1}:10}}'
    assert dumps_mq_table(entries, {"z": b"1", "a": b"[]"}, name="mqTable") == (
        b'{"a":[],"mqTable":{{2}:20,{1}:10},"z":1}'
    )
    assert dumps_mq_table(iter(())) == b'{"offsetTable":{}}'


def test_consume_stats_list_wraps_whole_bodies() -> None:
    one = consume_stats_json([(mq_key("T", "b", 0), offset_wrapper_json(3, 1, 1, 9))])
    data = consume_stats_list_json("h:1", [("G", [one, one]), ("H", [])], 4)
    assert data == (
        b'{"brokerAddr":"h:1","consumeStatsList":[{"G":[' + one + b"," + one + b']},{"H":[]}],'
        b'"totalDiff":4,"totalInflightDiff":0}'
    )
    parsed = ConsumeStats.from_obj(loads(data)["consumeStatsList"][0]["G"][0])
    assert parsed.offset_table == {MessageQueue("T", "b", 0): OffsetWrapper(3, 1, 1, 9)}
    key = mq_key("T", "b", 0)
    assert topic_stats_table_json([(key, topic_offset_json(0, 5, 0))]) == (
        b'{"offsetTable":{' + key + b':{"lastUpdateTimestamp":0,"maxOffset":5,"minOffset":0}}}'
    )


def test_consumer_offset_wrapper_writes_what_the_generic_plan_writes() -> None:
    table = {"TopicB@g1": {1: 7, 0: 12}, "TopicA@g\u00e9": {0: -1}, "E@g": {}}
    for version in (None, DataVersion(3, 1700000000000, 9)):
        wrapper = ConsumerOffsetSerializeWrapper(table, version)
        assert wrapper.to_json() == JsonBody.to_json(wrapper)
        assert ConsumerOffsetSerializeWrapper.from_json(wrapper.to_json()) == wrapper
    assert ConsumerOffsetSerializeWrapper(table).to_json() == (
        b'{"offsetTable":{"TopicB@g1":{"1":7,"0":12},"TopicA@g\xc3\xa9":{"0":-1},"E@g":{}}}'
    )
