"""What the connector asks of a RocketMQ cluster, as blocking calls for Spark's Python code.

Routes, offsets and offset commits go through the client SDK's ``MQClientAPI``; pulls through its
pull wrapper, stopping before the records are decoded (the bulk Arrow decoder reads the stored
records itself); batch sends are issued here directly on its ``RemotingClient`` because their
bodies are built in bulk, not from per-message objects.

Spark calls are synchronous, so a ``BrokerSession`` owns a private event loop running in its
own thread; blocking methods hand it a coroutine and wait for the result, every call with a
deadline. Because the loop keeps running between calls, the network work overlaps the
caller's: the next pull answers arrive while a task decodes the previous ones, and batch sends
stay in flight while it encodes the next Arrow batch (the broker is never left idle waiting
for the client).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rocketq.client.api import PULL_SYS_FLAG_SUBSCRIPTION, MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.consumer.pull_api import PullAPIWrapper, one_off_subscription
from rocketq.client.message import PullResultExt, PullStatus
from rocketq.client.security import configure_transport
from rocketq.codec.bodies import MessageQueue, SubscriptionData, TopicList, TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import SendMessageRequestHeader, UpdateConsumerOffsetRequestHeader
from rocketq.errors import RemotingError, RocketQError, TopicNotExist, for_code
from rocketq.remoting import RemotingClient, new_event_loop
from rocketq.spark.errors import SourceUnavailableError, SparkOptionError
from rocketq.spark.options import Security

log = logging.getLogger("rocketq.spark")

T = TypeVar("T")

PERM_READ = 4
PERM_WRITE = 2
MASTER_ID = 0
SEND_OK_CODES = frozenset({0, 10, 11, 12})  # SEND_OK, FLUSH_DISK/SLAVE timeouts, SLAVE_NOT_AVAILABLE


@dataclass(frozen=True, slots=True, order=True)
class QueueRef:
    """One message queue as the connector plans it: (topic, broker name, queue id) + address."""

    topic: str
    broker: str
    queue_id: int
    addr: str = ""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.topic, self.broker, self.queue_id)


@dataclass(frozen=True, slots=True)
class PullChunk:
    """Raw records of one queue, covering offsets [low, covered_to) (filtered ones omitted)."""

    bodies: tuple[bytes | bytearray | memoryview, ...]
    low: int
    covered_to: int


class BrokerSession:
    """A name-server-backed connection set with blocking methods; close() when done."""

    def __init__(self, namesrv: str, *, timeout: float = 5.0, group: str = "rocketq-spark",
                 security: Security | None = None) -> None:
        if not namesrv or not namesrv.strip():
            raise SparkOptionError("namesrv", "the name server address is required (host:port[;host:port])")
        self.namesrv = namesrv
        self.timeout = timeout
        self.group = group
        config = ClientConfig(namesrv_addr=namesrv, connect_timeout_millis=int(timeout * 1000),
                              mq_client_api_timeout=int(timeout * 1000))
        self._remoting = RemotingClient(connect_timeout=min(timeout, 3.0))
        if security is not None:
            configure_transport(self._remoting, ClientConfig(
                credentials=security.credentials, tls=security.tls, tls_ca_file=security.tls_ca_file,
                tls_verify=security.tls_verify))
        self.api = MQClientAPI(self._remoting, config)
        self.api.update_name_server_address_list(namesrv)
        self.pull_api = PullAPIWrapper(self.api, group)
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rocketq-spark-io", daemon=True)
        self._thread.start()

    # -- plumbing --------------------------------------------------------------------------------

    def submit(self, coro: Any, timeout: float | None = None) -> concurrent.futures.Future[Any]:
        """Start ``coro`` on the session's loop with a deadline; the caller collects it later."""
        limit = self.timeout * 4 if timeout is None else timeout
        return asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, limit), self._loop)

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        """Run ``coro`` on the session's loop and wait for it (never hangs a Spark task)."""
        limit = self.timeout * 4 if timeout is None else timeout
        return self.submit(coro, limit).result(limit + self.timeout)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            if self._thread.is_alive():
                self.run(self._remoting.close(), timeout=self.timeout)
        except Exception as e:  # closing must not hide the error that got us here
            log.debug("closing the broker session: %s", e)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self.timeout)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> BrokerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _namesrv_error(self, e: Exception) -> SourceUnavailableError:
        return SourceUnavailableError(f"option 'namesrv': name server {self.namesrv} is unreachable: {e}")

    # -- routes ----------------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, None when the name server does not know the topic."""
        try:
            route: TopicRouteData | None = self.run(
                self.api.get_topic_route_info_from_name_server(topic, self.timeout))
            return route
        except TopicNotExist:
            return None
        except (RemotingError, TimeoutError) as e:
            raise self._namesrv_error(e) from None

    def all_topics(self) -> list[str]:
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        try:
            response = self.run(self.api.invoke_namesrv(request, self.timeout))
        except (RemotingError, TimeoutError) as e:
            raise self._namesrv_error(e) from None
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark)
        return sorted(TopicList.from_json(response.body_bytes()).topic_list)

    def queues(self, topic: str, *, writable: bool = False) -> list[QueueRef]:
        """The topic's readable (or writable) queues on master brokers, sorted."""
        route = self.route(topic)
        if route is None:
            return []
        addrs = {b.broker_name: b.broker_addrs.get(MASTER_ID) for b in route.broker_datas}
        out: list[QueueRef] = []
        for qd in route.queue_datas:
            addr = addrs.get(qd.broker_name)
            if not addr:
                continue
            if writable:
                if qd.perm & PERM_WRITE:
                    out.extend(QueueRef(topic, qd.broker_name, q, addr) for q in range(qd.write_queue_nums))
            elif qd.perm & PERM_READ:
                out.extend(QueueRef(topic, qd.broker_name, q, addr) for q in range(qd.read_queue_nums))
        return sorted(out)

    # -- offsets ---------------------------------------------------------------------------------

    def _gather(self, refs: Sequence[QueueRef], fn: Callable[[QueueRef], Any]) -> dict[QueueRef, int]:
        async def all_of() -> list[int]:
            return list(await asyncio.gather(*(fn(r) for r in refs)))

        try:
            values = self.run(all_of())
        except (RemotingError, TimeoutError) as e:
            raise SourceUnavailableError(f"broker unreachable while reading offsets: {e}") from None
        return dict(zip(refs, values, strict=True))

    def max_offsets(self, refs: Sequence[QueueRef]) -> dict[QueueRef, int]:
        return self._gather(refs, lambda r: self.api.get_max_offset(
            r.addr, MessageQueue(r.topic, r.broker, r.queue_id), self.timeout))

    def min_offsets(self, refs: Sequence[QueueRef]) -> dict[QueueRef, int]:
        return self._gather(refs, lambda r: self.api.get_min_offset(
            r.addr, MessageQueue(r.topic, r.broker, r.queue_id), self.timeout))

    def offsets_for_time(self, refs: Sequence[QueueRef], timestamp_ms: int) -> dict[QueueRef, int]:
        """First offset stored at or after ``timestamp_ms`` per queue: SEARCH_OFFSET_BY_TIMESTAMP,
        its answer checked against the store times around it (brokers differ)."""
        return self._gather(refs, lambda r: self.pull_api.offset_at_or_after(
            MessageQueue(r.topic, r.broker, r.queue_id), r.addr, timestamp_ms, self.timeout))

    def commit_offsets(self, group: str, offsets: dict[QueueRef, int]) -> None:
        """Store ``offsets`` (next message to consume) for ``group`` (UPDATE_CONSUMER_OFFSET)."""
        async def all_of() -> None:
            await asyncio.gather(*(
                self.api.update_consumer_offset(
                    r.addr, UpdateConsumerOffsetRequestHeader(group, r.topic, r.queue_id, off), self.timeout)
                for r, off in offsets.items()
            ))

        self.run(all_of())

    # -- pull ------------------------------------------------------------------------------------

    async def _pull(self, mq: MessageQueue, addr: str, offset: int, max_nums: int,
                    sub: SubscriptionData) -> PullResultExt:
        _, answer = await self.pull_api.pull_kernel(mq, sub, offset, max_nums, PULL_SYS_FLAG_SUBSCRIPTION,
                                                    self.timeout, addr=addr)
        return answer

    def pull_range(
        self,
        ref: QueueRef,
        start: int,
        end: int,
        *,
        subscription: str = "*",
        chunk_bytes: int = 8 << 20,
        window: int = 8,
        batch: int = 256,
        on_loss: Callable[[QueueRef, int, int], None] | None = None,
    ) -> Iterator[PullChunk]:
        """Raw records of ``ref`` in [start, end), about ``chunk_bytes`` per chunk, in order.

        Without a tag filter, ``window`` pulls are in flight at consecutive offsets; the broker
        caps each answer (maxTransferCountOnMessageInMemory), so the step adapts to what the
        first answers carry and gaps are re-requested. With a filter, pulls are sequential
        because the broker's nextBeginOffset is the only safe next offset.
        """
        state = _PullState(self, ref, start, end, subscription, window if subscription == "*" else 1, batch,
                           on_loss)
        def next_fill() -> concurrent.futures.Future[PullChunk] | None:
            return None if state.done else self.submit(state.fill(chunk_bytes), self.timeout * 6)

        ahead = next_fill()
        try:
            while ahead is not None:
                chunk = ahead.result(self.timeout * 7)
                # Ask for the next chunk before handing this one over: it arrives while the
                # caller decodes. One fill at a time, and state is read only between fills.
                ahead = next_fill()
                if chunk.bodies or chunk.covered_to > chunk.low:
                    yield chunk
        finally:
            if ahead is not None:
                ahead.cancel()
            if not self._loop.is_closed():
                self._loop.call_soon_threadsafe(state.cancel)

    # -- send ------------------------------------------------------------------------------------

    def sender(self, producer_group: str, window: int = 8) -> SendPipeline:
        return SendPipeline(self, producer_group, window)

    async def _send_one(self, ref: QueueRef, body: bytes | memoryview, count: int, group: str,
                        properties: str | None = None) -> int:
        """A SEND_BATCH_MESSAGE of ``count`` encoded messages, or with ``properties`` one message
        (SEND_MESSAGE_V2): what a batch cannot carry, such as a delay level, goes alone."""
        single = properties is not None
        header = SendMessageRequestHeader(
            producer_group=group, topic=ref.topic, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=ref.queue_id, sys_flag=0, born_timestamp=_now_ms(), flag=0, properties=properties or "",
            reconsume_times=0, unit_mode=False, batch=not single, broker_name=ref.broker,
        )
        code = RequestCode.SEND_MESSAGE_V2 if single else RequestCode.SEND_BATCH_MESSAGE
        request = RemotingCommand.request(code, header.to_ext_v2(), body)
        response = await self._remoting.invoke(ref.addr, request, self.timeout * 2)
        if response.code not in SEND_OK_CODES:
            raise for_code(response.code, response.remark, broker_addr=ref.addr, topic=ref.topic)
        return count


SendItem = tuple[QueueRef, bytes | memoryview, int, str | None]


class SendPipeline:
    """SEND_BATCH_MESSAGE requests with up to ``window`` in flight across ``submit`` calls; the
    sends carry on while the caller builds the next ones. ``flush`` waits for all and returns the
    number of messages acknowledged.

    A failed send raises (at the next submit or at flush): delivery is at-least-once, the Spark
    task is retried and may resend batches that were already stored.
    """

    def __init__(self, session: BrokerSession, producer_group: str, window: int) -> None:
        self._session = session
        self._group = producer_group
        self._window = max(1, window)
        self._tasks: set[asyncio.Task[int]] = set()
        self.sent = 0
        self.requests = 0

    def submit(self, requests: Iterable[SendItem]) -> None:
        """Queue the sends; returns once all are in flight (blocks only while the window is full).
        An item is (queue, batch body, message count, None) or (queue, body, 1, properties)."""
        items = list(requests)
        if items:
            self._call(self._submit(items))

    def flush(self) -> int:
        self._call(self._drain())
        return self.sent

    def cancel(self) -> None:
        tasks, self._tasks = self._tasks, set()
        loop = self._session._loop
        if not loop.is_closed():
            for t in tasks:
                loop.call_soon_threadsafe(t.cancel)

    def _call(self, coro: Any) -> None:
        try:
            self._session.run(coro, timeout=self._session.timeout * (4 + 2 * self._window))
        except (RemotingError, TimeoutError) as e:
            self.cancel()
            raise SourceUnavailableError(f"send failed: {e}") from None

    async def _submit(self, items: list[SendItem]) -> None:
        for ref, body, count, properties in items:
            while len(self._tasks) >= self._window:
                done, self._tasks = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
                self._collect(done)
            send = self._session._send_one(ref, body, count, self._group, properties)
            self._tasks.add(asyncio.ensure_future(send))
            self.requests += 1

    async def _drain(self) -> None:
        tasks, self._tasks = self._tasks, set()
        if tasks:
            done, _ = await asyncio.wait(tasks)
            self._collect(done)

    def _collect(self, done: set[asyncio.Task[int]]) -> None:
        for t in done:
            self.sent += t.result()


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


class _PullState:
    """The in-flight pulls of one queue range (see ``BrokerSession.pull_range``)."""

    def __init__(self, session: BrokerSession, ref: QueueRef, start: int, end: int, subscription: str,
                 window: int, batch: int, on_loss: Callable[[QueueRef, int, int], None] | None) -> None:
        self.s = session
        self.ref = ref
        self.mq = MessageQueue(ref.topic, ref.broker, ref.queue_id)
        self.end = end
        self.sub = one_off_subscription(ref.topic, subscription)
        self.window = window
        self.step = batch
        self.step_known = window == 1
        self.on_loss = on_loss
        self.cursor = start
        self.next_issue = start
        self.pending: deque[tuple[int, int, asyncio.Task[PullResultExt]]] = deque()
        self.done = start >= end

    def _issue(self, offset: int, count: int, front: bool = False) -> None:
        task = asyncio.ensure_future(self.s._pull(self.mq, self.ref.addr, offset, count, self.sub))
        if front:
            self.pending.appendleft((offset, count, task))
        else:
            self.pending.append((offset, count, task))

    async def fill(self, chunk_bytes: int) -> PullChunk:
        bodies: list[bytes | bytearray | memoryview] = []
        size = 0
        low = self.cursor
        while not self.done and size < chunk_bytes:
            limit = self.window if self.step_known else 1
            while len(self.pending) < limit and self.next_issue < self.end:
                n = min(self.step, self.end - self.next_issue)
                self._issue(self.next_issue, n)
                self.next_issue += n
            if not self.pending:
                self.done = self.cursor >= self.end
                if not self.done:  # a gap was covered by a skip: restart issuing from the cursor
                    self.next_issue = self.cursor
                continue
            offset, count, task = self.pending.popleft()
            try:
                answer: PullResultExt | None = await task
            except TopicNotExist:
                answer = None
            if offset + count <= self.cursor:
                continue  # already skipped past (data loss handling)
            found = False
            if answer is None:  # the topic is gone: the rest of the plan is lost
                if self.on_loss is not None:
                    self.on_loss(self.ref, offset, self.end)
                covered = self.end
            elif answer.status is PullStatus.FOUND:
                found = True
                nxt = answer.next_begin_offset
                body = answer.message_binary
                bodies.append(body)
                size += len(body)
                if not self.step_known:
                    got = nxt - offset
                    if 0 < got < count:
                        self.step = got
                    self.step_known = True
                covered = nxt
            elif answer.status is PullStatus.NO_MATCHED_MSG:
                covered = answer.next_begin_offset
            elif answer.status is PullStatus.NO_NEW_MSG:
                covered = self.end  # nothing at this offset yet: the queue ends before the plan
            else:  # OFFSET_ILLEGAL
                nxt = answer.next_begin_offset
                if nxt > offset:
                    if self.on_loss is not None:
                        self.on_loss(self.ref, offset, nxt)
                    covered = nxt
                else:
                    covered = self.end
            if covered <= offset:
                covered = offset + 1 if found else self.end
            self.cursor = max(self.cursor, min(covered, self.end))
            if self.cursor >= self.end:
                self.done = True
                break
            if self.cursor < offset + count:
                # The broker answered fewer than asked: re-request the rest before what follows.
                self._issue(self.cursor, offset + count - self.cursor, front=True)
            elif self.cursor > self.next_issue:
                self.next_issue = self.cursor
        return PullChunk(tuple(bodies), low, self.cursor)

    def cancel(self) -> None:
        for _, _, task in self.pending:
            task.cancel()
        self.pending.clear()


__all__ = ["BrokerSession", "PullChunk", "QueueRef", "RocketQError", "SendPipeline"]
