"""Transactional messages: an order is published only if its local transaction commits.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo \\
        --set transactionCheckInterval=5000 --set transactionTimeOut=3000 &   # check back sooner
    .venv/bin/python examples/transaction.py [--namesrv 127.0.0.1:9876] [--orders 6]

A ``TransactionProducer`` sends each order as a half message (stored, invisible to consumers),
then runs the local transaction: here a dict stands for the database. Even orders commit, every
third is rolled back, and the others answer UNKNOW, as if the process had not finished its
transaction yet: the broker checks those back after transactionTimeOut and
``check_local_transaction`` decides from the "database". A push consumer prints what becomes
visible; the example ends once every committed order has arrived. See docs/transactions.md.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from rocketq import (
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    PushConsumer,
    TransactionProducer,
)
from rocketq.admin import SyncAdminClient


class OrderService:
    """The transaction listener: the local transaction writes to ``db``; the check reads it."""

    def __init__(self) -> None:
        self.db: dict[str, str] = {}  # order id -> "paid" | "cancelled"
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, order: int) -> LocalTransactionState:
        order_id = msg.keys_text or ""
        if order % 3 == 0:
            with self.lock:
                self.db[order_id] = "cancelled"
            return LocalTransactionState.ROLLBACK_MESSAGE
        if order % 2 == 0:
            with self.lock:
                self.db[order_id] = "paid"
            return LocalTransactionState.COMMIT_MESSAGE
        # Not decided yet: record the outcome for the check, but let the broker ask.
        with self.lock:
            self.db[order_id] = "paid"
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        with self.lock:
            state = self.db.get(msg.keys or "")
        print(f"  broker asks about {msg.keys}: {state}", flush=True)
        if state == "paid":
            return LocalTransactionState.COMMIT_MESSAGE
        if state == "cancelled":
            return LocalTransactionState.ROLLBACK_MESSAGE
        return LocalTransactionState.UNKNOW


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", default="127.0.0.1:9876")
    ap.add_argument("--topic", default="TransactionDemo")
    ap.add_argument("--cluster", default="DefaultCluster", help="the brokers' cluster name")
    ap.add_argument("--orders", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=180.0, help="give up after this long")
    args = ap.parse_args(argv)

    # The topic first: a consumer only sees a topic created later at its next route refresh.
    admin = SyncAdminClient(args.namesrv)
    admin.start()
    try:
        admin.create_topic(args.topic, cluster=args.cluster, read_queue_nums=4, write_queue_nums=4)
    finally:
        admin.shutdown()

    arrived: set[str] = set()
    done = threading.Event()
    expected = {f"order-{i}" for i in range(1, args.orders + 1) if i % 3 != 0}

    def on_orders(msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
        for m in msgs:
            print(f"consumer got {m.keys}: {m.body.decode()}", flush=True)
            arrived.add(m.keys or "")
        if expected <= arrived:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("transaction-demo-consumer", namesrv_addr=args.namesrv,
                            consume_from_where="CONSUME_FROM_LAST_OFFSET")
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_orders)
    consumer.start()
    producer = TransactionProducer("transaction-demo-producer", namesrv_addr=args.namesrv,
                                   listener=OrderService())
    producer.start()
    try:
        for i in range(1, args.orders + 1):
            msg = Message(args.topic, f"order {i} placed".encode(), keys=f"order-{i}")
            r = producer.send_message_in_transaction(msg, i)
            print(f"order-{i}: half message {r.msg_id}, local transaction {r.local_transaction_state.name}")
        t0 = time.monotonic()
        if not done.wait(args.seconds):
            print(f"still waiting for {sorted(expected - arrived)}", file=sys.stderr)
            return 1
        print(f"every committed order arrived ({time.monotonic() - t0:.1f} s after the last send); "
              f"rolled back, never seen: {sorted(f'order-{i}' for i in range(3, args.orders + 1, 3))}")
    finally:
        producer.shutdown()
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
