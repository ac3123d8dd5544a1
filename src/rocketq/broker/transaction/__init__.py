"""Transactional messages on the broker (RocketMQ 4.9's broker/transaction/).

A producer's half message (properties ``TRAN_MSG=true``, ``PGROUP``) is stored in
``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC`` / ``REAL_QID`` (`half.py`, called by the
send path); END_TRANSACTION commits it (a copy to the real topic) or rolls it back, and either way
writes an op record (tag ``d``, body = the half's queue offset) to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``
(`service.py`, called by `processors/end_transaction.py`). The check service (`check.py`) walks
the half queue every ``transactionCheckInterval`` and asks a live producer of the group about
every half message older than ``transactionTimeOut`` that has no op record yet. Every piece of
state lives in those topics and in the CID_RMQ_SYS_TRANS offsets, as in RocketMQ, so a restart
(or kill -9) loses nothing. See docs/transactions.md.
"""

from rocketq.broker.transaction.check import TransactionalMessageCheckService
from rocketq.broker.transaction.half import (
    CID_SYS_RMQ_TRANS,
    REMOVE_TAG,
    TransactionalMessageBridge,
    half_properties,
    is_transactional,
)
from rocketq.broker.transaction.service import TransactionalMessageService

__all__ = [
    "CID_SYS_RMQ_TRANS",
    "REMOVE_TAG",
    "TransactionalMessageBridge",
    "TransactionalMessageCheckService",
    "TransactionalMessageService",
    "half_properties",
    "is_transactional",
]
