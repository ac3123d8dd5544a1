"""BrokerController: builds the broker's parts, registers every processor in one place, runs the
background schedule and talks to the name servers.

Start order (RocketMQ's): bind the ports first (the store host in every offset msgId is the bound
`brokerIP1:listenPort`), answer SERVICE_NOT_AVAILABLE while the store loads and recovers in a
worker thread, then register the real processors, start the store's services and register with
every name server at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocketq.broker.client_manager import ConsumerManager, ProducerManager
from rocketq.broker.config import BrokerConfig
from rocketq.broker.ha import Replication
from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.outer_api import BrokerOuterAPI
from rocketq.broker.pop import PopService
from rocketq.broker.processors import BrokerProcessors, register_all
from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.broker.schedule import ScheduleMessageService
from rocketq.broker.stats import BrokerStats
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.timer import TIMER_TOPIC, TimerService
from rocketq.broker.topic_manager import PERM_READ, PERM_WRITE, TopicConfigManager
from rocketq.broker.transaction import TransactionalMessageCheckService, TransactionalMessageService
from rocketq.codec.bodies import DataVersion
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import UniqIdGenerator
from rocketq.codec.topics import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.config import ConfigChange, RuntimeConfig, check_updatable
from rocketq.errors import ConfigError, InvalidParameter, NoPermission
from rocketq.remoting import RemotingServer
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store import MessageStore
from rocketq.store.config import MessageStoreConfig

log = logging.getLogger("rocketq.broker")

BROKER_VERSION_DESC = "V4_9_4"
CLIENT_CHANNEL_SCAN_INTERVAL = 10.0
STATS_SAMPLE_INTERVAL = 1.0


class BrokerController:
    """One broker: transport, store, managers, processors and timers."""

    def __init__(self, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                 server_config: RemotingServerConfig, java_config: JavaOnlyConfig | None = None) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.server_config = server_config
        # Java's keys rocketq does not act on: reported by GET_BROKER_CONFIG, refused by updates.
        self.java_config = java_config if java_config is not None else JavaOnlyConfig()
        self.runtime_config = RuntimeConfig([broker_config, store_config, server_config, self.java_config],
                                            self._apply_config_change)
        self.config_data_version = DataVersion()
        self.listen_port = server_config.listen_port
        self.vip_port = 0
        self.server = RemotingServer.from_config(server_config, self._ports(server_config.listen_port))
        self.acl = self._build_acl()
        self.store: MessageStore = None  # type: ignore[assignment]  # built in start(): needs the port
        self.stats = BrokerStats()
        self.uniq_id_generator = UniqIdGenerator(ip=broker_config.broker_ip1)
        self.topic_manager = TopicConfigManager(self)
        self.offset_manager = ConsumerOffsetManager(self)
        self.subscription_manager = SubscriptionGroupManager(self)
        self.consumer_manager = ConsumerManager(self)
        self.producer_manager = ProducerManager(self)
        self.rebalance_lock_manager = RebalanceLockManager()
        self.hold_service = PullRequestHoldService(self)
        self.outer_api = BrokerOuterAPI(self)
        self.schedule_service: ScheduleMessageService | None = None
        self.transaction_service = TransactionalMessageService(self)
        self.transaction_check_service = TransactionalMessageCheckService(self, self.transaction_service)
        self.replication: Replication | None = None  # built with the store (broker/ha/)
        self.pop_service: PopService | None = None  # built once the store is ready
        self.timer_service: TimerService | None = None  # timer messages, when timerWheelEnable
        self.replicas_manager: Any = None  # controller mode's ReplicasManager (broker/ha/controller_mode.py)
        self.metrics: Any = None  # BrokerMetrics while metricsPort >= 0
        self.grpc: Any = None  # GrpcServer (broker/grpc/) while grpcPort >= 0 on a master
        self.processors: BrokerProcessors | None = None  # built once the store is ready
        self.boot_timestamp = int(time.time() * 1000)
        self._ready = False
        self._started = False
        self._tasks: list[asyncio.Task[None]] = []
        self._register_task: asyncio.Task[None] | None = None
        self._register_again = False
        self.topic_manager.on_change = self._on_topic_change

    def _build_acl(self) -> Any:
        """aclEnable: every request is checked before its processor (and this broker signs what it
        sends the name servers); off, nothing of the ACL is built or called."""
        cfg = self.broker_config
        if not (cfg.acl_enable or cfg.authentication_enabled or cfg.authorization_enabled):
            return None
        from rocketq.broker.acl import AclService, acl_file_path

        data_dir = Path(self.store_config.store_path_root_dir).expanduser().absolute().parent
        acl = AclService(acl_file_path(cfg.plain_acl_file, data_dir), v1=cfg.acl_enable,
                         authentication=cfg.authentication_enabled, authorization=cfg.authorization_enabled,
                         init_user=cfg.init_authentication_user)
        self.server.set_request_validator(acl.validate)
        return acl

    @staticmethod
    def _ports(listen_port: int) -> list[int]:
        # The VIP channel is listenPort - 2 (10909); with port 0 both pick free ports.
        if listen_port == 0:
            return [0, 0]
        return [listen_port, listen_port - 2]

    # -- identity ------------------------------------------------------------------------------

    @property
    def broker_name(self) -> str:
        return self.broker_config.broker_name

    @property
    def cluster_name(self) -> str:
        return self.broker_config.broker_cluster_name

    @property
    def address(self) -> str:
        return f"{self.broker_config.broker_ip1}:{self.listen_port}"

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.broker_config.broker_ip1, self.listen_port)

    @property
    def configs(self) -> list[Any]:
        return [self.broker_config, self.store_config, self.server_config, self.java_config]

    @property
    def is_ready(self) -> bool:
        return self._ready

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of the Prometheus endpoint, or None when metricsPort is off."""
        return self.metrics.address if self.metrics is not None else None

    @property
    def grpc_address(self) -> str | None:
        """``host:port`` of the RocketMQ 5 gRPC endpoint, or None when grpcPort is off."""
        return self.grpc.address if self.grpc is not None else None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        server = self.server
        server.register_default_processor(self._not_ready)
        server.on_channel_close(self._on_channel_close)
        await server.start()
        ports = server.bound_ports
        self.listen_port, self.vip_port = ports[0], ports[1]
        log.info("broker %s listening on %s (vip port %d)", self.broker_name, self.address, self.vip_port)
        try:
            await self._start_services()
        except BaseException:
            log.exception("the broker %s failed to start", self.broker_name)
            await self._abort_start()
            raise
        self._ready = True
        log.info("The broker[%s, %s] boot success. serializeType=JSON and name server is %s",
                 self.broker_name, self.address, self.broker_config.namesrv_addr)

    async def _start_services(self) -> None:
        self.topic_manager.load()
        self.offset_manager.load()
        self.subscription_manager.load()
        self.store = MessageStore(self.store_config, store_host=self.store_host,
                                  on_arrival=self._on_message_arriving)
        if not await asyncio.to_thread(self.store.load):
            root = self.store_config.store_path_root_dir
            raise RuntimeError(f"the message store under {root} failed to load")
        await self.store.start()
        self._build_schedule_service()
        controller_mode = self.broker_config.enable_controller_mode
        if self.store_config.timer_wheel_enable and (controller_mode or not self.broker_config.is_slave):
            # The master alone delivers timers: a slave keeps the master's timer topic as data.
            # In controller mode the role comes later: the wheel files timers from the start and
            # delivers once this broker is master (ReplicasManager).
            self.timer_service = TimerService(self)
            self.timer_service.delivering = not controller_mode
            await asyncio.to_thread(self.timer_service.load)
        self.replication = Replication(self)
        await self.replication.start()
        if controller_mode or not self.broker_config.is_slave:
            # pop writes checkpoints and revives: the master's work (controller mode: it starts at
            # each promotion; built now so that its processors are registered)
            self.pop_service = PopService(self)
            if not controller_mode:
                await self.pop_service.start()
        if self.broker_config.enable_controller_mode:
            from rocketq.broker.ha.controller_mode import ReplicasManager

            self.replicas_manager = ReplicasManager(self)
        self.register_processors()
        self.server.register_default_processor(self._not_supported)
        # in controller mode the role comes later (ReplicasManager starts what a master runs)
        decided = not self.broker_config.is_slave and not self.broker_config.enable_controller_mode
        if self.schedule_service is not None and decided:
            await self.schedule_service.start()  # a slave only keeps the master's progress
        if decided:
            await self.transaction_check_service.start()  # the master alone checks half messages
        if self.timer_service is not None:
            await self.timer_service.start()
        if self.replicas_manager is not None:
            await self.replicas_manager.start()
        self.stats.sample()
        self._spawn(self._every(STATS_SAMPLE_INTERVAL, self.stats.sample))
        self._spawn(self._every(self.broker_config.flush_consumer_offset_interval / 1000,
                                self.offset_manager.persist_async))
        self._spawn(self._every(CLIENT_CHANNEL_SCAN_INTERVAL, self._scan_client_channels))
        if self.acl is not None:
            from rocketq.broker.acl import WATCH_INTERVAL

            self._spawn(self._every(WATCH_INTERVAL, self.acl.reload_if_changed))
        await self._start_metrics()
        await self._start_grpc()
        await self.register_broker_all()
        self._spawn(self._every(self.broker_config.register_period_ms / 1000, self.register_broker_all))

    async def _start_metrics(self) -> None:
        port = self.broker_config.metrics_port
        if port < 0:
            return
        # imported here: prometheus_client is only needed by brokers that export metrics
        from rocketq.broker.metrics import BrokerMetrics

        self.metrics = BrokerMetrics(self)
        await self.metrics.start(self.server_config.bind_address, port)
        log.info("broker %s metrics on http://%s/metrics", self.broker_name, self.metrics.address)

    async def _start_grpc(self) -> None:
        port = self.broker_config.grpc_port
        if port < 0 or self.broker_config.is_slave:
            return
        from rocketq.broker.grpc import GrpcServer
        from rocketq.broker.grpc.server import APACHE_PROXY_PORT

        if port == APACHE_PROXY_PORT and self.server_config.listen_port == 0:
            port = 0  # a broker on a free port takes a free gRPC port too (tests, several brokers)
        self.grpc = GrpcServer(self)
        await self.grpc.start(self.server_config.bind_address, port, self.broker_config.broker_ip1)

    async def _stop_grpc(self) -> None:
        grpc, self.grpc = self.grpc, None
        if grpc is not None:
            with contextlib.suppress(Exception):
                await grpc.stop()

    async def _stop_metrics(self) -> None:
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            with contextlib.suppress(Exception):
                await metrics.stop()

    async def _abort_start(self) -> None:
        self._started = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._stop_metrics()
        await self._stop_grpc()
        await self.server.stop(0)
        await self.transaction_check_service.shutdown()
        if self.schedule_service is not None:
            await self.schedule_service.shutdown()
        if self.replicas_manager is not None:
            await self.replicas_manager.shutdown()
        if self.replication is not None:
            await self.replication.shutdown()
        if self.pop_service is not None:
            await self.pop_service.shutdown()
        timer, self.timer_service = self.timer_service, None
        if timer is not None:
            await timer.shutdown()
        store = self.store
        if store is not None:
            with contextlib.suppress(Exception):
                await store.shutdown()
            self.store = None  # type: ignore[assignment]
        await self.outer_api.shutdown()

    def _build_schedule_service(self) -> None:
        self.schedule_service = ScheduleMessageService(self)
        self.schedule_service.load()

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        self._ready = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._register_task is not None:
            self._register_task.cancel()
            await asyncio.gather(self._register_task, return_exceptions=True)
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.outer_api.unregister_broker_all()
        await self._stop_metrics()
        await self._stop_grpc()
        await self.server.stop()
        self.hold_service.shutdown()
        await self.transaction_check_service.shutdown()
        if self.schedule_service is not None:
            await self.schedule_service.shutdown()
        if self.replicas_manager is not None:
            await self.replicas_manager.shutdown()
        if self.replication is not None:
            await self.replication.shutdown()
        if self.pop_service is not None:
            await self.pop_service.shutdown()
        timer, self.timer_service = self.timer_service, None
        if timer is not None:
            await timer.shutdown()
        for manager in (self.topic_manager, self.offset_manager, self.subscription_manager):
            try:
                await manager.flush()
            except Exception:  # logged by its writer (a full disk, say): the store must still close
                pass
        if self.store is not None:
            await self.store.shutdown()
        await self.outer_api.shutdown()
        log.info("broker %s shut down", self.broker_name)

    # -- processors ----------------------------------------------------------------------------

    def register_processors(self) -> None:
        """Every request code the broker serves, in one place (RocketMQ's registerProcessor)."""
        register: Callable[[int, Any], None] = self.server.register_processor
        if self.broker_config.compatibility_mode == "4.9":
            from rocketq.broker.compat import strict_4_9_register

            register = strict_4_9_register(register)
            log.warning("compatibilityMode=4.9: serving only what RocketMQ 4.9.8 serves (a test mode)")
        self.processors = register_all(self, register)

    def _not_ready(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                     "the broker is starting: the message store is not ready yet")

    def _not_supported(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                     f" request type {request.code} not supported")

    def _on_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None) -> None:
        """The store's arrival callback: wake parked long polls, and the delay service when a
        delayed message came in (it sleeps until the next due one otherwise)."""
        if topic == RMQ_SYS_SCHEDULE_TOPIC and self.schedule_service is not None:
            self.schedule_service.wakeup()
        elif topic == TIMER_TOPIC and self.timer_service is not None:
            self.timer_service.wakeup()
        hold = self.hold_service
        if (topic, queue_id) in hold.pull_request_table:  # mostly not: spare the call per message
            hold.notify_message_arriving(topic, queue_id, max_offset, tags_code)
        if self.replication is not None:
            self.replication.notify_appended()
        if self.pop_service is not None:
            self.pop_service.notify_message_arriving(topic, queue_id)

    def _on_channel_close(self, channel: Any) -> None:
        """A client connection closed: forget it everywhere at once (ClientHousekeepingService)."""
        self.producer_manager.do_channel_close_event(channel)
        self.consumer_manager.do_channel_close_event(channel)
        self.hold_service.do_channel_close_event(channel)
        if self.pop_service is not None:
            self.pop_service.polling.do_channel_close_event(channel)

    # -- timers ----------------------------------------------------------------------------------

    def _spawn(self, coro: Awaitable[None]) -> None:
        self._tasks.append(asyncio.ensure_future(coro))

    async def _every(self, period: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduled task %s failed", getattr(fn, "__qualname__", fn))

    def _scan_client_channels(self) -> None:
        self.consumer_manager.scan_not_active_channel()
        self.producer_manager.scan_not_active_channel()

    # -- name servers ----------------------------------------------------------------------------

    def _on_topic_change(self) -> None:
        """Re-register at once after a topic change; changes during a registration coalesce."""
        if not self._ready:
            return
        task = self._register_task
        if task is not None and not task.done():
            self._register_again = True
            return
        self._register_task = asyncio.get_running_loop().create_task(self._register_changes())

    async def _register_changes(self) -> None:
        self._register_again = True
        while self._register_again:
            self._register_again = False
            await self.register_broker_all()

    async def register_broker_all(self) -> None:
        if self.replicas_manager is not None and not self.replicas_manager.role_known:
            return  # controller mode: not in any route before the controller named the role
        wrapper = self.topic_manager.serialize_wrapper()
        perm = self.broker_config.broker_permission
        if not (perm & PERM_WRITE and perm & PERM_READ):
            # A read-only (or write-only) broker advertises every topic with its own limits.
            wrapper = replace(wrapper, topic_config_table={
                name: replace(cfg, perm=cfg.perm & perm) for name, cfg in wrapper.topic_config_table.items()})
        results = await self.outer_api.register_broker_all(wrapper)
        if self.replication is not None:
            self.replication.on_registered(results)
        for result in results:
            if result.order_topics:
                self.topic_manager.update_order_topic_config(result.order_topics)

    # -- admin support -------------------------------------------------------------------------

    def update_configs(self, updates: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: runtime-updatable keys only, all or nothing, applied through
        :meth:`_apply_config_change`. Any other key (a path or command, restart-required, not
        honoured, unknown) is a permission matter, as RocketMQ's configBlackList; a bad value is not."""
        for key in updates:
            try:
                check_updatable(key, self.runtime_config.classes)
            except ConfigError as exc:
                raise NoPermission(f"Can not update config: {exc}") from None
        try:
            self.runtime_config.update(updates, origin="UPDATE_BROKER_CONFIG")
        except ConfigError as exc:
            raise InvalidParameter(str(exc)) from None
        log.info("broker config updated: %s", sorted(updates))

    def _apply_config_change(self, change: ConfigChange) -> None:
        """The one change listener: every runtime update enters the broker here. Components that
        read ``broker_config`` / ``store_config`` at each use see the new objects; those that cache
        a value (the store, the send processor) are handed it."""
        self.broker_config = change.new(BrokerConfig)
        self.store_config = change.new(MessageStoreConfig)
        self.server_config = change.new(RemotingServerConfig)
        if self.store is not None:
            self.store.apply_config(self.store_config)
        if self.processors is not None:
            self.processors.send.refresh_config()
        self.config_data_version = self.config_data_version.next_version()
        if change.touches(BrokerConfig, "transaction_check_interval"):
            self.transaction_check_service.wakeup()  # its current wait used the old interval
        if change.touches(BrokerConfig, "broker_permission"):
            self.topic_manager.next_version()
        if change.touches(BrokerConfig):
            # brokerPermission and namesrvAddr travel with the registration: re-register now.
            self._on_topic_change()

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the KVTable keys `mqadmin clusterList/brokerStatus` read."""
        store_info: dict[str, str] = {}
        info_fn = getattr(self.store, "runtime_info", None)
        if info_fn is not None:
            store_info = {str(k): str(v) for k, v in info_fn().items()}
        s = self.stats
        s.sample()
        get_tps = s.tps_text(2)
        info = {
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": "401",
            "bootTimestamp": str(self.boot_timestamp),
            "putTps": s.tps_text(1),
            "getTransferredTps": get_tps,
            "getTransferedTps": get_tps,  # the misspelt key older mqadmin reads
            "getTotalTps": get_tps,
            "getFoundTps": get_tps,
            "getMissTps": "0.00 0.00 0.00",
            "msgPutTotalTodayNow": str(s.put_total),
            "msgGetTotalTodayNow": str(s.get_total),
            "msgPutTotalTodayMorning": str(s.put_today_morning),
            "msgGetTotalTodayMorning": str(s.get_today_morning),
            "msgPutTotalYesterdayMorning": str(s.put_yesterday_morning),
            "msgGetTotalYesterdayMorning": str(s.get_yesterday_morning),
            "putMessageTimesTotal": str(s.put_total),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": str(self.hold_service.held_count()),
            "pullThreadPoolQueueCapacity": "100000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "pageCacheLockTimeMills": "0",
            "dispatchBehindBytes": "0",
            "earliestMessageTimeStamp": "0",
            "startAcceptSendRequestTimeStamp": "0",
            "brokerActive": "true",
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
            "commitLogDiskRatio": "0.0",
            "totalMemKBytes": str(_total_mem_kbytes()),
        }
        info.update(store_info)
        if self.timer_service is not None:
            info.update(self.timer_service.runtime_info())
        if self.replication is not None:  # rocketq's keys: clusterList shows role and lag from them
            info["brokerRole"] = self.broker_config.broker_role
            info["haReplicationLagBytes"] = str(self.replication.lag_bytes())
        if self.grpc_address:  # rocketq's key: the other brokers' gRPC routes name this endpoint
            info["grpcAddress"] = self.grpc_address
        return info


def _total_mem_kbytes() -> int:
    """The machine's physical memory (what Java's runtime info reports; exportMetrics reads it)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    except (ValueError, OSError, AttributeError):
        return 0
