"""Pop's texts as RocketMQ 5 writes them: the POP_CK handle, the offset infos of a pop answer,
checkpoint and ack bodies of the revive log, and the BATCH_ACK_MESSAGE body (a java.util.BitSet)."""

from __future__ import annotations

import orjson
import pytest

from rocketq.codec.pop import (
    AckMsg,
    BatchAck,
    PopCheckPoint,
    build_extra_info,
    build_msg_offset_info,
    build_order_count_info,
    build_pop_retry_topic,
    build_start_offset_info,
    decode_batch_ack_body,
    encode_batch_ack_body,
    parse_extra_info,
    parse_msg_offset_info,
    parse_normal_topic,
    parse_offset_info,
    retry_flag,
)


def test_the_handle_is_exactly_extra_info_util_s_text() -> None:
    text = build_extra_info(5, 1700000000000, 60000, 3, "T", "broker-a", 2, 7)
    assert text == "5 1700000000000 60000 3 0 broker-a 2 7"
    info = parse_extra_info(text)
    assert (
        info.ck_offset,
        info.pop_time,
        info.invisible_time,
        info.revive_qid,
        info.retry,
        info.broker_name,
        info.queue_id,
        info.queue_offset,
    ) == (5, 1700000000000, 60000, 3, "0", "broker-a", 2, 7)
    assert info.revive_time == 1700000060000 and not info.is_order
    assert build_extra_info(0, 1, 2, 999, "%RETRY%G_T", "b", 0) == "0 1 2 999 1 b 0"
    assert parse_extra_info("0 1 2 999 1 b 0").is_order
    with pytest.raises(ValueError):
        parse_extra_info("1 2 3")


def test_retry_topics_and_their_flags() -> None:
    assert build_pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert build_pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert [retry_flag(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    assert parse_normal_topic("%RETRY%G_T", "G") == "T" and parse_normal_topic("%RETRY%G+T", "G") == "T"
    assert parse_extra_info("0 1 2 3 1 b 0").real_topic("T", "G") == "%RETRY%G_T"
    assert parse_extra_info("0 1 2 3 2 b 0").real_topic("T", "G") == "%RETRY%G+T"


def test_offset_infos_round_trip() -> None:
    starts: list[str] = []
    build_start_offset_info(starts, "T", 0, 10)
    build_start_offset_info(starts, "%RETRY%G_T", 0, 3)
    assert ";".join(starts) == "0 0 10;1 0 3"
    assert parse_offset_info(";".join(starts)) == {"0@0": 10, "1@0": 3}
    msgs: list[str] = []
    build_msg_offset_info(msgs, "T", 1, [4, 6, 9])
    assert msgs == ["0 1 4,6,9"] and parse_msg_offset_info(msgs[0]) == {"0@1": [4, 6, 9]}
    counts: list[str] = []
    build_order_count_info(counts, "T", 2, 1, 17)
    build_order_count_info(counts, "T", 2, 0)
    assert counts == ["0 qo2%17 1", "0 2 0"]
    assert parse_offset_info(None) == {} and parse_msg_offset_info("") == {}


def test_checkpoint_body_uses_fastjson_short_names_and_finds_acks() -> None:
    ck = PopCheckPoint(10, 1000, 500, 3, 1, "T", "G", "broker-a", [0, 2, 5])
    d = orjson.loads(ck.encode())
    assert d == {
        "bm": 0,
        "bn": "broker-a",
        "c": "G",
        "d": [0, 2, 5],
        "it": 500,
        "n": 3,
        "pt": 1000,
        "q": 1,
        "reviveTime": 1500,
        "ro": 0,
        "so": 10,
        "t": "T",
    }
    assert list(d) == sorted(d)  # fastjson's field order
    back = PopCheckPoint.decode(ck.encode())
    assert back == ck
    assert [back.index_of_ack(o) for o in (10, 12, 15, 11, 9)] == [0, 1, 2, -1, -1]
    back.bit_map = 0b101
    assert back.unacked_offsets() == [12] and not back.all_acked
    assert ck.unique_id() == "T@1@10@G@1000@broker-a@ck"
    # an old checkpoint without diffs covers num consecutive offsets
    old = PopCheckPoint.decode(b'{"so":4,"pt":1,"it":2,"n":2,"q":0,"t":"T","c":"G"}')
    assert old.unacked_offsets() == [4, 5] and old.index_of_ack(6) == -1


def test_ack_bodies() -> None:
    ack = AckMsg(12, 10, "G", "T", 1, 1000, "broker-a")
    assert orjson.loads(ack.encode()) == {
        "ao": 12,
        "bn": "broker-a",
        "c": "G",
        "pt": 1000,
        "q": 1,
        "so": 10,
        "t": "T",
    }
    assert ack.tag == "ack" and ack.unique_id() == "T@1@12@G@1000@broker-a@ack"
    batch = AckMsg(-1, 10, "G", "T", 1, 1000, "broker-a", (10, 12))
    assert batch.tag == "bAck" and orjson.loads(batch.encode())["aol"] == [10, 12]
    assert AckMsg.decode(batch.encode()) == batch
    assert batch.unique_id() == "T@1@[10, 12]@G@1000@bAck"


def test_batch_ack_body_carries_a_java_bitset() -> None:
    acks = [BatchAck("G", "T", "0", 100, 2, 5, 1000, 60000, (100, 102, 109))]
    body = encode_batch_ack_body("broker-a", acks)
    d = orjson.loads(body)
    # BitSet{0, 2, 9}.toByteArray() = [0x05, 0x02], written by fastjson as base64
    assert d["acks"][0]["b"] == "BQI=" and d["brokerName"] == "broker-a"
    assert decode_batch_ack_body(body) == ("broker-a", acks)
    java = (
        b'{"acks":[{"b":"AQ==","c":"G","it":1,"pt":2,"q":0,"r":"1","rq":3,"so":7,"t":"T"}],"brokerName":"b"}'
    )
    assert decode_batch_ack_body(java) == ("b", [BatchAck("G", "T", "1", 7, 0, 3, 2, 1, (7,))])
    with pytest.raises(ValueError):
        decode_batch_ack_body(b"{nope")
