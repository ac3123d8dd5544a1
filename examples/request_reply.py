"""Request-reply: a requester sends ``ping`` and waits for a replier's ``pong``.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo &       # name server 127.0.0.1:9876
    .venv/bin/python examples/request_reply.py [--namesrv 127.0.0.1:9876] [--requests 10]

Without ``--serve`` the example runs both sides in this process: a replier (a push consumer of
the request topic that answers every request with ``create_reply_message`` through its own
producer) and a requester that calls ``Producer.request`` and prints each reply and its round
trip. With ``--serve`` it runs only the replier, until killed or ``--seconds`` pass, so the
requester can live in another process (the integration test runs it that way). See
docs/request-reply.md.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from rocketq import (
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    ServerError,
    create_reply_message,
)
from rocketq.admin import SyncAdminClient


class Replier:
    """Answers each request on ``topic`` with ``pong:<request body>``."""

    def __init__(self, namesrv: str, topic: str, group: str) -> None:
        self.namesrv = namesrv
        self.topic = topic
        self.producer = Producer(f"{group}-producer", namesrv_addr=namesrv)
        self.consumer = PushConsumer(group, namesrv_addr=namesrv,
                                     consume_from_where="CONSUME_FROM_LAST_OFFSET")
        self.consumer.subscribe(topic, "*")
        self.consumer.register_listener(self.on_requests)

    def on_requests(self, msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
        for request in msgs:
            # The request carries CORRELATION_ID, REPLY_TO_CLIENT and TTL; the reply copies them.
            try:
                self.producer.send(create_reply_message(request, b"pong:" + request.body))
            except ServerError as e:  # the requester is gone (timed out, or stopped)
                print(f"reply not delivered: {e}", file=sys.stderr)
        return ConsumeStatus.CONSUME_SUCCESS

    def start(self, cluster: str) -> None:
        # The request topic must exist before the consumer starts: a topic created later is
        # only seen at the consumer's next route refresh (30 s).
        admin = SyncAdminClient(self.namesrv)
        admin.start()
        try:
            admin.create_topic(self.topic, cluster=cluster, read_queue_nums=4, write_queue_nums=4)
        finally:
            admin.shutdown()
        self.producer.start()
        self.consumer.start()

    def shutdown(self) -> None:
        self.consumer.shutdown()
        self.producer.shutdown()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", default="127.0.0.1:9876")
    ap.add_argument("--topic", default="RequestReplyDemo")
    ap.add_argument("--group", default="request-reply-demo-replier")
    ap.add_argument("--cluster", default="DefaultCluster", help="the brokers' cluster name")
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--serve", action="store_true", help="run only the replier")
    ap.add_argument("--seconds", type=float, default=3600.0, help="how long --serve runs")
    args = ap.parse_args(argv)

    replier = Replier(args.namesrv, args.topic, args.group)
    replier.start(args.cluster)
    if args.serve:
        print("REPLIER READY", flush=True)
        stop = threading.Event()
        try:
            stop.wait(args.seconds)
        except KeyboardInterrupt:
            pass
        finally:
            replier.shutdown()
        return 0

    requester = Producer("request-reply-demo-requester", namesrv_addr=args.namesrv)
    requester.start()
    try:
        for i in range(args.requests):
            t0 = time.perf_counter()
            reply = requester.request(Message(args.topic, b"ping-%d" % i), timeout=10)
            ms = (time.perf_counter() - t0) * 1000
            print(f"{reply.body.decode()}  ({ms:.2f} ms)")
    finally:
        requester.shutdown()
        replier.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
