"""kill -9 the broker while transactions are open: half messages stored, some committed, the rest
waiting for an END_TRANSACTION that the dead broker never gets. After the restart (same data, new
ports) the broker must still check every open one, through a producer of the group started
afterwards, and every transaction the checks commit must be delivered exactly once: the
committed-before-the-kill ones too, never a second time (issue 11 item 1).

Everything the broker needs lives in its topics and the CID_RMQ_SYS_TRANS offsets, as in
RocketMQ; this test is the proof that nothing of it was only in memory.
"""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path
from typing import Any

import pytest
from faultlib import kill9, stop, up
from tests.harness import unique_name

from rocketq.aio import ConsumeStatus, LocalTransactionState, Message, PushConsumer, TransactionProducer

pytestmark = pytest.mark.timeout(300)

CHECK_FAST = ("--set", "transactionCheckInterval=1000", "--set", "transactionTimeOut=1000")


class Decide:
    """execute: its arg; check: ``answer`` (and counts what it was asked)."""

    def __init__(self, answer: LocalTransactionState) -> None:
        self.answer = answer
        self.checked: collections.Counter[bytes] = collections.Counter()

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        return arg

    def check_local_transaction(self, msg: Any) -> Any:
        self.checked[msg.body] += 1
        return self.answer


async def _consume(namesrv: str, topic: str, counts: collections.Counter[bytes]) -> PushConsumer:
    async def listen(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        counts.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(unique_name("txc"), namesrv_addr=namesrv,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    consumer.register_listener(listen)
    await consumer.start()
    return consumer


async def _until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("committed_before", [0, pytest.param(20, marks=pytest.mark.slow)])
async def test_open_transactions_survive_kill9(tmp_path: Path, committed_before: int) -> None:
    topic, group = unique_name("TxKill"), unique_name("txg")
    open_count = 20
    cluster = await up(tmp_path, *CHECK_FAST)
    first = Decide(LocalTransactionState.UNKNOW)
    try:
        async with TransactionProducer(group, namesrv_addr=cluster.namesrv, listener=first) as p:
            for i in range(committed_before):
                r = await p.send_message_in_transaction(Message(topic, b"done-%d" % i),
                                                        LocalTransactionState.COMMIT_MESSAGE)
                assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
            for i in range(open_count):  # prepared; their commit would come after the kill
                await p.send_message_in_transaction(Message(topic, b"open-%d" % i),
                                                    LocalTransactionState.UNKNOW)
            await asyncio.sleep(0.2)  # the committed ones' one-way END_TRANSACTIONs reach the broker
            await kill9(cluster)
    finally:
        await kill9(cluster)

    cluster = await up(tmp_path, *CHECK_FAST)  # same data, new ports
    counts: collections.Counter[bytes] = collections.Counter()
    second = Decide(LocalTransactionState.COMMIT_MESSAGE)
    consumer = None
    try:
        async with TransactionProducer(group, namesrv_addr=cluster.namesrv, listener=second):
            consumer = await _consume(cluster.namesrv, topic, counts)
            opened = {b"open-%d" % i for i in range(open_count)}
            expected = {b"done-%d" % i for i in range(committed_before)} | opened
            await _until(lambda: set(counts) >= expected, 120, f"not delivered: {expected - set(counts)}")
            assert set(second.checked) == opened  # only the open ones
            checks = sum(second.checked.values())
            await asyncio.sleep(4)  # several more check passes
            assert set(counts) == expected
            assert max(counts.values()) == 1, {b: n for b, n in counts.items() if n > 1}
            assert sum(second.checked.values()) == checks, "ended transactions were checked again"
    finally:
        if consumer is not None:
            await consumer.shutdown()
        assert await stop(cluster) == 0, cluster.describe()
