"""ACL (and TLS): produce and consume with an account, and see what a wrong secret gets.

    mkdir -p /tmp/rocketq-acl/conf && cat > /tmp/rocketq-acl/conf/plain_acl.yml <<'YML'
    accounts:
    - accessKey: rocketmq2
      secretKey: '12345678'
      admin: true
    - accessKey: appUser01
      secretKey: appSecret01
      defaultTopicPerm: DENY
      defaultGroupPerm: SUB
      topicPerms: [AclDemo=PUB|SUB]
    YML
    .venv/bin/rocketq up --data-dir /tmp/rocketq-acl --set aclEnable=true &
    ROCKETQ_ACCESS_KEY=rocketmq2 ROCKETQ_SECRET_KEY=12345678 \\
        .venv/bin/rocketq admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t AclDemo
    .venv/bin/python examples/acl_tls.py [--namesrv 127.0.0.1:9876] [--tls --ca ca.pem]

With TLS, start the cluster with ``--set tls.server.certPath=... --set tls.server.keyPath=...``
(docs/security.md) and pass ``--tls --ca`` the CA that signed the certificate.
"""

from __future__ import annotations

import argparse
import sys
import threading

from rocketq import ConsumeStatus, Message, Producer, PushConsumer, SessionCredentials
from rocketq.errors import ServerError

TOPIC = "AclDemo"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", default="127.0.0.1:9876")
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--ca", default=None, help="CA certificate (PEM) of the servers")
    args = ap.parse_args(argv)
    transport = {"tls": args.tls, "tls_ca_file": args.ca}
    creds = SessionCredentials("appUser01", "appSecret01")

    producer = Producer("acl-demo-producer", namesrv_addr=args.namesrv, credentials=creds, **transport)
    producer.start()
    try:
        for i in range(5):
            print("sent", producer.send(Message(TOPIC, f"hello {i}".encode())).status.name)
    finally:
        producer.shutdown()

    got: list[str] = []
    done = threading.Event()

    def on_messages(msgs: list, ctx: object) -> ConsumeStatus:
        got.extend(m.body.decode() for m in msgs)
        if len(got) >= 5:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("acl-demo-consumer", namesrv_addr=args.namesrv, credentials=creds,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET", **transport)
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(on_messages)
    consumer.start()
    try:
        done.wait(30)
    finally:
        consumer.shutdown()
    print("received", sorted(got))

    wrong = Producer("acl-demo-wrong", namesrv_addr=args.namesrv, retry_times_when_send_failed=0,
                     credentials=SessionCredentials("appUser01", "not-the-secret"), **transport)
    wrong.start()
    try:
        wrong.send(Message(TOPIC, b"refused"))
        print("a wrong secret was accepted?!")
        return 1
    except ServerError as e:
        print(f"a wrong secret is refused: code {e.code}: {e.remark}")
    finally:
        wrong.shutdown()
    return 0 if len(got) >= 5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
