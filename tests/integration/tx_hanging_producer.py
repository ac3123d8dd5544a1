"""A transactional producer that dies before it ends its transaction, run as its own process:
``python tx_hanging_producer.py NAMESRV TOPIC GROUP``.

It sends one half message; its local transaction prints ``HALF SENT <msg id>`` and never returns,
and it answers every check with UNKNOW: the test kills it with SIGKILL, and another producer of
the group must then get the broker's check.
"""

from __future__ import annotations

import sys
import threading
from typing import Any


def main(namesrv: str, topic: str, group: str) -> None:
    from rocketq import LocalTransactionState, Message, TransactionProducer

    class Hang:
        def execute_local_transaction(self, msg: Any, arg: Any) -> Any:
            print(f"HALF SENT {msg.transaction_id}", flush=True)
            threading.Event().wait()  # killed here, before END_TRANSACTION

        def check_local_transaction(self, msg: Any) -> Any:
            return LocalTransactionState.UNKNOW

    producer = TransactionProducer(group, namesrv_addr=namesrv, listener=Hang(), instance_name="hanging")
    producer.start()
    producer.send_message_in_transaction(Message(topic, b"orphan"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
