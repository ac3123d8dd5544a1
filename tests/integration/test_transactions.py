"""Transactional messages end to end against a real ``rocketq up``: commit, rollback, UNKNOW
answered by the broker's check-back, a producer killed before its END_TRANSACTION whose group has
another live producer, and many transactions at once (0 lost, 0 delivered without a commit).

The cluster checks every second and counts a half message as open after 2 s, so check-backs
happen within the tests' patience."""

from __future__ import annotations

import asyncio
import collections
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.harness import (
    SMALL_STORE,
    AdminRun,
    Cluster,
    eventually,
    module_cluster,
    start_process,
    unique_name,
)

import rocketq
import rocketq.aio
from rocketq import ConsumeStatus, LocalTransactionState, Message, TransactionSendResult

pytestmark = [pytest.mark.timeout(180)]

HANGING = Path(__file__).resolve().parent / "tx_hanging_producer.py"
CHECK_FAST = ("--set", "transactionCheckInterval=1000", "--set", "transactionTimeOut=2000")

cluster = module_cluster("tx", *SMALL_STORE, *CHECK_FAST)


class Received:
    """A push consumer of ``topic`` from its first offset that counts every body it is given."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.counts: collections.Counter[bytes] = collections.Counter()
        self._lock = threading.Lock()
        self.consumer = rocketq.PushConsumer(unique_name("txc"), namesrv_addr=cluster.namesrv,
                                             consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        self.consumer.subscribe(topic, "*")
        self.consumer.register_listener(self._listen)
        self.consumer.start()

    def _listen(self, msgs: list[Any], ctx: Any) -> ConsumeStatus:
        with self._lock:
            self.counts.update(m.body for m in msgs)
            for m in msgs:  # a committed message keeps the half's TRAN_MSG, as RocketMQ stores it
                assert m.properties.get("TRAN_MSG") == "true", m.properties
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> set[bytes]:
        with self._lock:
            return set(self.counts)

    def duplicates(self) -> dict[bytes, int]:
        with self._lock:
            return {b: n for b, n in self.counts.items() if n > 1}

    def close(self) -> None:
        self.consumer.shutdown()


class ByArg:
    """execute_local_transaction returns its arg; check_local_transaction answers from ``decided``."""

    def __init__(self, decided: dict[bytes, LocalTransactionState] | None = None) -> None:
        self.decided = decided or {}
        self.checked: list[bytes] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        assert msg.properties["TRAN_MSG"] == "true" and msg.transaction_id
        return arg

    def check_local_transaction(self, msg: Any) -> Any:
        self.checked.append(msg.body)
        return self.decided.get(msg.body, LocalTransactionState.UNKNOW)


def test_commit_and_rollback(cluster: Cluster, admin: AdminRun) -> None:
    topic = unique_name("TxT")
    listener = ByArg()
    received = Received(cluster, topic)
    try:
        with rocketq.TransactionProducer(unique_name("txp"), namesrv_addr=cluster.namesrv,
                                         listener=listener) as p:
            rolled = p.send_message_in_transaction(Message(topic, b"rolled-back"),
                                                   LocalTransactionState.ROLLBACK_MESSAGE)
            done = p.send_message_in_transaction(Message(topic, b"committed", tags="A"),
                                                 LocalTransactionState.COMMIT_MESSAGE)
            assert isinstance(done, TransactionSendResult)
            assert done.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
            assert rolled.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
            assert done.status.name == "SEND_OK" and done.transaction_id == done.msg_id
            eventually(lambda: received.bodies() == {b"committed"}, timeout=60)
            time.sleep(3.5)  # past the check time: still nothing more, and nobody was asked
            assert received.bodies() == {b"committed"} and not received.duplicates()
            assert listener.checked == []
    finally:
        received.close()
    # mqadmin's view: the system topics the transactions live in are listed
    listed = admin.raw("topicList")[1].split()
    assert {"RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", topic} <= set(listed)


def test_unknown_is_checked_back_and_committed(cluster: Cluster) -> None:
    topic = unique_name("TxU")
    checked: list[Any] = []

    class Listener:
        async def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
            return LocalTransactionState.UNKNOW

        async def check_local_transaction(self, msg: Any) -> Any:
            checked.append(msg)
            return LocalTransactionState.COMMIT_MESSAGE

    async def run() -> TransactionSendResult:
        async with rocketq.aio.TransactionProducer(unique_name("txp"), namesrv_addr=cluster.namesrv,
                                                   listener=Listener()) as p:
            r = await p.send_message_in_transaction(Message(topic, b"later", keys="k-1"), None)
            deadline = time.monotonic() + 60
            while not checked and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # the END_TRANSACTION answering the check is one-way
            return r

    received = Received(cluster, topic)
    try:
        result = asyncio.run(run())
        assert result.local_transaction_state is LocalTransactionState.UNKNOW
        assert checked, "the broker never checked the open transaction"
        msg = checked[0]
        assert msg.topic == topic and msg.body == b"later" and msg.keys == "k-1"
        assert msg.msg_id == result.msg_id and msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
        eventually(lambda: received.bodies() == {b"later"}, timeout=60)
        time.sleep(2.5)
        assert not received.duplicates()
    finally:
        received.close()


def test_killed_producer_is_checked_through_another_of_its_group(cluster: Cluster, tmp_path: Path) -> None:
    topic = unique_name("TxK")
    group = unique_name("txg")
    survivor = ByArg({b"orphan": LocalTransactionState.COMMIT_MESSAGE})
    received = Received(cluster, topic)
    try:
        with rocketq.TransactionProducer(group, namesrv_addr=cluster.namesrv, listener=survivor):
            doomed = start_process([sys.executable, str(HANGING), cluster.namesrv, topic, group],
                                   name="hanging", log_dir=tmp_path)
            try:
                doomed.wait_for(re.compile(r"HALF SENT \w+"), 60)
            finally:
                doomed.kill()  # SIGKILL before its END_TRANSACTION
            eventually(lambda: received.bodies() == {b"orphan"}, timeout=90)
            assert b"orphan" in survivor.checked
            time.sleep(2.5)
            assert not received.duplicates()
    finally:
        received.close()


async def _many(cluster: Cluster, topic: str, n: int) -> dict[bytes, LocalTransactionState]:
    """``n`` transactions at once: a third rolled back, a seventh left UNKNOW to the check-back
    (which commits every other one of those); returns how each one should end."""
    final: dict[bytes, LocalTransactionState] = {}
    first: dict[bytes, LocalTransactionState] = {}
    for i in range(n):
        body = b"tx-%d" % i
        if i % 7 == 0:
            first[body] = LocalTransactionState.UNKNOW
            final[body] = (LocalTransactionState.COMMIT_MESSAGE if i % 2 else
                           LocalTransactionState.ROLLBACK_MESSAGE)
        else:
            first[body] = final[body] = (LocalTransactionState.ROLLBACK_MESSAGE if i % 3 == 0 else
                                         LocalTransactionState.COMMIT_MESSAGE)
    listener = ByArg(final)
    async with rocketq.aio.TransactionProducer(unique_name("txp"), namesrv_addr=cluster.namesrv,
                                               listener=listener) as p:
        sem = asyncio.Semaphore(256)

        async def one(body: bytes) -> None:
            async with sem:
                r = await p.send_message_in_transaction(Message(topic, body), first[body])
                assert r.local_transaction_state is first[body]

        await asyncio.gather(*(one(b) for b in first))
        unknown = {b for b, s in first.items() if s is LocalTransactionState.UNKNOW}
        deadline = time.monotonic() + 120
        while not unknown <= set(listener.checked) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert unknown <= set(listener.checked), "some open transactions were never checked"
        await asyncio.sleep(1.0)  # the END_TRANSACTIONs answering the checks are one-way
    return final


def _many_transactions(cluster: Cluster, n: int) -> None:
    topic = unique_name("TxN")
    received = Received(cluster, topic)
    try:
        final = asyncio.run(_many(cluster, topic, n))
        committed = {b for b, s in final.items() if s is LocalTransactionState.COMMIT_MESSAGE}
        eventually(lambda: committed <= received.bodies(), timeout=120)  # 0 lost
        time.sleep(3.0)
        assert received.bodies() == committed  # 0 delivered without a commit
        assert not received.duplicates()
    finally:
        received.close()


def test_a_thousand_transactions(cluster: Cluster) -> None:
    _many_transactions(cluster, 1_000)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ten_thousand_transactions(cluster: Cluster) -> None:
    _many_transactions(cluster, 10_000)


def test_traced_transaction_leaves_pub_and_end_transaction(cluster: Cluster) -> None:
    """With enable_trace, the half message's Pub and the END_TRANSACTION are traced, as Java's
    SendMessageTraceHookImpl and EndTransactionTraceHookImpl write them."""
    from rocketq.admin import AdminClient

    topic, group = unique_name("TxTr"), unique_name("txp")

    async def run() -> tuple[TransactionSendResult, list[Any]]:
        async with rocketq.aio.TransactionProducer(group, namesrv_addr=cluster.namesrv, listener=ByArg(),
                                                   enable_trace=True) as p:
            r = await p.send_message_in_transaction(Message(topic, b"traced", tags="T1"),
                                                    LocalTransactionState.COMMIT_MESSAGE)
        async with AdminClient(cluster.namesrv) as admin:
            deadline = time.monotonic() + 60
            while True:
                views = await admin.query_msg_trace_by_id(r.msg_id)
                if {"Pub", "EndTransaction"} <= {v.msg_type for v in views} or time.monotonic() > deadline:
                    return r, views
                await asyncio.sleep(0.3)

    result, views = asyncio.run(run())
    end = next(v for v in views if v.msg_type == "EndTransaction")
    assert end.transaction_state == "COMMIT_MESSAGE" and end.group_name == group and end.topic == topic
    assert end.msg_id == result.msg_id
    assert any(v.msg_type == "Pub" for v in views)
