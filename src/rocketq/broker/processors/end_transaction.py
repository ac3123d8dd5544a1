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
from rocketq.remoting.endpoint import handles_runs

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

    @handles_runs("process_many")
    def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        result = self.process_many([request], channel)[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def process_many(self, requests: list[RemotingCommand], channel: Any
                     ) -> list[RemotingCommand | BaseException | None]:
        """A run of END_TRANSACTIONs read together (a busy producer pipelines them): decoded and
        checked one by one, stored together."""
        out: list[RemotingCommand | BaseException | None] = [None] * len(requests)
        todo: list[int] = []
        headers: list[EndTransactionRequestHeader] = []
        for i, request in enumerate(requests):
            try:
                h = EndTransactionRequestHeader.from_ext(request.ext_fields)
            except Exception as exc:
                out[i] = exc
                continue
            kind = h.commit_or_rollback
            if kind not in _KINDS:
                out[i] = request.make_response(ResponseCode.SYSTEM_ERROR, "commitOrRollback field wrong")
                continue
            if kind != COMMIT_TYPE or h.from_transaction_check:
                who = ("Check producer[%s] transaction state, " if h.from_transaction_check else
                       "The producer[%s] end transaction in sending message, ")
                log.warning(who + "%s. RequestHeader: %s Remark: %s", channel_address(channel),
                            _KINDS[kind], h, request.remark)
            todo.append(i)
            headers.append(h)
        if headers:
            for i, result in zip(todo, self._service.end_many(headers), strict=True):
                if result is not None:
                    out[i] = requests[i].make_response(*result)
        return out
