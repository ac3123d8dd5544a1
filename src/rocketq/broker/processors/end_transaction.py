"""EndTransactionProcessor: END_TRANSACTION (37), a producer's commit or rollback of a half message.

Usually one-way (then nothing is sent back). RocketMQ's answers otherwise: SUCCESS, SYSTEM_ERROR
with "Find prepared transaction message failed" / "The producer group wrong" / "The transaction
state table offset wrong" / "The commit log offset wrong", a store failure's code; an UNKNOW
(commitOrRollback 0) gets no answer at all, and a commitOrRollback other than 0, 8 or 12 is a
malformed header ("commitOrRollback field wrong"). The work is
`broker/transaction/service.py`'s; ``fromTransactionCheck`` only changes what is logged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rocketq.broker.transaction.service import COMMIT_TYPE, NOT_TYPE, ROLLBACK_TYPE
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import EndTransactionRequestHeader
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.transaction.service import TransactionalMessageService
    from rocketq.codec.command import RemotingCommand

__all__ = ["EndTransactionProcessor"]

log = logging.getLogger("rocketq.broker.transaction")

_KINDS = {NOT_TYPE: "it's pending status", COMMIT_TYPE: "the producer commit the message",
          ROLLBACK_TYPE: "the producer rollback the message"}


class EndTransactionProcessor:
    def __init__(self, service: TransactionalMessageService) -> None:
        self._service = service

    def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        h = EndTransactionRequestHeader.from_ext(request.ext_fields)
        kind = h.commit_or_rollback
        if kind not in _KINDS:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "commitOrRollback field wrong")
        if kind != COMMIT_TYPE or h.from_transaction_check:
            who = "Check producer[%s] transaction state, " if h.from_transaction_check else \
                "The producer[%s] end transaction in sending message, "
            log.warning(who + "%s. RequestHeader: %s Remark: %s", channel_address(channel), _KINDS[kind], h,
                        request.remark)
        result = self._service.end_transaction(h)
        if result is None:
            return None
        code, remark = result
        return request.make_response(code, remark)
