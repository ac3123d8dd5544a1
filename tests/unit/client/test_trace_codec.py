"""Trace records (rocketq.client.trace.codec) against the text RocketMQ 4.9.8's TraceDataEncoder
writes: golden strings built field by field from its encoder, decoded and re-encoded."""

from __future__ import annotations

import pytest

from rocketq.client.trace.codec import (
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    decode_traces,
    encode_trace,
    trace_keys,
    unique_keys,
)

C, F = "\x01", "\x02"
T = 1_700_000_000_123

# TraceDataEncoderTest's Pub record, as the Java client writes it.
JAVA_PUB = C.join(["Pub", str(T), "DefaultRegion", "PID-test", "topic-test",
                   "AC1415116D1418B4AAC217FE1B4E0000", "Tags", "Keys", "127.0.0.1:10911", "26", "245", "0",
                   "0A9A002600002A9F0000000000002329", "true"]) + F
# A consumer's pair for two messages of one batch (one record per message, shared requestId).
JAVA_SUB_BEFORE = (C.join(["SubBefore", str(T), "DefaultRegion", "CG", "7F0000011D2C18B4AAC2", "ID1", "0",
                           "k1 k2"]) + F
                   + C.join(["SubBefore", str(T), "DefaultRegion", "CG", "7F0000011D2C18B4AAC2", "ID2", "3",
                             "null"]) + F)
JAVA_SUB_AFTER = C.join(["SubAfter", "7F0000011D2C18B4AAC2", "ID1", "12", "false", "k1 k2", "2", str(T + 30),
                         "CG"]) + F
JAVA_END_TX = C.join(["EndTransaction", str(T), "DefaultRegion", "PID-tx", "topic-test",
                      "AC1415116D1418B4AAC217FE1B4E0000", "Tags", "Keys", "127.0.0.1:10911", "2",
                      "transactionId", "COMMIT_MESSAGE", "false"]) + F


def test_decodes_the_java_pub_record() -> None:
    [ctx] = decode_traces(JAVA_PUB)
    assert ctx.trace_type is TraceType.Pub
    assert (ctx.timestamp, ctx.region_id, ctx.group_name, ctx.cost_time, ctx.success) == (
        T, "DefaultRegion", "PID-test", 245, True)
    [b] = ctx.beans
    assert (b.topic, b.msg_id, b.tags, b.keys, b.store_host, b.body_length, b.msg_type, b.offset_msg_id) == (
        "topic-test", "AC1415116D1418B4AAC217FE1B4E0000", "Tags", "Keys", "127.0.0.1:10911", 26,
        MessageType.Normal_Msg, "0A9A002600002A9F0000000000002329")
    assert encode_trace(ctx) == JAVA_PUB  # and back, byte for byte


def test_encodes_like_the_java_encoder() -> None:
    ctx = TraceContext(TraceType.Pub, T, "DefaultRegion", "PID-test", cost_time=245, success=True, beans=(
        TraceBean(topic="topic-test", msg_id="AC1415116D1418B4AAC217FE1B4E0000", tags="Tags", keys="Keys",
                  store_host="127.0.0.1:10911", body_length=26, msg_type=MessageType.Normal_Msg,
                  offset_msg_id="0A9A002600002A9F0000000000002329"),))
    assert encode_trace(ctx) == JAVA_PUB
    assert len(encode_trace(ctx).split(C)) == 14
    assert sorted(trace_keys(ctx)) == ["AC1415116D1418B4AAC217FE1B4E0000", "Keys"]


def test_missing_tags_and_keys_are_written_as_java_writes_null() -> None:
    ctx = TraceContext(TraceType.Pub, T, "R", "G", beans=(TraceBean(topic="t", msg_id="M", tags=None,
                                                                    keys=None, offset_msg_id=None),))
    fields = encode_trace(ctx).rstrip(F).split(C)
    assert fields[6] == "null" and fields[7] == "null" and fields[12] == "null"
    assert trace_keys(ctx) == ["M"]


def test_sub_before_and_after() -> None:
    before = decode_traces(JAVA_SUB_BEFORE)
    assert [c.trace_type for c in before] == [TraceType.SubBefore] * 2
    assert [(c.beans[0].msg_id, c.beans[0].retry_times, c.beans[0].keys) for c in before] == [
        ("ID1", 0, "k1 k2"), ("ID2", 3, "null")]
    assert {c.request_id for c in before} == {"7F0000011D2C18B4AAC2"}
    assert before[0].group_name == "CG" and before[0].region_id == "DefaultRegion"
    # one context of two beans encodes to the two records
    joined = TraceContext(TraceType.SubBefore, T, "DefaultRegion", "CG", request_id="7F0000011D2C18B4AAC2",
                          beans=(TraceBean(msg_id="ID1", keys="k1 k2"),
                                 TraceBean(msg_id="ID2", retry_times=3, keys=None)))
    assert encode_trace(joined) == JAVA_SUB_BEFORE
    assert trace_keys(joined) == ["ID1", "k1", "k2", "ID2"]

    [after] = decode_traces(JAVA_SUB_AFTER)
    assert (after.trace_type, after.request_id, after.cost_time, after.success, after.context_code,
            after.timestamp, after.group_name) == (TraceType.SubAfter, "7F0000011D2C18B4AAC2", 12, False, 2,
                                                   T + 30, "CG")
    assert after.beans[0].msg_id == "ID1" and after.beans[0].keys == "k1 k2"
    assert encode_trace(after) == JAVA_SUB_AFTER


def test_sub_after_of_an_old_client_has_no_time_nor_group() -> None:
    [ctx] = decode_traces(C.join(["SubAfter", "R1", "ID1", "5", "true", "k"]) + F)
    got = (ctx.cost_time, ctx.success, ctx.context_code, ctx.timestamp, ctx.group_name)
    assert got == (5, True, 0, 0, "")


def test_end_transaction_round_trip() -> None:
    [ctx] = decode_traces(JAVA_END_TX)
    b = ctx.beans[0]
    assert (ctx.trace_type, ctx.group_name, b.msg_type, b.transaction_id, b.transaction_state,
            b.from_transaction_check) == (TraceType.EndTransaction, "PID-tx", MessageType.Trans_msg_Commit,
                                          "transactionId", "COMMIT_MESSAGE", False)
    assert encode_trace(ctx) == JAVA_END_TX


def test_pub_variants_of_older_clients() -> None:
    base = ["Pub", str(T), "R", "G", "t", "M", "tg", "k", "h:1", "3", "4", "3"]
    [thirteen] = decode_traces(C.join([*base, "false"]) + F)
    assert thirteen.success is False and thirteen.beans[0].msg_type is MessageType.Delay_Msg
    [fifteen] = decode_traces(C.join([*base, "OFF", "TRUE", "10.0.0.1"]) + F)
    assert fifteen.success is True and fifteen.beans[0].offset_msg_id == "OFF"
    assert fifteen.beans[0].client_host == "10.0.0.1"


@pytest.mark.parametrize("junk", ["", F, "Nope\x01x" + F, "Pub\x01notanumber" + F, "Pub" + F])
def test_junk_is_skipped_and_the_rest_decodes(junk: str) -> None:
    contexts = decode_traces(junk + JAVA_PUB + junk + JAVA_END_TX)
    assert [c.trace_type for c in contexts] == [TraceType.Pub, TraceType.EndTransaction]


def test_a_batch_body_is_the_records_back_to_back() -> None:
    body = JAVA_PUB + JAVA_SUB_BEFORE + JAVA_SUB_AFTER + JAVA_END_TX
    assert [c.trace_type.value for c in decode_traces(body)] == [
        "Pub", "SubBefore", "SubBefore", "SubAfter", "EndTransaction"]
    assert unique_keys(["a", "b", "a", "", "c"]) == "a b c"


# Printed by RocketMQ 4.9.8's own TraceDataEncoder.encoderFromContextBean (its classes compiled from
# the release source, run once with these values): null tags/keys, two-message batches, a rollback.
JAVA_ENCODER_OUTPUT = {
    "pub": "Pub\x011700000000123\x01DefaultRegion\x01PG\x01T\x01MID1\x01null\x01null\x01127.0.0.1:10911"
           "\x015\x017\x013\x01OFF1\x01true\x02",
    "sub_before": "SubBefore\x011700000000123\x01R1\x01CG\x01REQ1\x01M1\x012\x01k1 k2\x02"
                  "SubBefore\x011700000000123\x01R1\x01CG\x01REQ1\x01M2\x010\x01null\x02",
    "sub_after": "SubAfter\x01REQ1\x01M1\x014\x01false\x01k1 k2\x012\x011700000000132\x01CG\x02"
                 "SubAfter\x01REQ1\x01M2\x014\x01false\x01null\x012\x011700000000132\x01CG\x02",
    "end_tx": "EndTransaction\x011700000000123\x01DefaultRegion\x01TXG\x01T\x01MID2\x01tg\x01k"
              "\x01127.0.0.1:10911\x012\x01TID\x01ROLLBACK_MESSAGE\x01true\x02",
}


def test_same_text_as_the_java_encoder() -> None:
    t = 1_700_000_000_123
    b1, b2 = TraceBean(msg_id="M1", retry_times=2, keys="k1 k2"), TraceBean(msg_id="M2", keys=None)
    ours = {
        "pub": TraceContext(TraceType.Pub, t, "DefaultRegion", "PG", cost_time=7, beans=(TraceBean(
            topic="T", msg_id="MID1", tags=None, keys=None, store_host="127.0.0.1:10911", body_length=5,
            msg_type=MessageType.Delay_Msg, offset_msg_id="OFF1"),)),
        "sub_before": TraceContext(TraceType.SubBefore, t, "R1", "CG", request_id="REQ1", beans=(b1, b2)),
        "sub_after": TraceContext(TraceType.SubAfter, t + 9, "", "CG", cost_time=4, success=False,
                                  request_id="REQ1", context_code=2, beans=(b1, b2)),
        "end_tx": TraceContext(TraceType.EndTransaction, t, "DefaultRegion", "TXG", beans=(TraceBean(
            topic="T", msg_id="MID2", tags="tg", keys="k", store_host="127.0.0.1:10911",
            msg_type=MessageType.Trans_msg_Commit, transaction_id="TID", transaction_state="ROLLBACK_MESSAGE",
            from_transaction_check=True),)),
    }
    for name, ctx in ours.items():
        assert encode_trace(ctx) == JAVA_ENCODER_OUTPUT[name], name
        decoded = decode_traces(JAVA_ENCODER_OUTPUT[name])
        assert "".join(encode_trace(c) for c in decoded) == JAVA_ENCODER_OUTPUT[name], name
