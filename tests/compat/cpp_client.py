"""Drive the official Apache C++ RocketMQ client (PyPI ``rocketmq`` 0.4.4) from the command line.

The wheel bundles ``librocketmq.so`` and binds it with ctypes, so a bug on either side can kill
the interpreter: the tests therefore run this script in a subprocess with a timeout. It speaks the
same line protocol as ``node/ali_ons_roundtrip.js``: one JSON object per line on stdout
(``sent`` / ``received`` events, then one ``summary``), exit 0 on success, 2 on timeout, 1 on error.

Modes::

    cpp_client.py produce NAMESRV TOPIC GROUP COUNT [--big-body 5120]
    cpp_client.py orderly NAMESRV TOPIC GROUP COUNT --shards 3
    cpp_client.py consume NAMESRV TOPIC GROUP COUNT [--orderly] [--timeout 45]
    cpp_client.py consume NAMESRV TOPIC GROUP 0 --stop-file PATH   # a group member: until PATH exists

``--property K=V`` (repeatable) adds user properties to produced messages; on delivery the
consumer reports those keys (``--property K`` or ``K=V``) under ``properties``. With
``--stop-file`` the consumer prints a ``started`` event once ``start()`` returned and keeps
consuming (COUNT is then a minimum, usually 0) until the file appears, for tests that run it
next to other members of the same group.

The library writes its own log under ``$HOME/logs/rocketmq-cpp``: point HOME at a scratch
directory. Bodies come back as C strings (the binding cuts them at the first NUL byte), so every
body this script sends is plain ASCII.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

TAGS = ("TagA", "TagB")
_out_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    # Consumer callbacks run on the library's own threads; keep lines whole.
    with _out_lock:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def body_for(prefix: str, i: int) -> str:
    return f"{prefix}-{i}"


def big_body(size: int) -> str:
    # Repetitive enough that the client's zlib compression (bodies over 4 KiB) really shrinks it,
    # and distinctive enough that a decompression bug cannot go unnoticed.
    unit = "rocketq-big-body-0123456789-"
    text = (unit * (size // len(unit) + 1))[: size - 4]
    return "BIG:" + text


def digest(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:16]


def _decode(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _binding() -> Any:
    # Imported late: loading librocketmq.so is what may fail, and --help should not need it.
    import rocketmq.client  # type: ignore[import-untyped]

    return rocketmq.client


def _exit(code: int, summary: dict[str, Any]) -> None:
    summary["ok"] = code == 0
    emit(summary)
    # The binding's __del__ hooks shut the C++ client down a second time; skip them.
    os._exit(code)


def _shutdown(stop: Callable[[], None], seconds: float = 5.0) -> None:
    # A C++ shutdown that hangs must not turn a passed run into a timeout.
    worker = threading.Thread(target=stop, daemon=True)
    worker.start()
    worker.join(seconds)


def produce(args: argparse.Namespace, summary: dict[str, Any]) -> int:
    rmq = _binding()
    producer = rmq.Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    _credentials(args, producer)
    producer.start()
    try:
        for i in range(args.count):
            big = args.big_body and i == args.count - 1
            body = big_body(args.big_body) if big else body_for(args.prefix, i)
            tags = TAGS[i % len(TAGS)]
            keys = f"key-{i}"
            msg = rmq.Message(args.topic)
            msg.set_tags(tags)
            msg.set_keys(keys)
            msg.set_body(body)
            for key, value in args.properties.items():
                msg.set_property(key, value)
            result = producer.send_sync(msg)
            summary["sent"] += 1
            emit({
                "event": "sent", "msgId": result.msg_id, "status": result.status.name,
                "queueOffset": result.offset, "tags": tags, "keys": keys,
                "bodyLen": len(body), "bodySha": digest(body), "body": body if not big else None,
            })
    finally:
        _shutdown(producer.shutdown)
    return 0


def produce_orderly(args: argparse.Namespace, summary: dict[str, Any]) -> int:
    rmq = _binding()
    producer = rmq.Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    picked: dict[str, int] = {}

    def selector(mq_size: int, _msg: Any, arg: Any) -> int:
        import ctypes

        shard = ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0]
        picked["queue"] = shard % mq_size
        picked["mqSize"] = mq_size
        return picked["queue"]

    try:
        for i in range(args.count):
            shard = i % args.shards
            body = f"{args.prefix}-s{shard}-{i}"
            msg = rmq.Message(args.topic)
            msg.set_tags(TAGS[shard % len(TAGS)])
            msg.set_keys(f"shard-{shard}")
            msg.set_body(body)
            result = producer.send_orderly(msg, shard, queue_selector=selector)
            summary["sent"] += 1
            emit({
                "event": "sent", "msgId": result.msg_id, "status": result.status.name,
                "queueOffset": result.offset, "shard": shard, "queueId": picked.get("queue"),
                "mqSize": picked.get("mqSize"), "body": body,
            })
    finally:
        _shutdown(producer.shutdown)
    return 0


def consume(args: argparse.Namespace, summary: dict[str, Any]) -> int:
    rmq = _binding()
    done = threading.Event()
    seen: set[str] = set()
    lock = threading.Lock()

    def on_message(msg: Any) -> None:
        body = msg.body or b""
        uniq = _decode(msg.get_property("UNIQ_KEY"))
        record = {
            "event": "received", "msgId": _decode(msg.id), "uniqKey": uniq, "topic": msg.topic,
            "tags": _decode(msg.tags), "keys": _decode(msg.keys), "queueId": msg.queue_id,
            "queueOffset": msg.queue_offset, "commitLogOffset": msg.commit_log_offset,
            "reconsumeTimes": msg.reconsume_times, "bodyLen": len(body), "bodySha": digest(body),
            "body": _decode(body) if len(body) <= 256 else None,
            "thread": threading.get_ident(),
        }
        if args.properties:
            record["properties"] = {k: _decode(msg.get_property(k)) for k in args.properties}
        emit(record)
        with lock:
            summary["delivered"] += 1
            seen.add(f"{msg.queue_id}:{msg.queue_offset}")
            summary["received"] = len(seen)
            if len(seen) >= args.count and (args.count or not args.stop_file):
                done.set()

    consumer = rmq.PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    _credentials(args, consumer)
    consumer.subscribe(args.topic, on_message, args.expression)
    consumer.start()
    if args.stop_file:
        return _consume_until_stopped(args, summary, consumer, done)
    ok = done.wait(args.timeout)
    # Let the offset of the last message reach the broker (persisted every 5 s, and at shutdown).
    _shutdown(consumer.shutdown)
    if not ok:
        summary["error"] = f"timeout after {args.timeout}s"
        return 2
    return 0


def _consume_until_stopped(args: argparse.Namespace, summary: dict[str, Any], consumer: Any,
                           done: threading.Event) -> int:
    emit({"event": "started", "group": args.group, "topic": args.topic, "pid": os.getpid()})
    deadline = time.monotonic() + args.timeout
    while not os.path.exists(args.stop_file):
        if time.monotonic() >= deadline:
            _shutdown(consumer.shutdown)
            summary["error"] = f"timeout after {args.timeout}s (no stop file)"
            return 2
        time.sleep(0.05)
    # Shut down before judging: UNREGISTER_CLIENT and the final offsets belong to a clean run.
    _shutdown(consumer.shutdown)
    if args.count and not done.is_set():
        summary["error"] = f"stopped with {summary['received']} of at least {args.count} messages"
        return 2
    return 0


def _credentials(args: argparse.Namespace, client: Any) -> None:
    """ACL: SetProducerSessionCredentials / SetPushConsumerSessionCredentials."""
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")


def _properties(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("produce", "orderly", "consume"))
    parser.add_argument("namesrv")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("count", type=int)
    parser.add_argument("--prefix", default="cpp")
    parser.add_argument("--big-body", type=int, default=0,
                        help="make the last produced body this many bytes (the client compresses > 4 KiB)")
    parser.add_argument("--shards", type=int, default=3, help="orderly: number of sharding keys")
    parser.add_argument("--orderly", action="store_true", help="consume: orderly push consumer")
    parser.add_argument("--expression", default="*", help="consume: tag expression")
    parser.add_argument("--timeout", type=float, default=45.0)
    parser.add_argument("--send-timeout-ms", type=int, default=5000)
    parser.add_argument("--access-key", default=None, help="sign requests (ACL) with this account")
    parser.add_argument("--secret-key", default=None, help="the account's secret")
    parser.add_argument("--property", action="append", default=[], metavar="K=V",
                        help="produce: user property; consume: report this key (repeatable)")
    parser.add_argument("--stop-file", default=None,
                        help="consume: run as a group member until this file exists")
    args = parser.parse_args(argv)
    args.properties = _properties(args.property)

    summary: dict[str, Any] = {"event": "summary", "mode": args.mode, "expected": args.count,
                               "sent": 0, "received": 0, "delivered": 0}
    started = time.monotonic()
    # A hung C++ call (connect, send) must still end this process with a summary line.
    watchdog = threading.Timer(args.timeout + 10, lambda: _exit(2, {**summary, "error": "watchdog"}))
    watchdog.daemon = True
    watchdog.start()
    handlers = {"produce": produce, "orderly": produce_orderly, "consume": consume}
    try:
        code = handlers[args.mode](args, summary)
    except Exception as exc:  # the binding raises its own RocketMQException family
        summary["error"] = f"{type(exc).__name__}: {exc}"
        code = 1
    summary["elapsedMs"] = int((time.monotonic() - started) * 1000)
    _exit(code, summary)


if __name__ == "__main__":
    main()
