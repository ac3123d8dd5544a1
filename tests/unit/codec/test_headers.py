"""Typed headers <-> extFields: Java parsing rules, V1/V2 send headers, errors that name the field."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import decode_json_header
from rocketq.codec.headers import (
    BoundaryType,
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    EndTransactionRequestHeader,
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    RegisterBrokerRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)
from rocketq.errors import HeaderError, InvalidParameter

# PROTOCOL.md §2.2: captured extFields of a 4.x Java SEND_MESSAGE_V2.
CAPTURED_V2 = {
    "a": "yyzGroup2",
    "b": "yyztest2",
    "c": "TBW102",
    "d": "4",
    "e": "0",
    "f": "0",
    "g": "1491978653614",
    "h": "0",
    "i": "TAGS\u0001TAG\u0002WAIT\u0001true\u0002KEYS\u0001ffff\u0002",
    "j": "0",
    "k": "false",
}

EXPECTED = SendMessageRequestHeader(
    producer_group="yyzGroup2",
    topic="yyztest2",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=0,
    sys_flag=0,
    born_timestamp=1491978653614,
    flag=0,
    properties="TAGS\x01TAG\x02WAIT\x01true\x02KEYS\x01ffff\x02",
    reconsume_times=0,
    unit_mode=False,
)


class TestSendHeader:
    def test_captured_v2(self) -> None:
        assert SendMessageRequestHeader.from_ext_v2(CAPTURED_V2) == EXPECTED

    def test_v1_names(self) -> None:
        ext = EXPECTED.to_ext()
        assert ext["producerGroup"] == "yyzGroup2"
        assert ext["bornTimestamp"] == "1491978653614"
        assert ext["unitMode"] == "false" and ext["batch"] == "false"
        assert "maxReconsumeTimes" not in ext and "bname" not in ext
        assert SendMessageRequestHeader.from_ext(ext) == EXPECTED

    def test_v2_round_trip_and_keys(self) -> None:
        header = dataclasses.replace(EXPECTED, batch=True, max_reconsume_times=16, broker_name="broker-a")
        ext = header.to_ext_v2()
        assert ext["m"] == "true" and ext["l"] == "16" and ext["n"] == "broker-a"
        assert set(ext) <= set("abcdefghijklmn")
        assert SendMessageRequestHeader.from_ext_v2(ext) == header
        assert header.to_ext()["bname"] == "broker-a"

    def test_cpp_json_numbers_decode_after_the_command_coerces_them(self) -> None:
        raw = (
            b'{"code":10,"extFields":{"producerGroup":"g","topic":"t","defaultTopic":"TBW102",'
            b'"defaultTopicQueueNums":4,"queueId":-1,"sysFlag":0,"bornTimestamp":1700000000000,"flag":0,'
            b'"properties":"","reconsumeTimes":0,"unitMode":false,"batch":true,"AccessKey":""},'
            b'"flag":0,"language":"CPP","opaque":1,"version":333}'
        )
        header = SendMessageRequestHeader.from_ext(decode_json_header(raw).ext_fields)
        assert header.queue_id == -1 and header.batch is True and header.born_timestamp == 1700000000000

    def test_hand_built_map_with_python_values(self) -> None:
        ext = {**CAPTURED_V2, "e": 3, "g": 1491978653614, "k": True}
        header = SendMessageRequestHeader.from_ext_v2(ext)  # type: ignore[arg-type]
        assert header.queue_id == 3 and header.unit_mode is True

    def test_unknown_keys_ignored(self) -> None:
        assert SendMessageRequestHeader.from_ext_v2({**CAPTURED_V2, "zzz": "1", "bname": "x"}) == EXPECTED

    def test_frozen(self) -> None:
        header = SendMessageRequestHeader.from_ext_v2(CAPTURED_V2)
        with pytest.raises(dataclasses.FrozenInstanceError):
            header.topic = "other"  # type: ignore[misc]
        assert hash(header) == hash(EXPECTED)

    @pytest.mark.parametrize("key", ["a", "b", "c", "d", "e", "f", "g", "h"])
    def test_missing_required_field_names_it(self, key: str) -> None:
        ext = {k: v for k, v in CAPTURED_V2.items() if k != key}
        with pytest.raises(HeaderError, match=rf"the custom field <{key}> is null"):
            SendMessageRequestHeader.from_ext_v2(ext)

    def test_missing_optional_fields_take_defaults(self) -> None:
        ext = {k: v for k, v in CAPTURED_V2.items() if k not in "ijk"}
        header = SendMessageRequestHeader.from_ext_v2(ext)
        assert header.properties is None and header.reconsume_times is None and header.unit_mode is False

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("e", "x"),
            ("e", ""),
            ("e", "1.0"),
            ("e", "2147483648"),
            ("e", "-2147483649"),
            ("g", "9223372036854775808"),
            ("g", "0x10"),
            ("j", "--1"),
        ],
    )
    def test_non_numeric_field_names_it(self, key: str, value: str) -> None:
        with pytest.raises(HeaderError, match=rf"the custom field <{key}> is not a number"):
            SendMessageRequestHeader.from_ext_v2({**CAPTURED_V2, key: value})

    def test_header_error_is_invalid_parameter_29(self) -> None:
        with pytest.raises(InvalidParameter) as info:
            SendMessageRequestHeader.from_ext_v2({})
        assert info.value.code == ResponseCode.INVALID_PARAMETER == 29
        assert "is null" in info.value.remark

    def test_java_number_edges(self) -> None:
        ext = {**CAPTURED_V2, "e": "+7", "f": "-2147483648", "g": "-9223372036854775808"}
        header = SendMessageRequestHeader.from_ext_v2(ext)
        assert (header.queue_id, header.sys_flag, header.born_timestamp) == (7, -(2**31), -(2**63))

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("true", True),
            ("TRUE", True),
            ("True", True),
            ("false", False),
            ("yes", False),
            ("1", False),
            ("", False),
        ],
    )
    def test_boolean_is_true_only_for_true(self, text: str, expected: bool) -> None:
        assert SendMessageRequestHeader.from_ext_v2({**CAPTURED_V2, "k": text}).unit_mode is expected

    def test_none_ext_means_everything_missing(self) -> None:
        with pytest.raises(HeaderError):
            SendMessageRequestHeader.from_ext(None)
        assert RegisterBrokerRequestHeader.__name__  # headers without required fields accept None:
        assert (
            PullMessageResponseHeader.from_ext(
                {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "5"}
            ).offset_delta
            is None
        )


@given(
    queue_id=st.integers(-(2**31), 2**31 - 1),
    born=st.integers(-(2**63), 2**63 - 1),
    text=st.text(),
    flag=st.booleans(),
    maybe=st.none() | st.integers(-(2**31), 2**31 - 1),
)
def test_fast_and_strict_paths_agree(
    queue_id: int, born: int, text: str, flag: bool, maybe: int | None
) -> None:
    header = SendMessageRequestHeader(
        text, "t", "TBW102", 4, queue_id, 0, born, 0, text or None, maybe, flag, not flag, maybe, text or None
    )
    assert SendMessageRequestHeader.from_ext_v2(header.to_ext_v2()) == header
    assert SendMessageRequestHeader.from_ext(header.to_ext()) == header


class TestOtherHeaders:
    def test_send_response_always_has_region_and_trace(self) -> None:
        header = SendMessageResponseHeader("ID", 3, 77, "UNIQ", msg_region="DefaultRegion", trace_on=True)
        assert header.to_ext() == {
            "msgId": "ID",
            "queueId": "3",
            "queueOffset": "77",
            "transactionId": "UNIQ",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        assert SendMessageResponseHeader.from_ext(header.to_ext()) == header

    def test_pull_request(self) -> None:
        ext = {
            "consumerGroup": "g",
            "topic": "t",
            "queueId": "1",
            "queueOffset": "10",
            "maxMsgNums": "32",
            "sysFlag": "3",
            "commitOffset": "9",
            "suspendTimeoutMillis": "15000",
            "subVersion": "1700000000000",
            "subscription": "*",
            "expressionType": "TAG",
            "bname": "broker-a",
        }
        header = PullMessageRequestHeader.from_ext(ext)
        assert header.queue_offset == 10 and header.suspend_timeout_millis == 15000
        assert header.broker_name == "broker-a" and header.max_msg_bytes is None
        assert PullMessageRequestHeader.from_ext(header.to_ext()) == header
        del ext["subVersion"]
        with pytest.raises(HeaderError, match="subVersion"):
            PullMessageRequestHeader.from_ext(ext)

    def test_query_consumer_offset_keeps_tri_state(self) -> None:
        base = {"consumerGroup": "g", "topic": "t", "queueId": "0"}
        assert QueryConsumerOffsetRequestHeader.from_ext(base).set_zero_if_not_found is None
        explicit = QueryConsumerOffsetRequestHeader.from_ext({**base, "setZeroIfNotFound": "false"})
        assert explicit.set_zero_if_not_found is False

    def test_get_max_offset_committed_defaults_true(self) -> None:
        assert GetMaxOffsetRequestHeader.from_ext({"topic": "t", "queueId": "0"}).committed is True

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (None, BoundaryType.LOWER),
            ("upper", BoundaryType.UPPER),
            ("UPPER", BoundaryType.UPPER),
            ("lower", BoundaryType.LOWER),
            ("sideways", BoundaryType.LOWER),
        ],
    )
    def test_search_offset_boundary(self, text: str | None, expected: BoundaryType) -> None:
        ext = {"topic": "t", "queueId": "0", "timestamp": "5"}
        if text is not None:
            ext["boundaryType"] = text
        assert SearchOffsetRequestHeader.from_ext(ext).boundary_type is expected

    def test_query_message_unique_key_flag(self) -> None:
        ext = {
            "topic": "t",
            "key": "K",
            "maxNum": "32",
            "beginTimestamp": "0",
            "endTimestamp": "9",
            "_UNIQUE_KEY_QUERY": "true",
        }
        assert QueryMessageRequestHeader.from_ext(ext).unique_key_query is True

    def test_unregister_client_uses_client_id_key(self) -> None:
        header = UnregisterClientRequestHeader.from_ext({"clientID": "1.2.3.4@9", "producerGroup": "p"})
        assert header.client_id == "1.2.3.4@9" and header.consumer_group is None
        assert header.to_ext() == {"clientID": "1.2.3.4@9", "producerGroup": "p"}

    def test_send_back_and_end_transaction(self) -> None:
        back = ConsumerSendMsgBackRequestHeader.from_ext({"offset": "123", "group": "g", "delayLevel": "0"})
        assert back.unit_mode is False and back.max_reconsume_times is None
        end = EndTransactionRequestHeader.from_ext(
            {
                "producerGroup": "p",
                "tranStateTableOffset": "1",
                "commitLogOffset": "2",
                "commitOrRollback": "8",
                "msgId": "M",
                "fromTransactionCheck": "true",
            }
        )
        assert end.commit_or_rollback == 8 and end.from_transaction_check is True

    def test_create_topic_and_register_broker(self) -> None:
        create = CreateTopicRequestHeader.from_ext(
            {
                "topic": "t",
                "defaultTopic": "TBW102",
                "readQueueNums": "8",
                "writeQueueNums": "8",
                "perm": "6",
                "topicFilterType": "SINGLE_TAG",
            }
        )
        assert create.order is False and create.topic_sys_flag is None
        register = RegisterBrokerRequestHeader.from_ext(
            {
                "brokerName": "b",
                "brokerAddr": "127.0.0.1:10911",
                "clusterName": "c",
                "haServerAddr": "h",
                "brokerId": "0",
                "compressed": "false",
                "bodyCrc32": "12345",
            }
        )
        assert register.body_crc32 == 12345 and register.heartbeat_timeout_millis is None
        assert register.to_ext()["compressed"] == "false"
