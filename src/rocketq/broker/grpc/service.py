"""apache.rocketmq.v2.MessagingService on the broker: each RPC translated to the request the
broker's own processors serve (send, pop, ack, end transaction), so remoting and gRPC clients
share one send path, one pop service and one transaction service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from rocketq.broker.client_manager import ClientChannelInfo
from rocketq.broker.grpc import convert
from rocketq.broker.grpc.clients import (
    GrpcClient,
    parse_transaction_id,
    producer_group,
    transaction_id,
)
from rocketq.broker.grpc.consume import ConsumeRpcs
from rocketq.broker.grpc.offsets import OffsetRpcs
from rocketq.broker.grpc.protocol import load
from rocketq.broker.grpc.routes import ClusterRoutes
from rocketq.broker.topic_manager import PERM_READ, PERM_WRITE
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import EndTransactionRequestHeader
from rocketq.codec.message import MessageExt
from rocketq.errors import RocketQError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

log = logging.getLogger("rocketq.broker.grpc")

_COMMIT, _ROLLBACK = 0x8, 0xC  # MessageSysFlag.TRANSACTION_COMMIT_TYPE / ROLLBACK_TYPE
# The generated base answers UNIMPLEMENTED for an RPC this class does not define.
_Servicer: Any = load()[2].MessagingServiceServicer


class MessagingService(ConsumeRpcs, OffsetRpcs, _Servicer):  # type: ignore[misc]
    def __init__(self, controller: BrokerController, host: str) -> None:
        self._ctl = controller
        self.d, self.s, _ = load()
        self.host = host
        self.port = 0
        self.clients: dict[str, GrpcClient] = {}
        self.routes = ClusterRoutes(controller)

    # -- clients ---------------------------------------------------------------------------------

    def client(self, context: Any) -> GrpcClient:
        """The caller, by its x-mq-client-id (one entry per client, however many calls it makes)."""
        md = dict(context.invocation_metadata() or ())
        client_id = md.get("x-mq-client-id") or context.peer()
        c = self.clients.get(client_id)
        if c is None:
            peer = context.peer()
            addr = peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer
            c = GrpcClient(client_id, addr, md.get("x-mq-namespace", ""), md.get("x-mq-language", ""))
            c.to_v2 = lambda m, tid, c=c: self._orphan(c, m, tid)
            c.on_close = self.forget
            self.clients[client_id] = c
        return c

    def forget(self, c: GrpcClient) -> None:
        if self.clients.get(c.client_id) is c:
            del self.clients[c.client_id]
        c.on_close = None  # already forgetting it
        c.close()
        self._ctl.producer_manager.do_channel_close_event(c)
        self._ctl.consumer_manager.do_channel_close_event(c)

    def status(self, name: str, message: str = "") -> Any:
        return self.d.Status(code=self.d.Code.Value(name), message=message or name)

    def error(self, exc: BaseException) -> Any:
        if isinstance(exc, RocketQError):
            return self.status(convert.code_name(exc.code), str(exc))
        log.exception("gRPC call failed", exc_info=exc)
        return self.status("INTERNAL_ERROR", str(exc))

    def topic(self, c: GrpcClient, resource: Any) -> str:
        return convert.namespaced(resource) if resource.resource_namespace else (
            f"{c.namespace}%{resource.name}" if c.namespace else resource.name)

    # -- QueryRoute, Heartbeat, NotifyClientTermination -------------------------------------------

    async def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802 - the RPC's name
        """Every broker group's queues of the topic, each with the gRPC endpoint of its broker
        (this broker's from its topic table, the others' from the name server: routes.py)."""
        c = self.client(context)
        topic = self.topic(c, request.topic)
        cfg = self._ctl.topic_manager.select_topic_config(topic)
        queues = []
        if cfg is not None:
            queues += self._queues(request.topic, self._ctl.broker_name, self.host, self.port,
                                   cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm)
        for r in await self.routes.others(topic):
            queues += self._queues(request.topic, r.broker_name, r.host, r.port,
                                   r.read_queue_nums, r.write_queue_nums, r.perm)
        if not queues:
            missing = self.status("TOPIC_NOT_FOUND", f"topic {topic} not found")
            return self.s.QueryRouteResponse(status=missing)
        return self.s.QueryRouteResponse(status=self.status("OK"), message_queues=queues)

    def _queues(self, topic: Any, broker_name: str, host: str, port: int, reads: int, writes: int,
                perm: int) -> list[Any]:
        d = self.d
        broker = d.Broker(name=broker_name, id=0, endpoints=d.Endpoints(
            scheme=d.IPv4, addresses=[d.Address(host=host, port=port)]))
        queues = []
        for qid in range(max(reads, writes)):
            readable = qid < reads and perm & PERM_READ
            writable = qid < writes and perm & PERM_WRITE
            p = d.READ_WRITE if readable and writable else d.READ if readable else (
                d.WRITE if writable else d.NONE)
            queues.append(d.MessageQueue(topic=topic, id=qid, permission=p, broker=broker,
                                         accept_message_types=[d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]))
        return queues

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        c = self.client(context)
        for group in c.groups:
            self._ctl.producer_manager.register_producer(group, self._info(c))
        if request.HasField("group"):
            self.register_consumer(c, self.topic(c, request.group), request.client_type)
        return self.s.HeartbeatResponse(status=self.status("OK"))

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.forget(self.client(context))
        return self.s.NotifyClientTerminationResponse(status=self.status("OK"))

    async def SyncLiteSubscription(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Lite topics (RocketMQ 5.4's LiteTopic, one parent topic with many light sub-topics) have
        no store, route or pop behind them in rocketq, and Apache's 5.3 proxy has no such RPC
        either: a v2 status a client can read and report, rather than a transport UNIMPLEMENTED."""
        self.client(context)
        return self.s.SyncLiteSubscriptionResponse(status=self.status(
            "NOT_IMPLEMENTED", "lite topics (SyncLiteSubscription) are not served by rocketq"))

    def _info(self, c: GrpcClient) -> ClientChannelInfo:
        return ClientChannelInfo(c, c.client_id, c.language or "GRPC", 0)  # type: ignore[arg-type]

    # -- SendMessage, EndTransaction --------------------------------------------------------------

    async def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        """Every message of the request through the send path in one run (`process_many`: one
        store append for the lot), answered entry by entry."""
        c = self.client(context)
        if not request.messages:
            return self.s.SendMessageResponse(status=self.status("BAD_REQUEST", "no message to send"))
        entries: list[Any] = [None] * len(request.messages)
        cmds: list[RemotingCommand] = []
        where: list[int] = []
        for i, m in enumerate(request.messages):
            try:
                cmds.append(self._send_request(c, m))
                where.append(i)
            except Exception as exc:
                entries[i] = self.s.SendResultEntry(status=self.error(exc))
        processors = self._ctl.processors
        assert processors is not None
        for i, answer in zip(where, processors.send.process_many(cmds, c), strict=True):
            try:
                if isinstance(answer, BaseException):
                    raise answer
                resp = answer if isinstance(answer, RemotingCommand) else await answer
                entries[i] = self._send_result(request.messages[i], resp)
            except Exception as exc:
                entries[i] = self.s.SendResultEntry(status=self.error(exc))
        return self.s.SendMessageResponse(status=entries[0].status, entries=entries)

    def _send_request(self, c: GrpcClient, m: Any) -> RemotingCommand:
        topic = self.topic(c, m.topic)
        sp = m.system_properties
        queue_id = -1
        if sp.HasField("message_group"):
            cfg = self._ctl.topic_manager.select_topic_config(topic)
            queue_id = convert.fifo_queue(sp.message_group, cfg.write_queue_nums if cfg else 0)
        return convert.send_request(m, topic, queue_id, producer_group(topic))

    def _send_result(self, m: Any, resp: RemotingCommand) -> Any:
        if resp.code != ResponseCode.SUCCESS:
            return self.s.SendResultEntry(status=self.status(convert.code_name(resp.code), resp.remark or ""))
        ext = resp.fields() or {}
        qoff = int(ext.get("queueOffset", "0"))
        sp = m.system_properties
        tid = ""
        if sp.message_type == self.d.TRANSACTION:
            tid = transaction_id(int(ext["msgId"][-16:], 16), qoff)
        return self.s.SendResultEntry(status=self.status("OK"), message_id=sp.message_id or ext["msgId"],
                                      transaction_id=tid, offset=qoff,
                                      recall_handle=ext.get("recallHandle", ""))

    async def EndTransaction(self, request: Any, context: Any) -> Any:  # noqa: N802
        c = self.client(context)
        topic = self.topic(c, request.topic)
        try:
            phys, qoff = parse_transaction_id(request.transaction_id)
        except ValueError:
            return self.s.EndTransactionResponse(status=self.status("INVALID_TRANSACTION_ID"))
        kind = {self.d.COMMIT: _COMMIT, self.d.ROLLBACK: _ROLLBACK}.get(request.resolution)
        if kind is None:
            return self.s.EndTransactionResponse(status=self.status("BAD_REQUEST", "no resolution"))
        h = EndTransactionRequestHeader(
            producer_group=producer_group(topic), tran_state_table_offset=qoff, commit_log_offset=phys,
            commit_or_rollback=kind, msg_id=request.message_id, topic=topic,
            from_transaction_check=request.source == self.d.SOURCE_SERVER_CHECK,
            transaction_id=request.transaction_id)
        result = self._ctl.transaction_service.end_transaction(h)
        if result is None or result[0] == ResponseCode.SUCCESS:
            return self.s.EndTransactionResponse(status=self.status("OK"))
        return self.s.EndTransactionResponse(status=self.status("INVALID_TRANSACTION_ID", result[1] or ""))

    def _orphan(self, c: GrpcClient, m: MessageExt, tid: str) -> Any:
        """The RecoverOrphanedTransactionCommand of a half message the broker checks."""
        topic = m.properties.get("REAL_TOPIC") or m.topic
        ns, _, name = topic.rpartition("%") if c.namespace else ("", "", topic)
        msg = convert.to_v2(self.d, m, name, ns)
        command = self.s.RecoverOrphanedTransactionCommand(message=msg, transaction_id=tid)
        return self.s.TelemetryCommand(recover_orphaned_transaction_command=command)

    # -- Telemetry ---------------------------------------------------------------------------------

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        c = self.client(context)
        reader = asyncio.ensure_future(self._read_telemetry(c, request_iterator))
        try:
            while True:
                get = asyncio.ensure_future(c.outbox.get())
                done, _ = await asyncio.wait({get, reader}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    return
                command = get.result()
                if command is None:
                    return
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            # Apache's proxy, too, takes a client whose Telemetry stream ended for gone
            self.forget(c)

    async def _read_telemetry(self, c: GrpcClient, commands: Any) -> None:
        async for command in commands:
            kind = command.WhichOneof("command")
            if kind == "settings":
                c.send(self._settings(c, command.settings))
            elif kind in ("thread_stack_trace", "verify_message_result"):
                log.info("%s answered %s (nonce %s)", c, kind, getattr(command, kind).nonce)

    def _settings(self, c: GrpcClient, settings: Any) -> Any:
        """Remember what the client announced and answer with its settings and the broker's."""
        c.settings = settings
        echo = self.d.Settings()
        echo.CopyFrom(settings)
        if settings.WhichOneof("pub_sub") == "publishing":
            for t in settings.publishing.topics:
                group = producer_group(self.topic(c, t))
                c.groups.add(group)
                self._ctl.producer_manager.register_producer(group, self._info(c))
            echo.publishing.max_body_size = self._ctl.store_config.max_message_size
        elif settings.WhichOneof("pub_sub") == "subscription":
            sub = echo.subscription
            if not sub.HasField("receive_batch_size"):
                sub.receive_batch_size = 32
            if sub.group.name:
                self.register_consumer(c, self.topic(c, sub.group), settings.client_type)
        policy = echo.backoff_policy
        if not settings.HasField("backoff_policy") or not policy.WhichOneof("strategy"):
            policy.max_attempts = policy.max_attempts or 3
            policy.exponential_backoff.initial.FromMilliseconds(1000)
            policy.exponential_backoff.max.FromMilliseconds(30000)
            policy.exponential_backoff.multiplier = 2.0
        return self.s.TelemetryCommand(status=self.status("OK"), settings=echo)
