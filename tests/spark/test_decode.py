"""The bulk Arrow decoder equals the codec's per-message decoder; planning and options rules.
No Spark session or cluster here: these run in milliseconds."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.codec.message import (
    MessageExt,
    MessageSysFlag,
    decode_messages,
    decode_properties,
    encode_message,
    java_string_hash,
)
from rocketq.spark._broker import QueueRef
from rocketq.spark._decode import as_u8, locate, record_starts, to_record_batch
from rocketq.spark.errors import SparkOptionError
from rocketq.spark.options import EARLIEST, LATEST, ReadOptions, WriteOptions, parse_offsets, parse_tags
from rocketq.spark.planning import QueueRange, rate_limit, split
from rocketq.spark.schema import RowSchema
from rocketq.spark.writer import UniqIds, java_hashes


def _msg(i: int, **kw: object) -> MessageExt:
    base: dict[str, object] = dict(
        topic="T", body=f"body{i}".encode() * (i % 5), queue_id=i % 3, queue_offset=i,
        commit_log_offset=1000 + i * 7, born_timestamp=1_700_000_000_000 + i,
        store_timestamp=1_700_000_000_500 + i,
        born_host=("10.1.2.3", 5000 + i % 2), store_host=("127.0.0.1", 10911), reconsume_times=i % 4,
        properties={"TAGS": f"t{i % 2}", "KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}"},
    )
    base.update(kw)
    return MessageExt(**base)  # type: ignore[arg-type]


def _expected(m: MessageExt, raw_props: str | None = None) -> dict[str, object]:
    props = m.properties
    return {
        "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
        "msg_id": m.msg_id, "keys": m.keys, "tags": m.tags,
        "body": zlib.decompress(m.body) if m.sys_flag & MessageSysFlag.COMPRESSED_FLAG else m.body,
        "properties": props, "born_ms": m.born_timestamp, "store_ms": m.store_timestamp,
        "reconsume_times": m.reconsume_times,
    }


def _decode(buf: bytes) -> list[dict[str, object]]:
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    rows = to_record_batch(lay, RowSchema.default(), broker="b").to_pylist()
    for r in rows:
        r["properties"] = dict(r["properties"])
        r["born_ms"] = int(r.pop("born_timestamp").timestamp() * 1000)
        r["store_ms"] = int(r.pop("store_timestamp").timestamp() * 1000)
        r.pop("broker")
        r.pop("born_host")
    return rows


def test_bulk_decode_equals_codec() -> None:
    msgs = [_msg(i) for i in range(300)]
    msgs.append(_msg(300, topic="L" * 200))  # V2 magic (topic longer than 127 bytes)
    msgs.append(_msg(301, born_host=("::1", 7), store_host=("fe80::1", 10911)))  # IPv6 hosts
    msgs.append(_msg(302, properties={}))  # no properties: msg_id is the offset msgId
    msgs.append(_msg(303, body=zlib.compress(b"x" * 5000), sys_flag=MessageSysFlag.COMPRESSED_FLAG))
    buf = b"".join(encode_message(m) for m in msgs)
    got = _decode(buf)
    assert got == [_expected(m) for m in decode_messages(buf)]
    assert got[302]["msg_id"] == msgs[302].offset_msg_id


def test_born_host_and_offset_msg_id() -> None:
    msgs = [_msg(i, properties={}) for i in range(4)]
    buf = b"".join(encode_message(m) for m in msgs)
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    batch = to_record_batch(lay, RowSchema.default(), broker="b")
    assert batch.column("born_host").to_pylist() == [f"10.1.2.3:{5000 + i % 2}" for i in range(4)]
    assert batch.column("msg_id").to_pylist() == [m.offset_msg_id for m in msgs]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab\x01\x02=", max_size=12), min_size=1, max_size=20))
def test_property_parsing_follows_rocketmq_rule(texts: list[str]) -> None:
    buf = b""
    for i, text in enumerate(texts):
        m = _msg(i, properties={})
        raw = encode_message(m)
        # Splice a raw properties string in (the codec encoder would normalise it).
        head = raw[: len(raw) - 2]
        props = text.encode()
        total = len(head) + 2 + len(props)
        buf += total.to_bytes(4, "big") + head[4:] + len(props).to_bytes(2, "big") + props
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    got = to_record_batch(lay, RowSchema((RowSchema.default().columns[8],)), broker="b")
    for text, value in zip(texts, got.column(0).to_pylist(), strict=True):
        expected = decode_properties(text)
        assert dict(value) == expected
        assert len(value) == len(expected)  # a repeated key appears once: the last one wins


def _with_raw_properties(raws: list[bytes]) -> bytes:
    buf = b""
    for i, props in enumerate(raws):
        raw = encode_message(_msg(i, properties={}))
        head = raw[: len(raw) - 2]
        total = len(head) + 2 + len(props)
        buf += total.to_bytes(4, "big") + head[4:] + len(props).to_bytes(2, "big") + props
    return buf


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "a", "bb"]),
                                   st.text(alphabet="xyz\u00e9", min_size=1, max_size=5)), max_size=6),
                min_size=1, max_size=15))
def test_well_formed_properties_with_repeated_keys_keep_the_last(rows: list[list[tuple[str, str]]]) -> None:
    raws = ["".join(f"{k}\x01{v}\x02" for k, v in pairs).encode() for pairs in rows]
    buf = _with_raw_properties(raws)
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    schema = RowSchema.from_fields([("properties", "map<string,string>"), ("keys", "string"),
                                    ("tags", "string"), ("msg_id", "string")])
    got = to_record_batch(lay, schema, broker="b").to_pylist()
    for pairs, row in zip(rows, got, strict=True):
        expected = dict(pairs)
        assert dict(row["properties"]) == expected
        assert len(row["properties"]) == len(expected)
        assert row["keys"] == expected.get("KEYS") and row["tags"] == expected.get("TAGS")
        if "UNIQ_KEY" in expected:
            assert row["msg_id"] == expected["UNIQ_KEY"]


def test_repeated_property_key_agrees_with_codec() -> None:
    buf = _with_raw_properties([b"KEYS\x01k1\x02TAGS\x01t\x02KEYS\x01k2\x02", b"KEYS\x01only\x02"])
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    got = to_record_batch(lay, RowSchema.default(), broker="b").to_pylist()
    codec = decode_messages(buf)
    assert [dict(r["properties"]) for r in got] == [m.properties for m in codec]
    assert [len(r["properties"]) for r in got] == [2, 1]
    assert [r["keys"] for r in got] == [m.keys for m in codec] == ["k2", "only"]


def test_locate_stops_at_garbage_and_wrong_sizes() -> None:
    good = b"".join(encode_message(_msg(i)) for i in range(5))
    starts = np.array(record_starts(good), dtype=np.int64)
    buf = good + b"\x00" * 200
    assert locate(as_u8(buf), np.append(starts, len(good))).n == 5
    sizes = np.diff(np.append(starts, len(good)))
    sizes[3] += 1
    assert locate(as_u8(good), starts, sizes).n == 3
    assert locate(as_u8(good[:-10]), starts).n == 4


def test_body_as_string_keeps_corrupt_bytes() -> None:
    buf = encode_message(_msg(1, body=b"ok")) + encode_message(_msg(2, body=b"\xff\xfe"))
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    schema = RowSchema.from_fields([("body", "string"), ("_corrupt_body", "binary")])
    rows = to_record_batch(lay, schema, broker="b").to_pylist()
    assert rows == [{"body": "ok", "_corrupt_body": None}, {"body": None, "_corrupt_body": b"\xff\xfe"}]


def test_tag_filter_rechecks_strings() -> None:
    buf = b"".join(encode_message(_msg(i)) for i in range(10))
    lay = locate(as_u8(buf), np.array(record_starts(buf), dtype=np.int64))
    batch = to_record_batch(lay, RowSchema.default(), broker="b", tags_filter=("t1",))
    assert batch.column("queue_offset").to_pylist() == [1, 3, 5, 7, 9]


def test_options_validation() -> None:
    base = {"namesrv": "127.0.0.1:9876", "topic": "T"}
    assert ReadOptions.parse(base).starting.default == EARLIEST
    assert ReadOptions.parse(base, streaming=True).starting.default == LATEST
    with pytest.raises(SparkOptionError, match="'bogus'"):
        ReadOptions.parse({**base, "bogus": "1"})
    with pytest.raises(SparkOptionError, match="startingOffsets"):
        ReadOptions.parse({**base, "startingOffsets": "{"})
    with pytest.raises(SparkOptionError, match="endingOffsets"):
        ReadOptions.parse({**base, "endingOffsets": "x"}, streaming=True)
    with pytest.raises(SparkOptionError, match="topic"):
        ReadOptions.parse({"namesrv": "a:1", "topic": "T", "topicPattern": "T.*"})
    with pytest.raises(SparkOptionError, match="minPartitions"):
        ReadOptions.parse({**base, "minPartitions": "zero"})
    with pytest.raises(SparkOptionError, match="subExpression"):
        ReadOptions.parse({**base, "subExpression": "A | B"})
    spec = parse_offsets("startingOffsets", '{"T": {"b": {"0": 5, "1": -1}}}', EARLIEST)
    assert spec.get(("T", "b", 0)) == 5 and spec.get(("T", "b", 1)) == LATEST
    assert spec.get(("T", "b", 2)) == EARLIEST
    assert parse_tags("A || B") == ("A", "B") and parse_tags("*") is None
    with pytest.raises(SparkOptionError, match="namesrv"):
        WriteOptions.parse({"topic": "T"})


def test_split_and_rate_limit() -> None:
    ref = QueueRef("T", "b", 0)
    parts = split([QueueRange(ref, 0, 100), QueueRange(QueueRef("T", "b", 1), 0, 10)], 1000, 11)
    assert sum(p.size for p in parts) == 110 and len(parts) >= 11
    assert [p.size for p in split([QueueRange(ref, 0, 10)], 3, None)] == [3, 3, 2, 2]
    starts = {("T", "b", 0): 0, ("T", "b", 1): 0}
    latest = {("T", "b", 0): 900, ("T", "b", 1): 100, ("T", "b", 2): 0}
    ends = rate_limit(starts, latest, 100)
    assert sum(ends[k] - starts.get(k, 0) for k in ends) == 100
    assert ends[("T", "b", 0)] == 90 and ends[("T", "b", 1)] == 10
    assert rate_limit(starts, latest, 5000) == latest


def test_uniq_ids_and_hashes() -> None:
    ids = UniqIds().take(200_000).to_pylist()
    assert len(set(ids)) == len(ids) and all(len(i) == 32 for i in ids)
    import pyarrow as pa
    values = ["", "a", "user-17", "Hello World", None]
    got = java_hashes(pa.array(values, pa.string())).tolist()
    assert got == [java_string_hash(v or "") for v in values]


def test_kafka_style_options_validation() -> None:
    base = {"namesrv": "127.0.0.1:9876", "topic": "T"}
    opts = ReadOptions.parse({**base, "startingOffsetsByTimestamp": '{"T": {"b": {"0": 1000, "1": 2000}}}',
                              "startingOffsetsByTimestampStrategy": "LATEST"})
    assert opts.starting_by_timestamp == ((("T", "b", 0), 1000), (("T", "b", 1), 2000))
    assert opts.no_match_latest and not ReadOptions.parse(base).no_match_latest
    for bad, needle in [
        ({"startingOffsetsByTimestamp": '{"T": {"b": {"0": -5}}}'}, "startingOffsetsByTimestamp.*>= 0"),
        ({"startingOffsetsByTimestamp": '{"T": {"0": 5}}'}, "startingOffsetsByTimestamp"),
        ({"endingOffsetsByTimestamp": "{}"}, "endingOffsetsByTimestamp.*names no queue"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, "startingOffsetsByTimestampStrategy"),
        ({"minOffsetsPerTrigger": "10"}, "minOffsetsPerTrigger.*streaming"),
        ({"groupIdPrefix": "p", "consumerGroup": "g"}, "groupIdPrefix.*not both"),
        ({"groupIdPrefix": "p", "namesrv": "", "path": "/data"}, "groupIdPrefix.*no group"),
        ({"maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger.*streaming"),
        ({"consumerGroup": "g", "namesrv": "", "path": "/data"}, "consumerGroup.*no group"),
        ({"brokerName": "b"}, "brokerName.*path read"),
    ]:
        with pytest.raises(SparkOptionError, match=needle):
            ReadOptions.parse({**base, **bad})
    for bad, needle in [
        ({"endingOffsetsByTimestamp": '{"T": {"b": {"0": 5}}}'}, "endingOffsetsByTimestamp.*streaming"),
        ({"maxTriggerDelay": "5m"}, "maxTriggerDelay.*minOffsetsPerTrigger"),
        ({"minOffsetsPerTrigger": "10", "maxTriggerDelay": "soon"}, "maxTriggerDelay.*duration"),
        ({"minOffsetsPerTrigger": "100", "maxOffsetsPerTrigger": "10"}, "minOffsetsPerTrigger.*above"),
    ]:
        with pytest.raises(SparkOptionError, match=needle):
            ReadOptions.parse({**base, **bad}, streaming=True)
    timed = ReadOptions.parse({**base, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "30s"},
                              streaming=True)
    assert (timed.min_offsets_per_trigger, timed.max_trigger_delay_ms) == (10, 30_000)
    default = ReadOptions.parse({**base, "minOffsetsPerTrigger": "1"}, streaming=True)
    assert default.max_trigger_delay_ms == 900_000
    at_load = ReadOptions.parse({**base, "minOffsetsPerTrigger": "1", "startingOffsets": "latest"},
                                streaming=None)
    assert at_load.min_offsets_per_trigger == 1  # load() cannot tell a stream from a batch yet
    a, b = (ReadOptions.parse({**base, "groupIdPrefix": "etl"}).group for _ in range(2))
    assert a.startswith("etl-") and b.startswith("etl-") and a != b
    assert ReadOptions.parse(base).group == "rocketq-spark"


def test_queue_lag_reads_rocketq_offsets_only() -> None:
    from rocketq.spark import queue_lag

    ours = {"latestOffset": '{"T": {"b": {"0": 50, "1": 7}}}', "endOffset": '{"T": {"b": {"0": 20, "1": 7}}}'}
    kafka = {"latestOffset": '{"K": {"0": 9}}', "endOffset": '{"K": {"0": 1}}'}
    idle = {"latestOffset": None, "endOffset": '{"T": {"b": {"0": 1}}}'}
    assert queue_lag({"sources": [ours, kafka, idle]}) == {"T/b/0": 30, "T/b/1": 0}
