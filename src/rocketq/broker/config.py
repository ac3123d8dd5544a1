"""BrokerConfig: the broker's own knobs, RocketMQ's names and defaults.

The listen port is in RemotingServerConfig and the store's knobs in MessageStoreConfig, as in
RocketMQ. A runtime-updatable key is read from ``BrokerController.broker_config`` at each use, or
re-cached by the controller's one change listener (``BrokerController._apply_config_change``).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Literal

from rocketq.config.fields import check_port, invalid, not_honoured, restart_required, runtime_updatable

__all__ = ["BrokerConfig"]

_IDENTITY = "the broker's identity in routes, message ids and registrations"
_AT_START = "the template topic is created at start"
_TIMER = "its timer starts with the broker"
_POP_AT_START = "the pop service reads it when the broker starts"
_ACL = "the ACL is set up at start (the file itself is reloaded when it changes)"


def _default_broker_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """RocketMQ ``BrokerConfig``: the fields rocketq honours, and those a stock broker.conf sets that
    rocketq does not honour yet (declared ``not_honoured``, so ``rocketq up -p`` can say so)."""

    broker_name: str = restart_required(factory=_default_broker_name, why=_IDENTITY)
    broker_cluster_name: str = restart_required("DefaultCluster", why=_IDENTITY)
    broker_id: int = restart_required(0, why=_IDENTITY)  # 0 = master
    # RocketMQ guesses the first non-loopback address; rocketq serves on 127.0.0.1 unless told
    # otherwise, and a guessed LAN address would be advertised to clients that cannot reach it.
    broker_ip1: str = restart_required("127.0.0.1", why=_IDENTITY)
    namesrv_addr: str | None = runtime_updatable(None)  # "host:port;host:port"
    broker_permission: int = runtime_updatable(6)  # PermName READ | WRITE
    default_topic_queue_nums: int = restart_required(8, why=_AT_START)
    auto_create_topic_enable: bool = restart_required(True, why=_AT_START)
    cluster_topic_enable: bool = restart_required(True, why="the cluster topic is created at start")
    broker_topic_enable: bool = restart_required(True, why="the broker topic is created at start")
    auto_create_subscription_group: bool = runtime_updatable(True)
    # traceTopicEnable: create msgTraceTopicName (1 queue) at start, as a system topic. Off, the
    # first trace a client sends creates it from TBW102 (autoCreateTopicEnable), as in RocketMQ.
    msg_trace_topic_name: str = restart_required("RMQ_SYS_TRACE_TOPIC", why=_AT_START)
    trace_topic_enable: bool = restart_required(False, why=_AT_START)
    register_name_server_period: int = restart_required(30_000, why=_TIMER)
    register_broker_timeout_mills: int = runtime_updatable(24_000)
    compressed_register: bool = runtime_updatable(False)
    force_register: bool = not_honoured(True, why="the broker always registers in full")
    flush_consumer_offset_interval: int = restart_required(5_000, why=_TIMER)
    reject_transaction_message: bool = runtime_updatable(False)
    long_polling_enable: bool = runtime_updatable(True)
    short_polling_time_mills: int = runtime_updatable(1_000)
    notify_consumer_ids_changed_enable: bool = runtime_updatable(True)
    channel_expired_timeout: int = runtime_updatable(120_000)
    trace_on: bool = runtime_updatable(True)
    region_id: str = runtime_updatable("DefaultRegion")
    # SQL92 subscriptions (docs/filters.md): evaluated on message properties at pull time when on.
    enable_property_filter: bool = runtime_updatable(False)
    filter_support_retry: bool = runtime_updatable(False)
    store_reply_message_enable: bool = runtime_updatable(True)
    # Transactional messages (docs/transactions.md): a half message is checked once older than
    # transactionTimeOut ms, at most transactionCheckMax times, a pass every transactionCheckInterval ms.
    transaction_time_out: int = runtime_updatable(6_000)
    transaction_check_max: int = runtime_updatable(15)
    transaction_check_interval: int = runtime_updatable(60_000)
    # pop (RocketMQ 5, docs/pop.md)
    revive_queue_num: int = restart_required(8, why=_POP_AT_START)
    revive_interval: int = restart_required(1_000, why=_POP_AT_START)
    pop_polling_size: int = runtime_updatable(1_024)
    max_pop_polling_size: int = runtime_updatable(100_000)
    pop_from_retry_probability: int = restart_required(20, why=_POP_AT_START)
    enable_retry_topic_v2: bool = restart_required(False, why=_POP_AT_START)
    default_message_request_mode: Literal["PULL", "POP"] = restart_required("PULL", why=_POP_AT_START)
    default_query_max_num: int = runtime_updatable(32)
    # RocketMQ keeps brokerRole in MessageStoreConfig; here it sits with brokerId, which it constrains.
    # SLAVE replicates from its group's master (docs/ha.md); SYNC_MASTER acks once a slave has the bytes.
    broker_role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] = restart_required(
        "ASYNC_MASTER", why="the role is fixed at start")
    # Consumers may pull from a slave: the master redirects them when their backlog is out of memory.
    slave_read_enable: bool = runtime_updatable(False)
    # rocketq's Prometheus endpoint (GET /metrics) on the broker's bind address: -1 = off, 0 = a free port.
    metrics_port: int = restart_required(-1, why="the metrics endpoint is started with the broker")
    # Test-only: "4.9" makes the broker as strict as Apache RocketMQ 4.9.8 (broker/compat.py), so
    # that the SDK's tests prove it sends nothing a 4.9 broker does not know.
    # The RocketMQ 5 gRPC endpoint (apache.rocketmq.v2, docs/grpc.md): 8081 as Apache's proxy,
    # -1 = off, 0 = a free port; with listenPort 0 the default 8081 also becomes a free port.
    grpc_port: int = restart_required(8081, why="the gRPC server is started with the broker")
    compatibility_mode: Literal["", "4.9"] = restart_required("", why="the request table is built at start")
    # ACL 1.0 (docs/security.md): every request must be signed by an account of plainAclFile.
    acl_enable: bool = restart_required(False, why=_ACL)
    # "" = <data-dir>/conf/plain_acl.yml (the parent of storePathRootDir), RocketMQ's
    # $ROCKETMQ_HOME/conf/plain_acl.yml. Reloaded when it changes.
    plain_acl_file: str = restart_required("", why=_ACL)
    # The account of plainAclFile whose secret signs this broker's requests to the name servers
    # (no secret in any config): "" = the first admin account of the file.
    inner_access_key: str = restart_required("", why=_ACL)
    # ACL 2.0 (RocketMQ 5.3's AuthConfig names and defaults; broker/acl.py): every request signed
    # by a user of acl2.json, and that user's policies deciding. Either one alone builds the ACL
    # without aclEnable; aclEnable checks 2.0 users as if both were on.
    authentication_enabled: bool = restart_required(False, why=_ACL)
    authorization_enabled: bool = restart_required(False, why=_ACL)
    # 5.3's bootstrap: {"username": ..., "password": ...}, created as a Super user at start unless
    # it exists. Not reported by GET_BROKER_CONFIG (5.3 reports no AuthConfig key either).
    init_authentication_user: str = restart_required("", why=_ACL)
    # RECALL_MESSAGE (timer messages, RocketMQ 5.3.2): off by default, as in Java.
    recall_message_enable: bool = runtime_updatable(False)
    allow_recall_when_broker_not_writeable: bool = runtime_updatable(True)
    # RocketMQ 5 controller mode (docs/ha.md): the controllers at controllerAddr ("a;b;c") decide
    # which member of the group is master; brokerRole then only says how a master acks
    # (SYNC_MASTER / ASYNC_MASTER) and brokerId is the controller's.
    enable_controller_mode: bool = restart_required(False, why="the role source is chosen at start")
    controller_addr: str | None = restart_required(None, why="the controller client starts with the broker")
    controller_heart_beat_timeout_mills: int = restart_required(10_000, why=_TIMER)
    broker_heartbeat_interval: int = restart_required(1_000, why=_TIMER)

    def __post_init__(self) -> None:
        check_port("metricsPort", self.metrics_port, off=True)
        check_port("grpcPort", self.grpc_port, off=True)
        if not self.broker_name:
            raise invalid("brokerName", "must not be empty")
        if self.broker_id < 0:
            raise invalid("brokerId", "must be >= 0 (0 is the master)")
        if not 0 <= self.broker_permission <= 7:
            raise invalid("brokerPermission", "must be a PermName bit set between 0 and 7")
        if self.default_topic_queue_nums <= 0:
            raise invalid("defaultTopicQueueNums", "must be > 0")
        if self.transaction_check_interval <= 0:
            raise invalid("transactionCheckInterval", "must be > 0 (ms)")
        if self.revive_queue_num <= 0:
            raise invalid("reviveQueueNum", "must be > 0")
        if self.broker_role == "SLAVE" and self.broker_id <= 0 and not self.enable_controller_mode:
            raise invalid("brokerId", "a SLAVE's brokerId must be > 0")

    @property
    def controller_addr_list(self) -> tuple[str, ...]:
        raw = (self.controller_addr or "").replace(",", ";")
        return tuple(a.strip() for a in raw.split(";") if a.strip())

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def namesrv_addr_list(self) -> tuple[str, ...]:
        """The name servers to register with, split on ';' as RocketMQ does."""
        return tuple(a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip())

    @property
    def register_period_ms(self) -> int:
        """The registration period the broker uses: RocketMQ clamps the configured one to 10-60 s."""
        return max(10_000, min(self.register_name_server_period, 60_000))
