"""The broker's side of timer messages with plain values: the send-path transform (HookUtils'
rounding, REAL_TOPIC / REAL_QID, refusals), the recall handle, the precision setting."""

from __future__ import annotations

import base64

import pytest

from rocketq.broker.timer import recall_handle_for, transform_timer_message
from rocketq.codec.properties import decode_properties, encode_properties
from rocketq.codec.recall import RecallHandle
from rocketq.errors import InvalidParameter, MessageIllegal, SystemError_
from rocketq.store.config import MessageStoreConfig, snap_timer_precision
from rocketq.store.timer import TIMER_TOPIC

# -- recall handle -----------------------------------------------------------------------------------


def test_the_recall_handle_is_javas_base64url_of_five_words() -> None:
    h = RecallHandle("TopicTest", "broker-a", "1700000000001", "7F0000010001ABCD")
    text = h.encode()
    assert base64.urlsafe_b64decode(text) == b"v1 TopicTest broker-a 1700000000001 7F0000010001ABCD"
    assert RecallHandle.decode(text) == h and h.timestamp == 1_700_000_000_001
    assert RecallHandle.decode(text.rstrip("=")) == h  # unpadded, as Java's decoder accepts
    for bad in ("", "not base64!", base64.urlsafe_b64encode(b"v2 a b c d").decode(),
                base64.urlsafe_b64encode(b"v1 a b c").decode()):
        with pytest.raises(InvalidParameter, match="recall handle is invalid"):
            RecallHandle.decode(bad)


# -- the send-path transform -------------------------------------------------------------------------


def _props(**kv: str) -> str:
    return encode_properties({"UNIQ_KEY": "U1", **kv})


def test_precision_snaps_like_javas_setter() -> None:
    assert [snap_timer_precision(v) for v in (1, 100, 150, 200, 499, 500, 999, 1000, 5000)] == [
        100, 100, 100, 200, 200, 500, 500, 1000, 1000]
    assert MessageStoreConfig(timer_precision_ms=250).timer_precision_ms == 200


@pytest.mark.parametrize(("prop", "value", "expected_out"), [
    ("TIMER_DELIVER_MS", "1000001234", 1000001200),  # rounded down to the slot
    ("TIMER_DELIVER_MS", "1000001300", 1000001200),  # on a boundary: one slot less (Java)
    ("TIMER_DELAY_MS", "1234", 1000001200),
    ("TIMER_DELAY_SEC", "2", 1000001900),
])
def test_a_timer_message_is_staged_on_the_timer_topic(prop: str, value: str, expected_out: int) -> None:
    config = MessageStoreConfig(timer_precision_ms=100)
    props = _props(**{prop: value})
    topic, queue, props = transform_timer_message("T", 3, props, config, now_ms=1_000_000_000)
    assert (topic, queue) == (TIMER_TOPIC, 0)
    d = decode_properties(props)
    assert (d["TIMER_OUT_MS"], d["REAL_TOPIC"], d["REAL_QID"]) == (str(expected_out), "T", "3")
    handle = RecallHandle.decode(recall_handle_for(props, "U1", "b1"))
    assert (handle.topic, handle.broker_name, handle.timestamp, handle.message_id) == (
        "T", "b1", expected_out + 1, "U1")


def test_past_and_illegal_times() -> None:
    config = MessageStoreConfig()
    now = 1_000_000_000
    past = _props(TIMER_DELIVER_MS=str(now - 5))
    assert transform_timer_message("T", 1, past, config, now_ms=now) == ("T", 1, past)  # delivered at once
    too_far = _props(TIMER_DELAY_SEC=str(3 * 24 * 3600 + 1))
    with pytest.raises(MessageIllegal, match="max delay 259200000ms"):
        transform_timer_message("T", 1, too_far, config, now_ms=now)
    with pytest.raises(MessageIllegal):
        transform_timer_message("T", 1, _props(TIMER_DELIVER_MS="soon"), config, now_ms=now)
    with pytest.raises(MessageIllegal):  # a recall whose time has passed
        transform_timer_message("T", 1, _props(TIMER_DELIVER_MS=str(now), TIMER_DEL_UNIQKEY="T+U"),
                                config, now_ms=now)
    fired_once = _props(TIMER_DELAY_MS="5000", TIMER_OUT_MS=str(now - 100))  # a consumed one, sent again
    assert transform_timer_message("T", 1, fired_once, config, now_ms=now) == ("T", 1, fired_once)
    with pytest.raises(SystemError_, match="timerWheelEnable is false"):
        transform_timer_message("T", 1, too_far, MessageStoreConfig(timer_wheel_enable=False), now_ms=now)
