"""Test support: a real name server + broker inside the test process, and a pytest fixture for it.

Installed as a pytest plugin (entry point ``pytest11``), so any project that has rocketq installed
gets the ``rocketq_cluster`` fixture without a conftest::

    from rocketq import Message, Producer

    def test_orders(rocketq_cluster):
        rocketq_cluster.create_topic("Orders", queues=4)
        with Producer("pg", namesrv_addr=rocketq_cluster.namesrv_addr) as p:
            assert p.send(Message("Orders", b"hi")).status.name == "SEND_OK"

The servers bind 127.0.0.1 on free ports, keep their files under the test's ``tmp_path`` and run on
an event loop of their own in a background thread, so sync tests, async tests and any client API
can talk to them. :func:`start_cluster` is the same thing as a context manager, for other fixture
scopes (``scope="module"`` saves the second or so a cluster takes to start).

Nothing heavy is imported until a cluster starts: loading the plugin costs a test run nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from rocketq.admin import SyncAdminClient
    from rocketq.codec.bodies import TopicRouteData

__all__ = ["RocketQCluster", "rocketq_cluster", "start_cluster"]

_T = TypeVar("_T")

# Small files: a test writes kilobytes, and RocketMQ's 1 GiB segments and 400 MiB index files
# would cost the disk (and the page cache) for nothing.
SMALL_STORE: Mapping[str, Any] = {
    "mapped_file_size_commit_log": 4 * 1024 * 1024,
    "mapped_file_size_consume_queue": 1000 * 20,
    "max_hash_slot_num": 1000,
    "max_index_num": 4000,
}
START_TIMEOUT = 30.0
ROUTE_TIMEOUT = 10.0


class _LoopThread:
    """An event loop running in a daemon thread; coroutines are submitted from any other thread."""

    def __init__(self) -> None:
        from rocketq.remoting.loop import new_event_loop

        self.loop = new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(ready,), name="rocketq-test-cluster", daemon=True
        )
        self.thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("RocketQCluster.run() called from the cluster's own loop thread")
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        loop = self.loop
        if loop.is_closed():
            return

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.submit(drain()).result(10.0)
        loop.call_soon_threadsafe(loop.stop)
        self.thread.join(10.0)
        if not self.thread.is_alive():
            loop.close()


@dataclass(slots=True)
class RocketQCluster:
    """A running in-process name server + broker (see the module docs)."""

    namesrv_addr: str
    broker_addr: str
    broker_name: str
    cluster_name: str
    data_dir: Path
    namesrv: Any = field(repr=False)
    broker: Any = field(repr=False)
    _loop: _LoopThread = field(repr=False)
    _admin: SyncAdminClient | None = field(default=None, repr=False)

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float | None = START_TIMEOUT) -> _T:
        """Run a coroutine on the servers' event loop (e.g. to inspect the broker) and return its result."""
        return self._loop.run(coro, timeout)

    def create_topic(
        self, topic: str, queues: int = 4, *, perm: int = 6, order: bool = False, wait: bool = True
    ) -> None:
        """Create (or update) ``topic`` on the broker; by default wait until the name server routes it."""
        from rocketq.codec.bodies import TopicConfig

        config = TopicConfig(topic, queues, queues, perm, order=order)

        async def create() -> None:
            self.broker.topic_manager.update_topic_config(config)

        self.run(create())
        if wait:
            self.wait_for_route(
                topic,
                lambda route: any(q.write_queue_nums == queues and q.perm == perm for q in route.queue_datas),
            )

    def wait_for_route(
        self,
        topic: str,
        ready: Callable[[TopicRouteData], bool] | None = None,
        timeout: float = ROUTE_TIMEOUT,
    ) -> TopicRouteData:
        """Block until the name server has a route for ``topic`` (accepted by ``ready(route)``)."""
        routes = self.namesrv.route_info_manager

        async def route() -> TopicRouteData | None:
            found: TopicRouteData | None = routes.pickup_topic_route_data(topic)
            return found

        deadline = time.monotonic() + timeout
        while True:
            found = self.run(route())
            if found is not None and (ready is None or ready(found)):
                return found
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the name server has no route for {topic} after {timeout} s")
            time.sleep(0.02)

    def admin(self) -> SyncAdminClient:
        """A started blocking admin client for this cluster (closed with the cluster)."""
        if self._admin is None:
            from rocketq.admin import SyncAdminClient

            self._admin = SyncAdminClient(self.namesrv_addr)
            self._admin.start()
        return self._admin

    def stop(self) -> None:
        """Shut the broker (it unregisters and flushes) and then the name server down."""
        admin, self._admin = self._admin, None
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.shutdown()
        if self._loop.loop.is_closed():
            return

        async def shutdown() -> None:
            try:
                await self.broker.shutdown()
            finally:
                await self.namesrv.shutdown()

        try:
            self.run(shutdown(), timeout=60.0)
        finally:
            self._loop.close()


@contextlib.contextmanager
def start_cluster(
    data_dir: Path | str,
    *,
    broker_name: str = "broker-a",
    cluster_name: str = "DefaultCluster",
    broker_config: Mapping[str, Any] | None = None,
    store_config: Mapping[str, Any] | None = None,
) -> Iterator[RocketQCluster]:
    """Start a name server and a broker under ``data_dir``; stop both on exit.

    ``broker_config`` / ``store_config`` take BrokerConfig / MessageStoreConfig field names
    (snake_case), e.g. ``broker_config={"auto_create_topic_enable": False}``.
    """
    from rocketq.broker.config import BrokerConfig
    from rocketq.broker.controller import BrokerController
    from rocketq.namesrv.config import NamesrvConfig
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig

    root = Path(data_dir)
    (root / "namesrv").mkdir(parents=True, exist_ok=True)
    ns_config = NamesrvConfig(
        listen_port=0,
        kv_config_path=str(root / "namesrv" / "kvConfig.json"),
        config_store_path=str(root / "namesrv" / "namesrv.properties"),
    )
    loop = _LoopThread()
    namesrv: Any = None
    broker: Any = None

    async def start() -> None:
        nonlocal namesrv, broker
        namesrv = NamesrvController(ns_config, RemotingServerConfig(listen_port=0))
        await namesrv.start()
        bc = BrokerConfig(
            broker_name=broker_name,
            broker_cluster_name=cluster_name,
            broker_ip1="127.0.0.1",
            namesrv_addr=namesrv.address,
            **dict(broker_config or {}),
        )
        store = {**SMALL_STORE, **(store_config or {})}
        sc = MessageStoreConfig(store_path_root_dir=str(root / "store"), **store)
        broker = BrokerController(bc, sc, RemotingServerConfig(listen_port=0))
        try:
            await broker.start()
        except BaseException:
            await namesrv.shutdown()
            raise

    try:
        loop.run(start(), START_TIMEOUT)
    except BaseException:
        loop.close()
        raise
    cluster = RocketQCluster(
        namesrv.address, broker.address, broker_name, cluster_name, root, namesrv, broker, loop
    )
    try:
        cluster.wait_for_route(broker_name)  # registered: clients can route from now on
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def rocketq_cluster(tmp_path: Path) -> Iterator[RocketQCluster]:
    """A fresh in-process name server + broker for one test (see :mod:`rocketq.testing`)."""
    with start_cluster(tmp_path / "rocketq") as cluster:
        yield cluster
