"""Message administration: look messages up (by id, key, unique key, queue offset), read queues,
send test messages and measure send round trips (mqadmin's message commands)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rocketq.admin._base import AdminBase
from rocketq.admin.models import QueryConsumeQueueResult, SendRT
from rocketq.client.api import PULL_SYS_FLAG_SUBSCRIPTION
from rocketq.client.consumer.pull_api import PullAPIWrapper, one_off_subscription
from rocketq.client.message import Message, MessageExt, MessageQueue, PullResult, SendResult
from rocketq.client.producer.producer import Producer
from rocketq.codec.codes import RequestCode
from rocketq.codec.fastjson import loads
from rocketq.codec.headers import QueryMessageRequestHeader
from rocketq.codec.message import decode_offset_msg_id
from rocketq.errors import (
    InvalidArgument,
    ProtocolError,
    QueryNotFound,
    RocketQError,
    ServerError,
)

__all__ = ["ADMIN_PRODUCER_GROUP", "MAX_QUERY_TIMESTAMP", "TOOLS_CONSUMER_GROUP", "MessageAdmin"]

log = logging.getLogger("rocketq.admin")

# The group mqadmin pulls with: every broker has it, so reading a queue needs no setup.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
ADMIN_PRODUCER_GROUP = "PID_ROCKETQ_ADMIN"
# mqadmin's producer group for `queryMsgById -s true`.
RESEND_PRODUCER_GROUP = "ReSendMsgById"
# Properties the broker or producer writes on every stored message: a resent copy gets its own.
_STORED_ONLY_PROPERTIES = frozenset(
    {"TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "MIN_OFFSET", "MAX_OFFSET", "CLUSTER", "REAL_TOPIC",
     "REAL_QID", "CONSUME_START_TIME", "TRAN_MSG"}
)
MAX_QUERY_TIMESTAMP = 2**63 - 1
# A unique-key lookup returns every stored copy (retries store a message again); the broker caps it.
DEFAULT_QUERY_MAX_NUM = 64


class MessageAdmin(AdminBase):
    # -- lookups ----------------------------------------------------------------------------------------

    async def view_message(self, topic: str | None, msg_id: str) -> MessageExt:
        """``queryMsgById``: an offset msgId names its broker and commit-log offset; anything else
        is looked up as the client's unique key (which needs the topic).

        Both ids are 32 hex digits, so an id counts as an offset msgId only when the address in it
        is a broker the name servers know: a unique key never makes us dial a producer's host.
        """
        try:
            ip, port, offset = decode_offset_msg_id(msg_id)
        except (ProtocolError, ValueError):
            return await self._one_by_unique_key(topic, msg_id)
        addr = f"{ip}:{port}"
        info = await self.examine_broker_cluster_info()
        if any(addr in b.broker_addrs.values() for b in info.broker_addr_table.values()):
            try:
                return await self.api.view_message(addr, offset, self.timeout)
            except ServerError as exc:
                log.debug("view %s on %s failed (%s); trying it as a unique key", msg_id, addr, exc)
        return await self._one_by_unique_key(topic, msg_id)

    async def _one_by_unique_key(self, topic: str | None, uniq_key: str) -> MessageExt:
        if not topic:
            raise InvalidArgument(f"{uniq_key} is not the offset msgId of a known broker; give the topic "
                                  "to look it up as a unique key")
        found = await self.query_message_by_unique_key(topic, uniq_key)
        if not found:
            raise QueryNotFound(f"no message with id {uniq_key}", topic=topic)
        return found[0]

    async def query_message(
        self,
        topic: str,
        key: str,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin: int = 0,
        end: int = MAX_QUERY_TIMESTAMP,
        *,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE on every broker of the topic: messages whose KEYS (or UNIQ_KEY) has ``key``.

        The index is by hash, so the answers are re-checked against the key here.
        """
        header = QueryMessageRequestHeader(topic, key, max_num, begin, end, unique_key)
        out: list[MessageExt] = []
        for broker in await self.topic_brokers(topic):
            assert broker.master_addr is not None
            out.extend(await self.api.query_message(broker.master_addr, header, self.timeout))
        if unique_key:
            out = [m for m in out if m.uniq_key == key]
        else:
            out = [m for m in out if key in (m.keys or "").split(" ")]
        out.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return out[:max_num]

    async def query_message_by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        """``queryMsgByUniqueKey``: the stored copies of the message with this client-side id."""
        return await self.query_message(topic, uniq_key, DEFAULT_QUERY_MAX_NUM, unique_key=True)

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of a topic, from its route."""
        route = await self.examine_topic_route_info(topic)
        masters = {b.broker_name for b in route.broker_datas if b.master_addr}
        return sorted(
            MessageQueue(topic, q.broker_name, i)
            for q in route.queue_datas
            if q.broker_name in masters and q.perm & 4
            for i in range(q.read_queue_nums)
        )

    async def pull_messages(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        sub_expression: str = "*",
        addr: str | None = None,
    ) -> PullResult:
        """One pull of ``mq`` from ``offset`` as TOOLS_CONSUMER (commits nothing, never holds).

        ``addr`` saves looking the queue's broker up when the caller already has it.
        """
        if addr is None:
            addr = await self.find_broker_addr(mq.broker_name)
        sub = one_off_subscription(mq.topic, sub_expression)
        pull_api = PullAPIWrapper(self.api, TOOLS_CONSUMER_GROUP)
        flags = PULL_SYS_FLAG_SUBSCRIPTION
        return await pull_api.pull(mq, sub, offset, max_nums, flags, self.timeout, addr=addr)

    async def read_queue(
        self, mq: MessageQueue, begin: int, end: int, sub_expression: str = "*", limit: int | None = None
    ) -> AsyncIterator[MessageExt]:
        """The messages of ``mq`` with offsets in [begin, end), in order, pulled in batches."""
        offset = begin
        yielded = 0
        addr = await self.find_broker_addr(mq.broker_name)
        while offset < end and (limit is None or yielded < limit):
            result = await self.pull_messages(mq, offset, min(32, end - offset), sub_expression, addr)
            for msg in result.messages:
                if msg.queue_offset >= end or (limit is not None and yielded >= limit):
                    return
                yield msg
                yielded += 1
            if result.next_begin_offset <= offset:
                return
            offset = result.next_begin_offset

    async def query_message_by_offset(
        self, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> MessageExt:
        """``queryMsgByOffset``: the message at one queue offset."""
        result = await self.pull_messages(MessageQueue(topic, broker_name, queue_id), offset, 1)
        for msg in result.messages:
            if msg.queue_offset == offset:
                return msg
        raise QueryNotFound(
            f"no message at offset {offset} of {topic}/{broker_name}/{queue_id} ({result.status.name})"
        )

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.api.get_max_offset(await self.find_broker_addr(mq.broker_name), mq, self.timeout)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.api.get_min_offset(await self.find_broker_addr(mq.broker_name), mq, self.timeout)

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp`` ms."""
        addr = await self.find_broker_addr(mq.broker_name)
        return await PullAPIWrapper(self.api, TOOLS_CONSUMER_GROUP).offset_at_or_after(
            mq, addr, timestamp, self.timeout)

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int, group: str | None = None
    ) -> QueryConsumeQueueResult:
        """QUERY_CONSUME_QUEUE: raw consume-queue entries of one queue."""
        ext = {"topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count)}
        if group:
            ext["consumerGroup"] = group
        response = await self._call(addr, RequestCode.QUERY_CONSUME_QUEUE, ext)
        return QueryConsumeQueueResult.from_json(self._json(response, "QUERY_CONSUME_QUEUE"))

    async def consume_message_directly(
        self, group: str, client_id: str, topic: str, msg_id: str
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: ask one consumer (through its broker) to consume a message now.

        ``msg_id`` is an offset msgId or a unique key; it is looked up first (as Java's admin does),
        because a unique key also decodes as an offset msgId, to an address that is no broker."""
        msg = await self.view_message(topic, msg_id)
        addr = f"{msg.store_host[0]}:{msg.store_host[1]}"
        ext = {"consumerGroup": group, "clientId": client_id, "msgId": msg.offset_msg_id, "topic": topic}
        response = await self._call(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        result = loads(self._json(response, "CONSUME_MESSAGE_DIRECTLY"))
        if not isinstance(result, dict):
            raise ProtocolError("CONSUME_MESSAGE_DIRECTLY: expected a ConsumeMessageDirectlyResult")
        return result

    # -- sending ----------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def producer(self, group: str = ADMIN_PRODUCER_GROUP) -> AsyncIterator[Producer]:
        """A started producer on these name servers, with this admin client's own instance name."""
        producer = Producer(
            group,
            ";".join(self.namesrv_addrs),
            instance_name=self.instance_name,
            send_msg_timeout=int(self.timeout * 1000),
            retry_times_when_send_failed=0,
        )
        await producer.start()
        try:
            yield producer
        finally:
            await producer.shutdown()

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | None = None,
        tags: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
    ) -> SendResult:
        """``sendMessage``: one message, to a queue of the producer's choice or the one named."""
        msg = Message(topic, body, tags=tags or None, keys=keys or None)
        async with self.producer() as producer:
            queue = None
            if broker_name is not None or queue_id is not None:
                queue = await self._pick_queue(producer, topic, broker_name, queue_id)
            return await producer.send(msg, queue=queue)

    async def resend_message(
        self, topic: str | None, msg_id: str, *, to_topic: str | None = None
    ) -> tuple[MessageExt, SendResult]:
        """``queryMsgById -s true``: send a stored message again, to its topic (or ``to_topic``: a
        dead letter back to the topic it first went to), with its body, tags, keys, flag and user
        properties (a new unique key: it is a new message)."""
        stored = await self.view_message(topic, msg_id)
        props = {k: v for k, v in stored.properties.items() if k not in _STORED_ONLY_PROPERTIES}
        msg = Message(to_topic or stored.topic, stored.body, tags=stored.tags or None,
                      keys=stored.keys or None, flag=stored.flag, properties=props)
        async with self.producer(RESEND_PRODUCER_GROUP) as producer:
            return stored, await producer.send(msg)

    @staticmethod
    async def _pick_queue(
        producer: Producer, topic: str, broker_name: str | None, queue_id: int | None
    ) -> MessageQueue:
        queues = await producer.fetch_publish_message_queues(topic)
        for mq in queues:
            if broker_name is not None and mq.broker_name != broker_name:
                continue
            if queue_id is None or mq.queue_id == queue_id:
                return mq
        raise InvalidArgument(
            f"topic {topic} has no writable queue {broker_name or '*'}/"
            f"{'*' if queue_id is None else queue_id}"
        )

    async def check_msg_send_rt(
        self, topic: str, amount: int = 100, size: int = 128, broker_names: Sequence[str] | None = None
    ) -> list[SendRT]:
        """``checkMsgSendRT`` / ``clusterRT``: ``amount`` sends of ``size`` bytes, one after another,
        spread over the topic's writable queues; the round trips per broker, in ms."""
        if amount <= 0 or size <= 0:
            raise InvalidArgument("amount and size must be positive")
        body = b"x" * size
        rts: dict[str, list[float]] = {}
        failed: dict[str, int] = {}
        async with self.producer() as producer:
            queues = await producer.fetch_publish_message_queues(topic)
            if broker_names is not None:
                queues = [q for q in queues if q.broker_name in broker_names]
            if not queues:
                raise InvalidArgument("the topic has no writable queue", topic=topic)
            for i in range(amount):
                mq = queues[i % len(queues)]
                started = time.perf_counter()
                try:
                    await producer.send(Message(topic, body), queue=mq)
                except (TimeoutError, RocketQError) as exc:
                    failed[mq.broker_name] = failed.get(mq.broker_name, 0) + 1
                    log.debug("checkMsgSendRT: send to %s failed: %s", mq, exc)
                    continue
                rts.setdefault(mq.broker_name, []).append((time.perf_counter() - started) * 1000.0)
        names = sorted(set(rts) | set(failed))
        return [
            SendRT(n, len(rts.get(n, ())) + failed.get(n, 0), failed.get(n, 0), tuple(rts.get(n, ())))
            for n in names
        ]
