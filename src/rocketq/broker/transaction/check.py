"""TransactionalMessageCheckService: every ``transactionCheckInterval`` ms, one check pass; and the
CHECK_TRANSACTION_STATE (39) a pass sends (AbstractTransactionalMessageCheckListener.sendCheckMessage
and Broker2Client.checkProducerTransactionState).

The request goes one-way to a live connection of the producer group named by the half message's
``PGROUP`` (any producer of the group can answer: the local transaction is the group's). Its body
is the message re-encoded as RocketMQ's MessageDecoder.encode does, with the real topic and queue
and the renewed half's queue / commit-log offsets, which the producer echoes in its
END_TRANSACTION. With no live producer the check is skipped; the renewed copy is checked again next
pass, until ``transactionCheckMax``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from rocketq.broker.transaction.service import TransactionalMessageService
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import CheckTransactionStateRequestHeader
from rocketq.codec.message import MessageExt, encode_message
from rocketq.codec.properties import MessageConst
from rocketq.errors import RocketQError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = ["TransactionalMessageCheckService", "check_request"]

log = logging.getLogger("rocketq.broker.transaction")

_CHECK = int(RequestCode.CHECK_TRANSACTION_STATE)


def check_request(msg: MessageExt) -> RemotingCommand:
    """The CHECK_TRANSACTION_STATE request for a renewed half message (``msg`` already carries
    the real topic / queue and the renewed offsets)."""
    uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=msg.queue_offset,
        commit_log_offset=msg.commit_log_offset,
        msg_id=uniq,
        transaction_id=uniq,
        offset_msg_id=msg.offset_msg_id,
    )
    return RemotingCommand.request(_CHECK, header.to_ext(), encode_message(msg))


class TransactionalMessageCheckService:
    def __init__(self, controller: BrokerController, service: TransactionalMessageService) -> None:
        self._ctl = controller
        self.service = service
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._running = asyncio.Lock()
        self.passes = 0

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="TransactionalMessageCheckService")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def wakeup(self) -> None:
        """Run a pass now instead of at the end of the interval (tests, admin)."""
        self._wakeup.set()

    async def _run(self) -> None:
        log.info("Start transaction check service thread!")
        while True:
            interval = self._ctl.broker_config.transaction_check_interval / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction check pass failed")

    async def check_once(self) -> None:
        """One pass (onWaitEnd): reads transactionTimeOut and transactionCheckMax as they are now."""
        async with self._running:
            bc = self._ctl.broker_config
            loop = asyncio.get_running_loop()
            begin = loop.time()
            log.info("Begin to check prepare message")
            await self.service.check(bc.transaction_time_out, bc.transaction_check_max, self.send_check)
            self.passes += 1
            log.info("End to check prepare message, consumed time:%d", int((loop.time() - begin) * 1000))
            # the pass moved the CID_RMQ_SYS_TRANS offsets: on disk soon, so a kill -9 repeats little
            with contextlib.suppress(Exception):
                await self._ctl.offset_manager.persist_async()

    def send_check(self, msg: MessageExt) -> None:
        group = msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) or ""
        channel = self._ctl.producer_manager.get_available_channel(group)
        if channel is None:
            log.warning("Check transaction failed, channel is null. groupId=%s", group)
            return
        try:
            channel.invoke_oneway(check_request(msg))
        except RocketQError as exc:
            log.error("Check transaction failed because invoke producer exception. group=%s, msgId=%s, "
                      "error=%s", group, msg.offset_msg_id, exc)
