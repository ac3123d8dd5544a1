"""The writer of fastjson's MessageQueue-keyed maps, byte for byte (Java's fastjson parses these)."""

from __future__ import annotations

from rocketq.codec.bodies import MessageQueue
from rocketq.codec.bodies.admin import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from rocketq.codec.bodies.client import mq_table
from rocketq.codec.fastjson import loads

ODD = 'bro"ker-\u00e9'
ODD_KEY = b'{"brokerName":"bro\\"ker-\xc3\xa9","queueId":1,"topic":"T2"}'
PLAIN_KEY = b'{"brokerName":"b","queueId":0,"topic":"T1"}'


def test_topic_stats_table_sorts_queues_and_members() -> None:
    table = TopicStatsTable(
        {MessageQueue("T2", ODD, 1): TopicOffset(1, 9, 77), MessageQueue("T1", "b", 0): TopicOffset(0, 5, 0)}, 2.5
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
        + PLAIN_KEY + b':{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0},'
        + ODD_KEY + b':{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":77,"pullOffset":4}}}'
    )
    assert ConsumeStats.from_json(data) == stats
    assert ConsumeStats().to_json() == b'{"consumeTps":0.0,"offsetTable":{}}'


def test_the_reader_reads_what_the_writer_wrote() -> None:
    data = TopicStatsTable({MessageQueue("T2", ODD, 1): TopicOffset()}).to_json()
    assert list(mq_table(loads(data)["offsetTable"], "t")) == [MessageQueue("T2", ODD, 1)]
