"""SimpleConsumer (RocketMQ 5 pop): several workers share a topic, each message is acked once.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo &       # name server 127.0.0.1:9876
    .venv/bin/python examples/simple_consumer.py [--namesrv 127.0.0.1:9876] [--messages 100] [--workers 4]

Sends ``--messages`` messages to a topic of 8 queues, then starts ``--workers`` SimpleConsumers of one
group (threads, each its own client instance). Every worker receives batches, "fails" on every tenth
message the first time it sees it (no ack: it comes back after its 2 s invisible time, to any worker,
with delivery_attempt 2) and acks the rest. Prints who got what and checks that every message was
acked exactly once. See docs/pop.md.
"""

from __future__ import annotations

import argparse
import collections
import sys
import threading
import time

from rocketq import Message, Producer, SimpleConsumer
from rocketq.admin import SyncAdminClient

TOPIC = "SimpleConsumerDemo"
GROUP = "SimpleConsumerDemoWorkers"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--namesrv", default="127.0.0.1:9876")
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args(argv)

    with SyncAdminClient(args.namesrv) as admin:
        admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=8, write_queue_nums=8)
    producer = Producer("SimpleConsumerDemoProducer", namesrv_addr=args.namesrv)
    producer.start()
    for i in range(args.messages):
        producer.send(Message(TOPIC, b"order-%d" % i))
    producer.shutdown()

    acked: collections.Counter[bytes] = collections.Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def worker(n: int) -> None:
        with SimpleConsumer(GROUP, namesrv_addr=args.namesrv, subscription={TOPIC: "*"}, await_duration=1,
                            instance_name=f"worker{n}") as consumer:
            while not stop.is_set():
                for msg in consumer.receive(max_messages=8, invisible_duration=2.0):
                    number = int(msg.body.split(b"-")[1])
                    if number % 10 == 0 and msg.delivery_attempt == 1:
                        print(f"worker{n}: {msg.body.decode()} failed, it will come back")
                        continue
                    consumer.ack(msg)
                    with lock:
                        acked[msg.body] += 1
                        if sum(acked.values()) >= args.messages:
                            stop.set()
                    if msg.delivery_attempt > 1:
                        print(f"worker{n}: {msg.body.decode()} done on attempt {msg.delivery_attempt}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(args.workers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    stop.wait(120)
    stop.set()
    for t in threads:
        t.join()
    once = all(count == 1 for count in acked.values())
    print(f"{len(acked)} of {args.messages} messages acked, each exactly once: {once} "
          f"({time.monotonic() - started:.1f} s)")
    return 0 if once and len(acked) == args.messages else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
