"""Namespaces: two teams use the topic name ``Orders`` on one cluster without seeing each other.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo &       # name server 127.0.0.1:9876
    .venv/bin/python examples/namespace.py [--namesrv 127.0.0.1:9876]

Each client takes ``namespace=``; the API speaks plain names (``Orders``, ``billing``) while the
broker stores ``team-a%Orders``, ``%RETRY%team-a%billing`` and so on, as RocketMQ 4.x clients do.
See docs/namespaces.md.
"""

from __future__ import annotations

import argparse
import sys
import threading

from rocketq import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketq.admin import SyncAdminClient

TEAMS = ("team-a", "team-b")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="Orders")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    # An admin client speaks wire names: it creates each team's topic under its namespace.
    with SyncAdminClient(args.namesrv) as admin:
        for team in TEAMS:
            admin.create_topic(f"{team}%{args.topic}", cluster="DefaultCluster",
                               read_queue_nums=2, write_queue_nums=2)

    received: dict[str, list[MessageExt]] = {team: [] for team in TEAMS}
    all_in = threading.Event()
    consumers = []
    for team in TEAMS:
        def listener(msgs: list[MessageExt], _ctx: object, team: str = team) -> ConsumeStatus:
            received[team].extend(msgs)
            if all(len(v) >= 3 for v in received.values()):
                all_in.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("billing", namesrv_addr=args.namesrv, namespace=team,
                                instance_name=f"ns-demo-{team}",
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe(args.topic, "*")
        consumer.register_listener(listener)
        consumer.start()
        consumers.append(consumer)
    try:
        for team in TEAMS:
            with Producer("shop", namesrv_addr=args.namesrv, namespace=team,
                          instance_name=f"ns-demo-p-{team}") as producer:
                for i in range(3):
                    result = producer.send(Message(args.topic, f"{team} order {i}".encode()))
                    print(f"{team}: sent to {result.message_queue.topic} ({result.msg_id})")
        ok = all_in.wait(args.timeout)
    finally:
        for consumer in consumers:
            consumer.shutdown()
    for team, msgs in received.items():
        bodies = sorted(m.body.decode() for m in msgs)
        print(f"{team} received from topic {sorted({m.topic for m in msgs})}: {bodies}")
        if any(not b.startswith(team) for b in bodies):
            print(f"{team} saw another team's message", file=sys.stderr)
            return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
