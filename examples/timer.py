"""Timer messages: deliver at a time (or after a delay), and recall one before it fires.

    .venv/bin/rocketq up --data-dir /tmp/rocketq-demo --set recallMessageEnable=true &
    .venv/bin/python examples/timer.py [--namesrv 127.0.0.1:9876] [--topic TimerDemo]

Sends five messages due 1..5 s from now (one by ``delay``, the others by ``delivery_timestamp``),
recalls the one due at 3 s with its ``SendResult.recall_handle``, and prints each message as a push
consumer receives it, with how late it came (timerPrecisionMs, 1000 by default, bounds that).
Four arrive; the recalled one never does. See docs/timer.md.
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import timedelta

from rocketq import ConsumeStatus, Message, MessageExt, Producer, PushConsumer, ServerError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="TimerDemo")
    args = parser.parse_args()

    expected = 4
    seen: list[str] = []
    done = threading.Event()

    def on_messages(msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
        for m in msgs:
            if "TIMER_OUT_MS" not in m.properties:
                continue  # the warm-up message
            props = m.properties
            delay = int(props.get("TIMER_DELAY_MS") or 0)
            due = int(props.get("TIMER_DELIVER_MS") or m.born_timestamp + delay)
            print(f"received {m.body.decode():<12} {int(time.time() * 1000) - due:>5} ms after its time")
            seen.append(m.body.decode())
        if len(seen) >= expected:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("timer-demo", namesrv_addr=args.namesrv,
                            consume_from_where="CONSUME_FROM_LAST_OFFSET")
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_messages)
    with Producer("timer-demo-producer", namesrv_addr=args.namesrv) as producer:
        producer.send(Message(args.topic, b"warm-up route"))  # the topic exists before the consumer starts
        consumer.start()
        try:
            now = int(time.time() * 1000)
            producer.send(Message(args.topic, b"in 1 s", delay=timedelta(seconds=1)))
            handles = {}
            for s in (2, 3, 4, 5):
                at = now + s * 1000
                r = producer.send(Message(args.topic, f"at +{s} s".encode(), delivery_timestamp=at))
                handles[s] = r.recall_handle
            try:
                producer.recall(args.topic, handles[3] or "")
                print("recalled the message due at +3 s")
            except ServerError as e:  # recallMessageEnable is off on this broker
                print(f"recall refused: {e.remark} (start the broker with --set recallMessageEnable=true)")
                expected = 5
            done.wait(30)
            time.sleep(1.5)  # a recalled message would have arrived by now
        finally:
            consumer.shutdown()
    print(f"{len(seen)} received: {', '.join(seen)}")
    return 0 if len(seen) >= expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
