"""The transaction pieces that need no broker: LocalTransactionState, the END_TRANSACTION header a
producer sends (golden bytes in RocketMQ's binary header layout), the CHECK_TRANSACTION_STATE
request the broker sends, and the public names."""

from __future__ import annotations

import dataclasses
import struct

import rocketq
import rocketq.aio
from rocketq.broker.transaction.check import check_request
from rocketq.client.message import MessageQueue, SendResult, SendStatus
from rocketq.client.producer.transaction import (
    LocalTransactionState,
    TransactionSendResult,
    _state,
    end_transaction_fields,
)
from rocketq.codec.codes import LanguageCode, RequestCode
from rocketq.codec.command import RemotingCommand, encode_rocketmq_header
from rocketq.codec.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.codec.message import MessageExt, MessageSysFlag, decode_message, offset_msg_id


def test_local_transaction_state_keeps_java_spelling_with_an_alias() -> None:
    assert LocalTransactionState.UNKNOWN is LocalTransactionState.UNKNOW
    assert [s.name for s in LocalTransactionState] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]
    commit = LocalTransactionState.COMMIT_MESSAGE
    assert commit.commit_or_rollback == MessageSysFlag.TRANSACTION_COMMIT_TYPE == 8
    assert LocalTransactionState.ROLLBACK_MESSAGE.commit_or_rollback == 12
    assert LocalTransactionState.UNKNOW.commit_or_rollback == 0
    # what a listener may return: the state, its value, or None (Java's null = UNKNOW)
    assert _state(None) is LocalTransactionState.UNKNOW
    assert _state("COMMIT_MESSAGE") is LocalTransactionState.COMMIT_MESSAGE
    assert _state(42) is LocalTransactionState.UNKNOW


def _result() -> SendResult:
    uniq = "7F00000100002A9F0000000000000001"
    return SendResult(SendStatus.SEND_OK, uniq, MessageQueue("T", "broker-a", 3), 17,
                      offset_msg_id("127.0.0.1", 10911, 0x1234), uniq)


def test_end_transaction_fields_from_a_send_result() -> None:
    ext = end_transaction_fields("pg", _result(), LocalTransactionState.COMMIT_MESSAGE, "broker-a")
    assert ext == {
        "producerGroup": "pg",
        "tranStateTableOffset": "17",
        "commitLogOffset": str(0x1234),
        "commitOrRollback": "8",
        "msgId": "7F00000100002A9F0000000000000001",
        "fromTransactionCheck": "false",
        "transactionId": "7F00000100002A9F0000000000000001",
        "bname": "broker-a",
    }
    # exactly what the header class would write, and reads back
    h = EndTransactionRequestHeader.from_ext(ext)
    assert h.to_ext() == ext
    assert (h.commit_log_offset, h.tran_state_table_offset, h.broker_name) == (0x1234, 17, "broker-a")
    # an IPv6 store host makes a longer offset msgId, decoded in full
    v6 = dataclasses.replace(_result(), offset_msg_id=offset_msg_id("::1", 10911, 99))
    assert end_transaction_fields("pg", v6, LocalTransactionState.ROLLBACK_MESSAGE)["commitLogOffset"] == "99"


def test_end_transaction_golden_bytes_in_the_binary_header() -> None:
    ext = {"producerGroup": "pg", "tranStateTableOffset": "17", "commitLogOffset": "4660",
           "commitOrRollback": "12", "msgId": "M", "fromTransactionCheck": "true"}
    cmd = RemotingCommand(int(RequestCode.END_TRANSACTION), LanguageCode.JAVA, 401, 7, 2, None, ext)
    pairs = b"".join(struct.pack(">h", len(k)) + k.encode() + struct.pack(">i", len(v)) + v.encode()
                     for k, v in ext.items())
    # code, language, version, opaque, flag (one-way), remark length 0, extFields length, fields
    golden = struct.pack(">hbhiii", 37, 0, 401, 7, 2, 0) + struct.pack(">i", len(pairs)) + pairs
    assert encode_rocketmq_header(cmd) == golden
    assert golden[:2] == b"\x00\x25"  # END_TRANSACTION = 37


def test_check_request_carries_the_renewed_half_as_a_record() -> None:
    msg = MessageExt(topic="RealT", body=b"b", properties={"UNIQ_KEY": "U1", "PGROUP": "pg",
                                                          "TRANSACTION_CHECK_TIMES": "2"},
                     queue_id=2, queue_offset=9, commit_log_offset=4096, born_timestamp=1,
                     store_host=("127.0.0.1", 10911))
    req = check_request(msg)
    assert req.code == RequestCode.CHECK_TRANSACTION_STATE == 39
    h = CheckTransactionStateRequestHeader.from_ext(req.ext_fields)
    assert (h.tran_state_table_offset, h.commit_log_offset) == (9, 4096)
    assert h.msg_id == h.transaction_id == "U1"
    assert h.offset_msg_id == offset_msg_id("127.0.0.1", 10911, 4096)
    back, _ = decode_message(req.body_bytes())
    assert (back.topic, back.queue_id, back.queue_offset, back.body) == ("RealT", 2, 9, b"b")
    assert back.properties == msg.properties


def test_public_names() -> None:
    for api in (rocketq, rocketq.aio):
        assert api.LocalTransactionState is LocalTransactionState
        assert api.TransactionSendResult is TransactionSendResult
        assert "TransactionProducer" in api.__all__
    assert rocketq.TransactionProducer is not rocketq.aio.TransactionProducer
    assert issubclass(rocketq.aio.TransactionProducer, rocketq.aio.Producer)
    assert issubclass(rocketq.TransactionProducer, rocketq.Producer)
