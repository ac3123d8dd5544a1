"""Drives the official RocketMQ 5 Python client (gRPC) against a rocketq broker's grpc port.

Run with tests/compat/py5/.venv/bin/python (never the main venv: both packages import as
`rocketmq`). Prints one JSON object on stdout; exits non-zero when a step failed.

    official_client.py produce ENDPOINT TOPIC --count N [--group G] [--tag T] [--delay-ms MS]
    official_client.py transaction ENDPOINT TOPIC --commit N --rollback N --orphan N
    official_client.py consume ENDPOINT TOPIC GROUP --count N [--invisible S] [--no-ack]
                       [--change-invisible S] [--exit-after N]
    official_client.py push ENDPOINT TOPIC GROUP --count N   (each message failed once, then consumed)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def config(endpoint: str) -> ClientConfiguration:
    # an ACL account, when the test gives one (the client signs each call with it)
    creds = Credentials(os.environ.get("RQ_ACCESS_KEY", ""), os.environ.get("RQ_SECRET_KEY", ""))
    return ClientConfiguration(endpoint, creds, request_timeout=10)


def message(topic: str, body: str, tag: str | None = None, keys: str | None = None) -> Message:
    m = Message()
    m.topic = topic
    m.body = body.encode()
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    m.add_property("origin", "py5")
    return m


def produce(a: argparse.Namespace) -> int:
    producer = Producer(config(a.endpoint), (a.topic,))
    producer.startup()
    sent = []
    try:
        for i in range(a.count):
            m = message(a.topic, f"{a.prefix}-{i}", a.tag, f"k{i}")
            if a.group:
                m.message_group = a.group
            if a.delay_ms:
                m.delivery_timestamp = int(time.time() * 1000) + a.delay_ms
            receipt = producer.send(m)
            sent.append({"body": f"{a.prefix}-{i}", "id": receipt.message_id, "offset": receipt.offset})
    finally:
        producer.shutdown()
    emit({"sent": sent})
    return 0


class Checker(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.body.decode())
        emit({"checked": message.body.decode()})
        return TransactionResolution.COMMIT


def transaction(a: argparse.Namespace) -> int:
    checker = Checker()
    producer = Producer(config(a.endpoint), (a.topic,), checker)
    producer.startup()
    try:
        for kind, n in (("commit", a.commit), ("rollback", a.rollback), ("orphan", a.orphan)):
            for i in range(n):
                t = producer.begin_transaction()
                producer.send(message(a.topic, f"{kind}-{i}"), t)
                if kind == "commit":
                    t.commit()
                elif kind == "rollback":
                    t.rollback()
        deadline = time.time() + a.wait
        while len(checker.checked) < a.orphan and time.time() < deadline:
            time.sleep(0.2)
    finally:
        producer.shutdown()
    emit({"done": True, "checked": sorted(checker.checked)})
    return 0 if len(checker.checked) >= a.orphan else 1


def consume(a: argparse.Namespace) -> int:
    consumer = SimpleConsumer(config(a.endpoint), a.group, {a.topic: FilterExpression("*")}, await_duration=3)
    consumer.startup()
    got: list[dict[str, Any]] = []
    deadline = time.time() + a.timeout
    try:
        while len(got) < a.count and time.time() < deadline:
            for m in consumer.receive(a.batch, a.invisible):
                body = m.body.decode()
                got.append({"body": body, "tag": m.tag, "attempt": m.delivery_attempt,
                            "group": m.message_group, "props": dict(m.properties or {})})
                emit({"received": body})
                if a.exit_after and len(got) >= a.exit_after:
                    os._exit(3)  # a consumer killed mid-batch: nothing acked, nothing shut down
                if a.change_invisible:
                    consumer.change_invisible_duration(m, a.change_invisible)
                elif not a.no_ack:
                    consumer.ack(m)
    finally:
        consumer.shutdown()
    emit({"received_all": got})
    return 0 if len(got) >= a.count else 1


class Listener(MessageListener):
    """Fails each message once (FAILURE: redelivered), then accepts it."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body.decode()
        self.attempts[body] = self.attempts.get(body, 0) + 1
        emit({"pushed": body, "attempt": self.attempts[body]})
        return ConsumeResult.FAILURE if self.attempts[body] == 1 else ConsumeResult.SUCCESS


def push(a: argparse.Namespace) -> int:
    listener = Listener()
    consumer = PushConsumer(config(a.endpoint), a.group, listener, {a.topic: FilterExpression("*")})
    consumer.startup()
    deadline = time.time() + a.timeout
    try:
        while time.time() < deadline and sum(n >= 2 for n in listener.attempts.values()) < a.count:
            time.sleep(0.2)
    finally:
        consumer.shutdown()
    done = sorted(b for b, n in listener.attempts.items() if n >= 2)
    emit({"consumed": done})
    return 0 if len(done) >= a.count else 1


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("produce")
    pr.add_argument("endpoint")
    pr.add_argument("topic")
    pr.add_argument("--count", type=int, default=1)
    pr.add_argument("--prefix", default="py5")
    pr.add_argument("--group")
    pr.add_argument("--tag")
    pr.add_argument("--delay-ms", type=int, default=0)
    tx = sub.add_parser("transaction")
    tx.add_argument("endpoint")
    tx.add_argument("topic")
    tx.add_argument("--commit", type=int, default=0)
    tx.add_argument("--rollback", type=int, default=0)
    tx.add_argument("--orphan", type=int, default=0)
    tx.add_argument("--wait", type=float, default=60)
    co = sub.add_parser("consume")
    co.add_argument("endpoint")
    co.add_argument("topic")
    co.add_argument("group")
    co.add_argument("--count", type=int, default=1)
    co.add_argument("--batch", type=int, default=16)
    co.add_argument("--invisible", type=int, default=30)
    co.add_argument("--no-ack", action="store_true")
    co.add_argument("--change-invisible", type=int, default=0)
    co.add_argument("--exit-after", type=int, default=0)
    co.add_argument("--timeout", type=float, default=60)
    pu = sub.add_parser("push")
    pu.add_argument("endpoint")
    pu.add_argument("topic")
    pu.add_argument("group")
    pu.add_argument("--count", type=int, default=1)
    pu.add_argument("--timeout", type=float, default=90)
    a = p.parse_args()
    return {"produce": produce, "transaction": transaction, "consume": consume, "push": push}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
