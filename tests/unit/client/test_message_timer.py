"""Message(delivery_timestamp=..., delay=...): the TIMER_* properties 5.x's client sets, and the
combinations the SDK refuses before anything is sent."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from rocketq import InvalidMessage, Message
from rocketq.client.producer.validators import check_batch


def test_a_delivery_time_and_a_delay_become_their_properties() -> None:
    at = Message("T", b"x", delivery_timestamp=1_800_000_000_123, properties={"k": "v"})
    assert at.properties == {"k": "v", "TIMER_DELIVER_MS": "1800000000123"}
    assert Message("T", b"x", delay=timedelta(seconds=1.5)).properties == {"TIMER_DELAY_MS": "1500"}
    assert Message("T", b"x", delay=2).properties == {"TIMER_DELAY_MS": "2000"}  # seconds
    assert Message("T", b"x").properties == {}
    # A variant made with replace() carries the new time, not both.
    later = dataclasses.replace(at, delivery_timestamp=None, delay=timedelta(minutes=1))
    assert later.properties == {"k": "v", "TIMER_DELAY_MS": "60000"}


@pytest.mark.parametrize("kw", [
    {"delivery_timestamp": 1, "delay": 1},
    {"delivery_timestamp": -1},
    {"delay": timedelta(seconds=-1)},
    {"delay": 5, "delay_level": 3},
])
def test_contradictions_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidMessage):
        Message("T", b"x", **kw)  # type: ignore[arg-type]


def test_a_batch_holds_no_timer_message() -> None:
    with pytest.raises(InvalidMessage, match="batching"):
        check_batch([Message("T", b"a"), Message("T", b"b", delay=1)], 4 * 1024 * 1024)
