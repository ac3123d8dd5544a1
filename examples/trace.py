"""Message trace: send and consume with ``enable_trace=True``, then read the message's trace.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo &       # name server 127.0.0.1:9876
    .venv/bin/python examples/trace.py [--namesrv 127.0.0.1:9876] [--topic TraceDemo]

The producer and the consumer write RocketMQ's trace records (Pub, SubBefore, SubAfter) to
RMQ_SYS_TRACE_TOPIC in the background; the admin client finds them by the message id, as
``rocketq admin queryMsgTraceById -i <msgId>`` and the dashboard's /trace page do. See docs/trace.md.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from rocketq import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketq.admin import SyncAdminClient


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="TraceDemo")
    parser.add_argument("--group", default="TraceDemoConsumer")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the trace")
    args = parser.parse_args()

    with SyncAdminClient(args.namesrv) as admin:
        admin.create_topic(args.topic, cluster="DefaultCluster", read_queue_nums=1, write_queue_nums=1)

    with Producer("TraceDemoProducer", namesrv_addr=args.namesrv, enable_trace=True) as producer:
        sent = producer.send(Message(args.topic, b"hello, traced world", tags="demo", keys="order-1"))
    print(f"sent {sent.msg_id}")

    consumed = threading.Event()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeStatus:
        if any(m.msg_id == sent.msg_id for m in msgs):
            consumed.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(args.group, namesrv_addr=args.namesrv, enable_trace=True,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(listener)
    consumer.start()
    try:
        if not consumed.wait(args.timeout):
            print("the message was not consumed in time", file=sys.stderr)
            return 1
    finally:
        consumer.shutdown()  # flushes the consumer's traces

    with SyncAdminClient(args.namesrv) as admin:
        deadline = time.monotonic() + args.timeout
        while True:
            views = admin.query_msg_trace_by_id(sent.msg_id)
            kinds = {v.msg_type for v in views}
            if {"Pub", "SubBefore", "SubAfter"} <= kinds or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    for v in views:
        print(f"{v.msg_type:<10} group={v.group_name} host={v.client_host} cost={v.cost_time}ms {v.status}")
    return 0 if {"Pub", "SubBefore", "SubAfter"} <= kinds else 1


if __name__ == "__main__":
    sys.exit(main())
