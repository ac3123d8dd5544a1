"""Transactional messages on the wire against an in-process broker: half messages, END_TRANSACTION
(commit, rollback, wrong requests), the check-back and the discard after transactionCheckMax."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.harness import wait_until
from tests.wire import (
    BrokerOptions,
    decode_pull,
    heartbeat,
    in_process_cluster,
    invoke,
    message_properties,
    pull,
    send_message,
)

from rocketq.broker.transaction.service import _calculate_op_offset
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.codec.message import MessageSysFlag, decode_message, decode_offset_msg_id
from rocketq.errors import RemotingTimeoutError
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(60)

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
GROUP = "TxPG"


async def send_half(client: RemotingClient, addr: str, topic: str, body: bytes, *, queue_id: int = 1,
                    extra: dict[str, str] | None = None) -> RemotingCommand:
    props = message_properties(tags="TagA", extra={"TRAN_MSG": "true", "PGROUP": GROUP, **(extra or {})})
    return await send_message(client, addr, topic, body, queue_id=queue_id, properties=props,
                              producer_group=GROUP, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)


def end_header(sent: RemotingCommand, kind: int, *, group: str = GROUP, check: bool = False,
               **over: Any) -> dict[str, str]:
    ext = sent.ext_fields or {}
    h = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=int(over.get("queue_offset", ext["queueOffset"])),
        commit_log_offset=int(over.get("commit_log_offset", decode_offset_msg_id(ext["msgId"])[2])),
        commit_or_rollback=kind,
        msg_id=ext["transactionId"],
        from_transaction_check=check,
        transaction_id=ext["transactionId"],
    )
    return h.to_ext()


async def messages(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[Any]:
    r = await pull(client, addr, "TxReader", topic, queue_id, 0)
    return decode_pull(r) if r.code == ResponseCode.SUCCESS else []


async def test_half_commit_rollback_on_the_wire(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        sent = await send_half(client, addr, "TxT", b"commit-me")
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        ext = sent.ext_fields or {}
        assert ext["queueId"] == "1" and ext["queueOffset"] == "0"  # the producer's queue, the half offset
        assert await messages(client, addr, "TxT", 1) == []  # consumers never see a half message
        (half,) = await messages(client, addr, HALF, 0)
        assert half.body == b"commit-me" and half.sys_flag & MessageSysFlag.TRANSACTION_MASK == 0
        assert half.properties["REAL_TOPIC"] == "TxT" and half.properties["REAL_QID"] == "1"
        assert half.properties["TRAN_MSG"] == "true" and half.properties["PGROUP"] == GROUP

        r = await invoke(client, addr, RequestCode.END_TRANSACTION,
                         end_header(sent, MessageSysFlag.TRANSACTION_COMMIT_TYPE))
        assert r.code == ResponseCode.SUCCESS, r.remark
        (done,) = await messages(client, addr, "TxT", 1)
        assert done.body == b"commit-me" and done.tags == "TagA"
        assert done.sys_flag & MessageSysFlag.TRANSACTION_MASK == MessageSysFlag.TRANSACTION_COMMIT_TYPE
        assert done.prepared_transaction_offset == half.commit_log_offset
        assert done.properties == half.properties  # stored verbatim, TRAN_MSG / REAL_* kept, as Java
        (op,) = await messages(client, addr, OP, 0)
        assert op.tags == "d" and op.body == b"0" and op.properties["UNIQ_KEY"]

        second = await send_half(client, addr, "TxT", b"roll-me-back")
        r = await invoke(client, addr, RequestCode.END_TRANSACTION,
                         end_header(second, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in await messages(client, addr, "TxT", 1)] == [b"commit-me"]
        assert [m.body for m in await messages(client, addr, OP, 0)] == [b"0", b"1"]

        # a repeated commit of an ended transaction stores nothing more
        r = await invoke(client, addr, RequestCode.END_TRANSACTION,
                         end_header(sent, MessageSysFlag.TRANSACTION_COMMIT_TYPE))
        assert r.code == ResponseCode.SUCCESS
        assert len(await messages(client, addr, "TxT", 1)) == 1


async def test_commit_of_a_half_kept_from_its_put_or_read_back(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """END_TRANSACTION finds a fresh half in what the broker kept from its put and an older one by
    reading it back: either way the committed message is the half's record."""
    import rocketq.broker.transaction.half as half_module

    monkeypatch.setattr(half_module, "FRESH_HALVES", 1)  # only the latest half is kept
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        sent = [await send_half(client, addr, "TxK", b"half-%d" % i, extra={"k": str(i)}) for i in range(2)]
        for s in sent:
            r = await invoke(client, addr, RequestCode.END_TRANSACTION,
                             end_header(s, MessageSysFlag.TRANSACTION_COMMIT_TYPE))
            assert r.code == ResponseCode.SUCCESS, r.remark
        halves = await messages(client, addr, HALF, 0)
        done = await messages(client, addr, "TxK", 1)
        assert [m.body for m in done] == [b"half-0", b"half-1"]
        for h, d in zip(halves, done, strict=True):
            assert d.properties == h.properties
            assert (d.flag, d.born_timestamp, d.born_host, d.reconsume_times) == (
                h.flag, h.born_timestamp, h.born_host, h.reconsume_times)
            assert d.sys_flag == h.sys_flag | MessageSysFlag.TRANSACTION_COMMIT_TYPE
            assert d.prepared_transaction_offset == h.commit_log_offset
        assert [m.body for m in await messages(client, addr, OP, 0)] == [b"0", b"1"]


async def test_wrong_end_transaction_requests(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        sent = await send_half(client, addr, "TxW", b"x")
        commit = MessageSysFlag.TRANSACTION_COMMIT_TYPE
        cases = [
            (end_header(sent, commit, group="other"), "The producer group wrong"),
            (end_header(sent, commit, queue_offset=7), "The transaction state table offset wrong"),
            (end_header(sent, commit, commit_log_offset=10**12), "Find prepared transaction message failed"),
            ({**end_header(sent, commit), "commitOrRollback": "3"}, "commitOrRollback field wrong"),
        ]
        for ext, remark in cases:
            r = await invoke(client, addr, RequestCode.END_TRANSACTION, ext)
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == remark, (r.code, r.remark)
        # UNKNOW: RocketMQ answers nothing at all, even to a two-way request
        with pytest.raises(RemotingTimeoutError):
            await invoke(client, addr, RequestCode.END_TRANSACTION,
                         end_header(sent, MessageSysFlag.TRANSACTION_NOT_TYPE), timeout=0.5)
        assert await messages(client, addr, "TxW", 1) == []
        # rejectTransactionMessage refuses half messages
        broker.update_configs({"rejectTransactionMessage": "true"})
        r = await send_half(client, addr, "TxW", b"y")
        assert r.code == ResponseCode.NO_PERMISSION and "transaction message is forbidden" in (r.remark or "")


async def test_check_back_then_commit_and_discard_after_check_max(tmp_path: Path) -> None:
    opts = BrokerOptions(broker={"transaction_time_out": 0, "transaction_check_max": 2})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, lambda req, ch: checks.put_nowait(req))
        sent = await send_half(client, addr, "TxC", b"check-me", extra={"KEYS": "k1"})
        assert (await heartbeat(client, addr, "tx-client@1", producer_groups=[GROUP])).code == 0
        await asyncio.sleep(0.01)  # older than transactionTimeOut (0), stored before the pass starts
        await broker.transaction_check_service.check_once()
        req = await asyncio.wait_for(checks.get(), 10)
        h = CheckTransactionStateRequestHeader.from_ext(req.ext_fields)
        msg, _ = decode_message(req.body_bytes())
        assert msg.topic == "TxC" and msg.queue_id == 1 and msg.body == b"check-me"
        assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert h.msg_id == h.transaction_id == sent.ext_fields["transactionId"]  # type: ignore[index]
        assert h.tran_state_table_offset == 1 == msg.queue_offset  # the renewed copy
        assert h.commit_log_offset == msg.commit_log_offset == decode_offset_msg_id(h.offset_msg_id or "")[2]

        # the producer answers the check: committed from the renewed copy
        end = EndTransactionRequestHeader(GROUP, h.tran_state_table_offset, h.commit_log_offset,
                                          MessageSysFlag.TRANSACTION_COMMIT_TYPE, h.msg_id or "",
                                          from_transaction_check=True, transaction_id=h.transaction_id)
        await client.invoke_oneway(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext()))
        assert [m.body for m in await wait_until(lambda: messages(client, addr, "TxC", 1))] == [b"check-me"]
        await broker.transaction_check_service.check_once()
        await asyncio.sleep(0.2)
        assert checks.empty()  # ended: never checked again

        # nobody answers: checked transactionCheckMax times, then moved to TRANS_CHECK_MAX_TIME_TOPIC
        await send_half(client, addr, "TxC", b"orphan")
        await asyncio.sleep(0.01)
        for _ in range(4):
            await broker.transaction_check_service.check_once()
            await asyncio.sleep(0.01)
        assert checks.qsize() == 2
        (dead,) = await wait_until(lambda: messages(client, addr, "TRANS_CHECK_MAX_TIME_TOPIC", 0))
        assert dead.body == b"orphan" and dead.properties["REAL_TOPIC"] == "TxC"
        assert [m.body for m in await messages(client, addr, "TxC", 1)] == [b"check-me"]
        assert broker.transaction_service.discarded == 1


async def test_immunity_time_delays_the_check(tmp_path: Path) -> None:
    opts = BrokerOptions(broker={"transaction_time_out": 0})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        checks: list[RemotingCommand] = []
        client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, lambda req, ch: checks.append(req))
        assert (await heartbeat(client, addr, "tx-client@2", producer_groups=[GROUP])).code == 0
        sent = await send_half(client, addr, "TxI", b"later", extra={"CHECK_IMMUNITY_TIME_IN_SECONDS": "60"})
        await asyncio.sleep(0.01)
        await broker.transaction_check_service.check_once()
        await asyncio.sleep(0.1)
        assert checks == []
        # the young message was appended again, pointing at its first offset; ending that offset ends it
        copies = await messages(client, addr, HALF, 0)
        assert [m.properties.get("TRAN_PREPARED_QUEUE_OFFSET") for m in copies] == [None, "0"]
        r = await invoke(client, addr, RequestCode.END_TRANSACTION,
                         end_header(sent, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE))
        assert r.code == ResponseCode.SUCCESS
        await broker.transaction_check_service.check_once()
        assert len(await messages(client, addr, HALF, 0)) == 2  # no further copy: settled
        assert broker.offset_manager.query_offset("CID_RMQ_SYS_TRANS", HALF, 0) == 2


def test_op_offset_moves_past_settled_records_without_gaps() -> None:
    assert _calculate_op_offset([3, 1, 2], 1) == 4
    assert _calculate_op_offset([2, 3], 1) == 1
    assert _calculate_op_offset([0, 5], 5) == 6
    assert _calculate_op_offset([], 7) == 7


async def test_transactional_batch_is_illegal(tmp_path: Path) -> None:
    from tests.wire import send_batch

    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await send_batch(client, broker.address, "TxB", [b"a", b"b"],
                             sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL, r.remark


async def test_a_java_4_9_8_end_transaction_with_bname_in_compatibility_mode(tmp_path: Path) -> None:
    opts = BrokerOptions(broker={"compatibility_mode": "4.9"})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        sent = await send_half(client, addr, "TxJ", b"from-java")
        ext = {**end_header(sent, MessageSysFlag.TRANSACTION_COMMIT_TYPE), "bname": "broker-a"}
        r = await invoke(client, addr, RequestCode.END_TRANSACTION, ext)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in await messages(client, addr, "TxJ", 1)] == [b"from-java"]
