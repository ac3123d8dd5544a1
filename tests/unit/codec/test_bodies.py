"""JSON bodies: fastjson-shaped output, tolerant input (Java, C++, Go), compressed register body."""

from __future__ import annotations

import struct
import zlib

import orjson
import pytest

from rocketq.codec.bodies import (
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ConsumeType,
    DataVersion,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
    UnlockBatchRequestBody,
    loads_lenient,
)
from rocketq.errors import ProtocolError

JAVA_HEARTBEAT = (
    b'{"clientID":"192.168.1.5@12345#1234567","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":'
    b'[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":'
    b'1700000000000,"tagsSet":["TagA"],"topic":"TopicTest"},{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%cg"}],'
    b'"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],'
    b'"withoutSub":false}'
)
# rocketmq-client-cpp HeartbeatData::Encode: ordinals, subVersion as a string, no unitMode, a newline.
CPP_HEARTBEAT = (
    b'{"clientID":"127.0.0.1@8791","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,"groupName":"g",'
    b'"messageModel":1,"subscriptionDataSet":[{"codeSet":[65,66],"subString":"A || B","subVersion":'
    b'"1700000000000","tagsSet":["A","B"],"topic":"T"}]}],"producerDataSet":[{"groupName":"pg"}]}\n'
)


class TestHeartbeat:
    def test_java(self) -> None:
        hb = HeartbeatData.from_json(JAVA_HEARTBEAT)
        assert hb.client_id == "192.168.1.5@12345#1234567"
        (consumer,) = hb.consumer_data_set
        assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
        assert consumer.message_model is MessageModel.CLUSTERING
        assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        assert [s.topic for s in consumer.subscription_data_set] == ["TopicTest", "%RETRY%cg"]
        assert consumer.subscription_data_set[0].code_set == (2598919,)
        assert hb.producer_data_set == (ProducerData("CLIENT_INNER_PRODUCER"),)

    def test_java_output_is_byte_identical(self) -> None:
        assert HeartbeatData.from_json(JAVA_HEARTBEAT).to_json() == JAVA_HEARTBEAT

    def test_cpp_ordinals_and_string_numbers(self) -> None:
        hb = HeartbeatData.from_json(CPP_HEARTBEAT)
        (consumer,) = hb.consumer_data_set
        assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
        assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        (sub,) = consumer.subscription_data_set
        assert sub.sub_version == 1700000000000 and sub.tags_set == ("A", "B")
        assert sub.expression_type == "TAG" and consumer.unit_mode is False
        assert HeartbeatData.from_json(hb.to_json()) == hb

    def test_enums_are_written_by_name(self) -> None:
        data = ConsumerData("g", ConsumeType.CONSUME_ACTIVELY, MessageModel.BROADCASTING).to_obj()
        assert data["consumeType"] == "CONSUME_ACTIVELY" and data["messageModel"] == "BROADCASTING"

    @pytest.mark.parametrize(
        "raw",
        [
            b"",
            b"[]",
            b"not json",
            b'{"producerDataSet":[]}',  # clientID missing
            b'{"clientID":"x","consumerDataSet":{}}',
            b'{"clientID":"x","consumerDataSet":[{"groupName":"g","consumeType":"NOPE"}]}',
            b'{"clientID":"x","consumerDataSet":[{"groupName":"g","consumeType":9}]}',
            b'{"clientID":"x","heartbeatFingerprint":"abc"}',
            b'{"clientID":["x"]}',
            b'{"clientID":"x","withoutSub":"maybe"}',
        ],
    )
    def test_garbage_raises_protocol_error(self, raw: bytes) -> None:
        with pytest.raises(ProtocolError):
            HeartbeatData.from_json(raw)


class TestRoute:
    def route(self) -> TopicRouteData:
        return TopicRouteData(
            queue_datas=(QueueData("broker-a", 4, 4, 6, 0),),
            broker_datas=(
                BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}),
            ),
        )

    def test_compact_standard_json_with_quoted_keys(self) -> None:
        raw = self.route().to_json()
        assert b" " not in raw
        assert b'"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}' in raw
        assert raw.startswith(b'{"brokerDatas":[{"brokerAddrs"')
        assert TopicRouteData.from_json(raw) == self.route()

    def test_fastjson_bare_integer_keys(self) -> None:
        raw = (
            b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911", 1 :"127.0.0.1:10921"},'
            b'"brokerName":"broker-a",'
            b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":'
            b'[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
        )
        assert TopicRouteData.from_json(raw) == self.route()

    def test_bare_key_fix_leaves_strings_alone(self) -> None:
        assert loads_lenient(b'{"a":"{0:1,2:3}",5:"x,7:"}') == {"a": "{0:1,2:3}", "5": "x,7:"}
        assert loads_lenient('{"k\\"{1:":{-2:3}}') == {'k"{1:': {"-2": 3}}
        with pytest.raises(ProtocolError):
            loads_lenient(b"{0:}")

    def test_master_addr_and_order(self) -> None:
        assert self.route().broker_datas[0].master_addr == "127.0.0.1:10911"
        assert sorted([QueueData("b"), QueueData("a")])[0].broker_name == "a"

    def test_cluster_info_topic_list_kv(self) -> None:
        info = ClusterInfo({"broker-a": BrokerData("c", "broker-a", {0: "x:1"})}, {"c": ("broker-a",)})
        assert ClusterInfo.from_json(info.to_json()) == info
        assert orjson.loads(info.to_json())["clusterAddrTable"] == {"c": ["broker-a"]}
        assert TopicList(("a", "b")).to_json() == b'{"topicList":["a","b"]}'
        assert TopicList.from_json(b'{"topicList":["a"],"brokerAddr":"x:1"}').broker_addr == "x:1"
        assert KVTable({"k": "v"}).to_json() == b'{"table":{"k":"v"}}'


class TestTopicConfig:
    def test_json(self) -> None:
        config = TopicConfig("T", 8, 8, 6, TopicFilterType.MULTI_TAG, 0, True, {"+message.type": "NORMAL"})
        assert config.to_json() == (
            b'{"attributes":{"+message.type":"NORMAL"},"order":true,"perm":6,"readQueueNums":8,'
            b'"topicFilterType":"MULTI_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":8}'
        )
        assert TopicConfig.from_json(config.to_json()) == config

    def test_defaults(self) -> None:
        config = TopicConfig.from_json(b'{"topicName":"T"}')
        assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (16, 16, 6)
        assert config.topic_filter_type is TopicFilterType.SINGLE_TAG and config.attributes == {}

    def test_encoded_string(self) -> None:
        config = TopicConfig("TopicTest", 4, 4, 6)
        assert config.encode() == "TopicTest 4 4 6 SINGLE_TAG {}"
        assert TopicConfig.decode("TopicTest 4 4 6 SINGLE_TAG") == config
        assert TopicConfig.decode('T 1 2 7 MULTI_TAG {"a":"b"}').attributes == {"a": "b"}
        assert TopicConfig.decode("T 1 2 7 MULTI_TAG {broken").attributes == {}
        for bad in ("T 1 2", "T x 2 6 SINGLE_TAG", "T 1 2 6 WHATEVER"):
            with pytest.raises(ProtocolError):
                TopicConfig.decode(bad)

    def test_data_version(self) -> None:
        version = DataVersion(0, 100, 5)
        assert version.to_json() == b'{"counter":5,"stateVersion":0,"timestamp":100}'
        bumped = version.next_version()
        assert bumped.counter == 6 and bumped.timestamp >= 100 and bumped != version


class TestRegisterBrokerBody:
    def body(self) -> RegisterBrokerBody:
        table = {
            "TopicA": TopicConfig("TopicA", 4, 4, 6),
            "TBW102": TopicConfig("TBW102", 8, 8, 7, attributes={"k": "v"}),
        }
        return RegisterBrokerBody(
            TopicConfigSerializeWrapper(table, DataVersion(0, 1700000000000, 3)), ("fs:1",)
        )

    def test_json_form(self) -> None:
        raw = self.body().encode()
        parsed = orjson.loads(raw)
        assert set(parsed) == {"filterServerList", "topicConfigSerializeWrapper"}
        assert parsed["topicConfigSerializeWrapper"]["dataVersion"]["counter"] == 3
        assert RegisterBrokerBody.decode(raw) == self.body()

    def test_compressed_round_trip(self) -> None:
        raw = self.body().encode(compress=True)
        back = RegisterBrokerBody.decode(raw, compressed=True)
        assert (
            back.topic_config_serialize_wrapper.topic_config_table
            == self.body().topic_config_serialize_wrapper.topic_config_table
        )
        assert back.topic_config_serialize_wrapper.data_version == DataVersion(0, 1700000000000, 3)
        assert back.filter_server_list == ("fs:1",)

    def test_compressed_layout_built_by_hand(self) -> None:
        def chunk(b: bytes) -> bytes:
            return struct.pack(">i", len(b)) + b

        plain = (
            chunk(b'{"counter":1,"stateVersion":0,"timestamp":42}')
            + struct.pack(">i", 1)
            + chunk(b"T 2 2 6 SINGLE_TAG {}")
            + chunk(b"[]")
            + struct.pack(">i", 1)
            + chunk(b'{"topic":"T","bname":"b","epoch":0}')
        )
        back = RegisterBrokerBody.decode(zlib.compress(plain), compressed=True)
        wrapper = back.topic_config_serialize_wrapper
        assert wrapper.topic_config_table == {"T": TopicConfig("T", 2, 2, 6)}
        assert wrapper.topic_queue_mapping_info_map == {"T": {"topic": "T", "bname": "b", "epoch": 0}}
        # A pre-5.0 broker never writes the mapping part.
        old = RegisterBrokerBody.decode(zlib.compress(plain[: plain.rindex(struct.pack(">i", 1))]), True, 401)
        assert old.topic_config_serialize_wrapper.topic_queue_mapping_info_map is None

    @pytest.mark.parametrize(
        "raw", [b"", b"not zlib", zlib.compress(b"\x00\x00"), zlib.compress(b"\x00\x00\x00\x09{}")]
    )
    def test_bad_compressed_body(self, raw: bytes) -> None:
        with pytest.raises(ProtocolError):
            RegisterBrokerBody.decode(raw, compressed=True)


class TestClientBodies:
    def test_message_queue_sorts_and_prints_like_java(self) -> None:
        queues = [
            MessageQueue("t", "b", 1),
            MessageQueue("t", "a", 2),
            MessageQueue("s", "z", 0),
            MessageQueue("t", "a", 0),
        ]
        assert [(q.topic, q.broker_name, q.queue_id) for q in sorted(queues)] == [
            ("s", "z", 0),
            ("t", "a", 0),
            ("t", "a", 2),
            ("t", "b", 1),
        ]
        assert str(MessageQueue("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"
        assert MessageQueue("T", "b", 3).to_json() == b'{"brokerName":"b","queueId":3,"topic":"T"}'
        assert len({MessageQueue("T", "b", 3), MessageQueue("T", "b", 3)}) == 1

    def test_lock_bodies(self) -> None:
        raw = (
            b'{"consumerGroup":"g","clientId":"c","onlyThisBroker":false,"mqSet":'
            b'[{"topic":"t","brokerName":"b","queueId":0}]}'
        )
        request = LockBatchRequestBody.from_json(raw)
        assert request.mq_set == (MessageQueue("t", "b", 0),)
        assert UnlockBatchRequestBody.from_json(raw).client_id == "c"
        response = LockBatchResponseBody(request.mq_set)
        assert response.to_json() == b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"t"}]}'
        assert LockBatchResponseBody.from_json(response.to_json()) == response

    def test_consumer_list(self) -> None:
        body = GetConsumerListByGroupResponseBody(("b@1", "a@2"))
        assert body.to_json() == b'{"consumerIdList":["b@1","a@2"]}'

    def test_subscription_group_defaults(self) -> None:
        config = SubscriptionGroupConfig.from_json(b'{"groupName":"g"}')
        assert (config.retry_queue_nums, config.retry_max_times, config.consume_timeout_minute) == (1, 16, 15)
        assert config.consume_enable and config.notify_consumer_ids_changed_enable
        assert not config.consume_message_orderly and config.which_broker_when_consume_slowly == 1
        parsed = orjson.loads(config.to_json())
        assert parsed["groupRetryPolicy"] == {"type": "CUSTOMIZED"} and "subscriptionDataSet" not in parsed
        wrapper = SubscriptionGroupWrapper({"g": config})
        assert SubscriptionGroupWrapper.from_json(wrapper.to_json()) == wrapper

    def test_consumer_offsets_from_java_file(self) -> None:
        raw = b'{\n\t"offsetTable":{\n\t\t"T@g":{0:12,1:3\n\t\t}\n\t}\n}'
        wrapper = ConsumerOffsetSerializeWrapper.from_json(raw)
        assert wrapper.offset_table == {"T@g": {0: 12, 1: 3}}
        assert orjson.loads(wrapper.to_json()) == {"offsetTable": {"T@g": {"0": 12, "1": 3}}}

    def test_subscription_data_defaults(self) -> None:
        sub = SubscriptionData.from_json(b'{"topic":"T"}')
        assert sub.sub_string == "*" and sub.expression_type == "TAG" and sub.tags_set == ()


class TestAdminStats:
    def test_topic_stats_use_fastjson_object_keys(self) -> None:
        table = TopicStatsTable(
            {
                MessageQueue("T", "b", 1): TopicOffset(0, 10, 5),
                MessageQueue("T", "b", 0): TopicOffset(1, 2, 3),
            },
            1.5,
        )
        raw = table.to_json()
        assert raw == (
            b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":3,"maxOffset":2,'
            b'"minOffset":1},{"brokerName":"b","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":5,"maxOffset":10,'
            b'"minOffset":0}},"topicPutTps":1.5}'
        )
        assert TopicStatsTable.from_json(raw) == table

    def test_consume_stats(self) -> None:
        stats = ConsumeStats({MessageQueue("T", "b", 0): OffsetWrapper(10, 4, 5, 0)}, 2.0)
        back = ConsumeStats.from_json(stats.to_json())
        assert back == stats and back.total_diff == 6
        spaced = b'{ "consumeTps" : 0 , "offsetTable" : { {"topic":"T","brokerName":"b","queueId":3} : {} } }'
        assert ConsumeStats.from_json(spaced).offset_table == {MessageQueue("T", "b", 3): OffsetWrapper()}

    @pytest.mark.parametrize(
        "raw",
        [
            b"",
            b'{"offsetTable":{',
            b'{"offsetTable":{{"topic":"T"}:{}}}',
            b'{"offsetTable":{1:2}}',
            b'{"consumeTps":"fast"}',
        ],
    )
    def test_garbage(self, raw: bytes) -> None:
        with pytest.raises(ProtocolError):
            ConsumeStats.from_json(raw)
