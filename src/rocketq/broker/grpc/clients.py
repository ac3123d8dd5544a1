"""A gRPC client as the broker's managers see a connection: the channel stand-in that the
producer manager lists (admin's connections), and that a transaction check reaches through the
client's Telemetry stream."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import CheckTransactionStateRequestHeader
from rocketq.codec.message import decode_message

log = logging.getLogger("rocketq.broker.grpc")

_CHECK = int(RequestCode.CHECK_TRANSACTION_STATE)


def producer_group(topic: str) -> str:
    """The producer group a gRPC producer of `topic` is known by: v2 producers name no group, so
    half messages carry this one and a transaction check reaches a producer of the topic."""
    return f"GRPC_PRODUCER_{topic}"


def transaction_id(commit_log_offset: int, queue_offset: int) -> str:
    """What EndTransaction needs to find a half message, as one opaque v2 transaction id."""
    return f"{commit_log_offset:X}-{queue_offset:X}"


def parse_transaction_id(text: str) -> tuple[int, int]:
    """(commit log offset, half queue offset); ValueError for an id this broker did not issue."""
    phys, _, qoff = text.partition("-")
    return int(phys, 16), int(qoff, 16)


class GrpcClient:
    """One gRPC client (by its x-mq-client-id): its peer, its namespace and its Telemetry outbox."""

    def __init__(self, client_id: str, remote_address: str, namespace: str, language: str) -> None:
        self.client_id = client_id
        self.remote_address = remote_address
        self.namespace = namespace
        self.language = language
        self.attrs: dict[str, Any] = {}
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()
        self.is_active = True
        self.settings: Any = None
        self.groups: set[str] = set()  # producer groups it is registered under
        self.to_v2: Any = None  # set by the service: MessageExt -> v2 Message in this namespace
        self.on_close: Any = None  # set by the service: forget the client

    def __repr__(self) -> str:
        return f"GrpcClient({self.client_id}@{self.remote_address})"

    def close(self) -> None:
        """The managers expired it (no heartbeat for channelExpiredTimeout), or it left."""
        if not self.is_active:
            return
        self.is_active = False
        self.outbox.put_nowait(None)  # ends the Telemetry stream
        if self.on_close is not None:
            self.on_close(self)

    def send(self, command: Any) -> None:
        """A server command on the Telemetry stream."""
        self.outbox.put_nowait(command)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """The broker's CHECK_TRANSACTION_STATE, as a RecoverOrphanedTransactionCommand."""
        if request.code != _CHECK or self.to_v2 is None:
            log.debug("%s: no gRPC form for request code %d", self, request.code)
            return
        h = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        msg, _ = decode_message(request.body)  # type: ignore[arg-type]  # a request we built: bytes
        tid = transaction_id(h.commit_log_offset, h.tran_state_table_offset)
        self.send(self.to_v2(msg, tid))
