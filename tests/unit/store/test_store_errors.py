"""The store's refusals are members of the one error tree: each carries its fields, names the
PutMessageStatus a put answers with, and the response code the broker sends for that status."""

from __future__ import annotations

import pytest
from store_testlib import msg

from rocketq.codec.codes import ResponseCode
from rocketq.errors import CreateMappedFileFailed, DiskFull, MessageTooLarge, StoreClosed, StoreError
from rocketq.store import MessageStore, PutMessageStatus
from rocketq.store.model import MessageToStore

STORE_ERRORS: list[StoreError] = [
    StoreClosed("/data/store"),
    DiskFull("/data/store/commitlog/00000000000000000000", 4096),
    MessageTooLarge(70_000, 65_528),
    CreateMappedFileFailed("/data/store/commitlog/00000000000000065536", "Too many open files"),
]


@pytest.mark.parametrize("err", STORE_ERRORS, ids=lambda e: type(e).__name__)
def test_every_store_error_names_a_put_status(err: StoreError) -> None:
    assert PutMessageStatus[err.put_status] is not PutMessageStatus.PUT_OK
    assert err.remark == str(err) and err.code != ResponseCode.SUCCESS


def test_store_errors_carry_fields_not_only_text() -> None:
    full = DiskFull("/x/commitlog/0", 128)
    assert (full.path, full.needed, full.code) == ("/x/commitlog/0", 128, ResponseCode.SERVICE_NOT_AVAILABLE)
    big = MessageTooLarge(70_000, 65_528)
    assert (big.size, big.limit, big.code) == (70_000, 65_528, ResponseCode.MESSAGE_ILLEGAL)


def test_a_record_larger_than_a_segment_is_message_illegal(store: MessageStore) -> None:
    seg = store.config.mapped_file_size_commit_log
    with pytest.raises(MessageTooLarge) as caught:
        store.commit_log.append_one(msg(body=b"x" * seg), b"", 0, 1)
    assert caught.value.size > caught.value.limit
    assert store.append_message(msg(body=b"x" * seg)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_phy_offset == 0


def test_a_segment_that_cannot_be_created_answers_create_mapped_file_failed(
        store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise CreateMappedFileFailed("/nowhere", "Permission denied")

    monkeypatch.setattr(store.commit_log.mfq, "create_file", refuse)
    r = store.append_message(MessageToStore("TopicA", 0, b"x"))
    assert r.status is PutMessageStatus.CREATE_MAPPED_FILE_FAILED
    assert not store.disk_full  # only a full disk stops every later put
