"""Message values and what the producer puts on the wire for them (no network).

The V2 send header is written by hand on the hot path, so these tests decode it with the codec's
typed SendMessageRequestHeader: if either side drifts, they fail.
"""

from __future__ import annotations

import dataclasses
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.config import ClientConfig, unwrap_namespace, wrap_namespace
from rocketq.client.message import Message, MessageQueue, SendResult, SendStatus
from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.kernel import SendEncoder, UniqKeys, message_properties
from rocketq.client.producer.validators import check_batch, check_group, check_message, check_topic
from rocketq.codec.headers import SendMessageRequestHeader
from rocketq.codec.message import MessageSysFlag, decode_batch_body, decode_properties
from rocketq.errors import InvalidArgument, InvalidMessage

CONFIG = ProducerConfig(producer_group="PG", client_ip="10.1.2.3")


def encoder(**changes: object) -> SendEncoder:
    return SendEncoder(CONFIG.replace(**changes), UniqKeys("10.1.2.3"))


def test_message_is_a_frozen_value() -> None:
    m = Message("T", b"x", tags="A", keys=["a", "b"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.topic = "U"  # type: ignore[misc]
    assert m.keys_text == "a b"
    assert Message("T", b"x", keys="a b").keys_text == "a b"
    assert Message("T", b"x", keys=[]).keys_text is None
    assert m.with_properties(k="v").get_property("k") == "v" and m.properties == {}
    assert hash(Message("T", b"x", keys=("a", "b"))) == hash(Message("T", b"x", keys=("a", "b")))


def test_properties_string_has_fields_user_properties_and_uniq_key() -> None:
    msg = Message("T", b"x", tags="TagA", keys=["k1", "k2"], delay_level=3, properties={"color": "red"})
    text, extras = message_properties(msg, "UNIQ1")
    assert extras == {}
    assert text.endswith("\x02")
    assert decode_properties(text) == {
        "color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "true", "UNIQ_KEY": "UNIQ1"
    }
    # reserved names in properties never override the dedicated fields
    reserved = Message("T", b"x", tags="A", properties={"TAGS": "B", "UNIQ_KEY": "u"})
    text, _ = message_properties(reserved, "U2")
    assert decode_properties(text)["TAGS"] == "A" and decode_properties(text)["UNIQ_KEY"] == "U2"
    no_wait, _ = message_properties(Message("T", b"x", wait_store_msg_ok=False), None)
    assert decode_properties(no_wait) == {"WAIT": "false"}


def test_retry_topic_resend_moves_reconsume_counts_to_the_header() -> None:
    msg = Message("%RETRY%G", b"x", delay_level=4, properties={
        "RETRY_TOPIC": "T", "RECONSUME_TIME": "2", "MAX_RECONSUME_TIMES": "16", "ORIGIN_MESSAGE_ID": "ID"})
    prep = encoder().single(msg)
    h = SendMessageRequestHeader.from_ext_v2(prep.ext_for(0, "b"))
    assert h.reconsume_times == 2 and h.max_reconsume_times == 16
    props = decode_properties(h.properties or "")
    assert "RECONSUME_TIME" not in props and props["RETRY_TOPIC"] == "T" and props["DELAY"] == "4"


def test_single_send_header_decodes_with_the_typed_header() -> None:
    prep = encoder().single(Message("T", b"body", tags="A", flag=7))
    ext = prep.ext_for(3, "broker-a")
    h = SendMessageRequestHeader.from_ext_v2(ext)
    assert (h.producer_group, h.topic, h.default_topic) == ("PG", "T", "TBW102")
    assert h.default_topic_queue_nums == 4
    assert (h.queue_id, h.sys_flag, h.flag, h.batch, h.unit_mode, h.broker_name) == (3, 0, 7, False, False,
                                                                                     "broker-a")
    assert h.born_timestamp > 1_600_000_000_000
    assert decode_properties(h.properties or "")["UNIQ_KEY"] == prep.msg_id
    assert prep.msg_id.startswith("0A010203") and len(prep.msg_id) == 32
    assert prep.ext_for(1, "broker-b") is ext and ext["e"] == "1"  # set in place for a retry
    assert prep.body == b"body" and prep.topic == "T"
    # a UNIQ_KEY the message already carries is kept (a consumer re-sending keeps its id)
    assert encoder().single(Message("T", b"x", properties={"UNIQ_KEY": "MINE"})).msg_id == "MINE"


def test_bodies_over_the_limit_are_zlib_compressed() -> None:
    body = b"abc" * 2000
    prep = encoder().single(Message("T", body))
    sys_flag = int(prep.ext["f"])
    assert sys_flag & MessageSysFlag.COMPRESSED_FLAG
    assert sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK == MessageSysFlag.COMPRESSION_ZLIB
    assert zlib.decompress(prep.body) == body
    at_limit = encoder().single(Message("T", b"a" * 4096))
    assert at_limit.ext["f"] == "0" and at_limit.body == b"a" * 4096
    assert encoder(compress_msg_body_over_howmuch=10).single(Message("T", b"a" * 11)).ext["f"] != "0"


def test_batch_body_has_one_uniq_key_per_message() -> None:
    msgs = [Message("T", b"m%d" % i, tags="A", keys=f"k{i}", flag=i) for i in range(5)]
    prep = encoder().batch(msgs)
    assert prep.batch and prep.ext["m"] == "true"
    items = decode_batch_body(prep.body)
    ids = prep.msg_id.split(",")
    assert [it.body for it in items] == [m.body for m in msgs] and [it.flag for it in items] == list(range(5))
    assert [decode_properties(it.properties)["UNIQ_KEY"] for it in items] == ids
    assert len(set(ids)) == 5
    header = SendMessageRequestHeader.from_ext_v2(prep.ext_for(0, "b"))
    header_props = decode_properties(header.properties or "")
    # Apache's broker appends these to every message (the later key wins): no id may ride here
    assert header_props == {"WAIT": "true"}
    with pytest.raises(InvalidMessage):  # the encoded batch is over max_message_size
        encoder(max_message_size=100).batch([Message("T", b"x" * 60), Message("T", b"y" * 60)])


def test_namespace_wraps_topic_and_group() -> None:
    enc = encoder(namespace="ns1")
    prep = enc.single(Message("T", b"x"))
    assert prep.ext["b"] == "ns1%T" and prep.ext["a"] == "ns1%PG" and prep.topic == "T"
    assert wrap_namespace("ns1", "%RETRY%G") == "%RETRY%ns1%G"
    assert wrap_namespace("ns1", "ns1%T") == "ns1%T"
    assert unwrap_namespace("ns1", "%RETRY%ns1%G") == "%RETRY%G"
    assert unwrap_namespace("ns1", "ns1%T") == "T" and unwrap_namespace(None, "ns1%T") == "ns1%T"


def test_message_checks() -> None:
    check_message(Message("T", b"x"), 10)
    for bad in (Message("", b"x"), Message("a b", b"x"), Message("T" * 128, b"x"),
                Message("OFFSET_MOVED_EVENT", b"x"), Message("T", b""), Message("T", b"x" * 11),
                Message("T", None), Message("T", "text"), Message("T", b"x", delay_level=-1)):  # type: ignore[arg-type]
        with pytest.raises(InvalidMessage):
            check_message(bad, 10)
    with pytest.raises(InvalidMessage):
        check_message("not a message", 10)  # type: ignore[arg-type]
    check_topic("%RETRY%group_1-a|b")
    check_message(Message("bad topic", b"x"), 10, check_topic_name=False)
    with pytest.raises(InvalidMessage):
        check_batch([Message("T", b"x", wait_store_msg_ok=False), Message("T", b"y")], 10)
    with pytest.raises(InvalidMessage):
        check_batch([Message("%RETRY%G", b"x")], 10)
    for bad_group in ("", " ", "g g", "g" * 256):
        with pytest.raises(InvalidArgument):
            check_group(bad_group)


def test_send_result_and_client_id() -> None:
    mq = MessageQueue("T", "b", 1)
    r = SendResult(SendStatus.SEND_OK, "ID", mq, 5)
    assert r.send_status is SendStatus.SEND_OK and r.region_id is None
    cfg = ClientConfig(client_ip="10.0.0.1", instance_name="inst", unit_name="u1")
    assert cfg.client_id() == "10.0.0.1@inst@u1"
    default = ClientConfig(client_ip="10.0.0.1").client_id()
    assert default.startswith("10.0.0.1@") and "#" in default and "DEFAULT" not in default
    assert default == ClientConfig(client_ip="10.0.0.1").client_id()  # stable within a process
    assert ProducerConfig(client_ip="1.2.3.4").client_config() == ClientConfig(client_ip="1.2.3.4")


_KEYS = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", min_codepoint=33), min_size=1,
                max_size=8)
_VALUES = st.text(alphabet=st.characters(blacklist_characters="\x01\x02"), min_size=1, max_size=8)


@given(st.dictionaries(_KEYS, _VALUES, max_size=5),
       st.one_of(st.none(), st.text(alphabet="abcXYZ", min_size=1, max_size=5)))
def test_properties_round_trip(user: dict[str, str], tags: str | None) -> None:
    user = {k: v for k, v in user.items() if k not in {"TAGS", "KEYS", "DELAY", "WAIT", "UNIQ_KEY"}}
    text, _ = message_properties(Message("T", b"x", tags=tags, properties=user), "U")
    decoded = decode_properties(text)
    assert {k: decoded[k] for k in user} == user
    assert decoded.get("TAGS") == tags and decoded["UNIQ_KEY"] == "U"


@given(st.lists(st.tuples(st.sampled_from([None, "", "A", "t\u00e9g"]),
                          st.sampled_from([None, "", "k1", "k1 k2"]),
                          st.booleans(), st.integers(0, 3), st.binary(min_size=1, max_size=40)),
                min_size=1, max_size=30))
def test_batch_items_of_like_messages_are_the_items_built_one_by_one(
        shapes: list[tuple[str | None, str | None, bool, int, bytes]]) -> None:
    # the fixed parts an encoder keeps per message shape give exactly what building each item whole gives
    enc = encoder()
    for tags, keys, wait, flag, body in shapes * 2:  # twice: the second round is served from the table
        msg = Message("T", body, tags=tags, keys=keys, flag=flag, wait_store_msg_ok=wait)
        item, uniq = enc.batch_item(msg)
        whole, _ = enc.batch_item(dataclasses.replace(msg, keys=[keys] if keys else None))  # built whole
        [decoded] = decode_batch_body(item)
        assert decoded.body == body and decoded.flag == flag
        assert item == whole.replace(whole[-33:-1], uniq.encode())  # only the id differs
    assert 0 < len(enc._item_parts) <= 256
