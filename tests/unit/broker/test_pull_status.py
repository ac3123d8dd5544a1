"""The store status -> pull response code table of PROTOCOL.md §2.2, exactly."""

from __future__ import annotations

import pytest

from rocketq.broker.processors.pull import response_code_for
from rocketq.store.model import GetMessageStatus

TABLE = [
    # status, request offset, code
    ("FOUND", 0, 0),
    ("FOUND", 9, 0),
    ("NO_MATCHED_MESSAGE", 3, 20),
    ("MESSAGE_WAS_REMOVING", 3, 20),
    ("NO_MESSAGE_IN_QUEUE", 0, 19),
    ("NO_MESSAGE_IN_QUEUE", 5, 21),
    ("NO_MATCHED_LOGIC_QUEUE", 0, 19),
    ("NO_MATCHED_LOGIC_QUEUE", 5, 21),
    ("OFFSET_TOO_SMALL", 1, 21),
    ("OFFSET_OVERFLOW_ONE", 4, 19),
    ("OFFSET_OVERFLOW_BADLY", 9, 21),
    ("OFFSET_FOUND_NULL", 2, 19),
]


@pytest.mark.parametrize(("status", "offset", "code"), TABLE)
def test_status_table(status: str, offset: int, code: int) -> None:
    assert response_code_for(status, offset) == code


def test_every_store_status_is_mapped() -> None:
    for status in GetMessageStatus:
        response_code_for(status.name, 0)
        response_code_for(status.name, 1)


def test_unknown_status_is_an_error() -> None:
    with pytest.raises(ValueError):
        response_code_for("NOPE", 0)
