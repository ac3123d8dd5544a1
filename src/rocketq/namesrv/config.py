"""NamesrvConfig: the name server's knobs, RocketMQ's names and defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocketq.config.fields import check_port, invalid, not_honoured, restart_required, runtime_updatable

__all__ = ["NamesrvConfig"]


def _home_file(*parts: str) -> Callable[[], str]:
    return lambda: str(Path.home().joinpath(*parts))


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """RocketMQ ``NamesrvConfig``, plus the listen port (RocketMQ keeps it in NettyServerConfig).

    The runtime-updatable keys are read from ``NamesrvController.namesrv_config`` at each use (the
    expiry also by the route table, which the controller's change listener hands it to)."""

    listen_port: int = restart_required(9876, why="the port is bound at start")
    rocketmq_home: str = not_honoured("", why="rocketq needs no installation directory")
    kv_config_path: str = restart_required(factory=_home_file("namesrv", "kvConfig.json"))
    config_store_path: str = restart_required(factory=_home_file("namesrv", "namesrv.properties"))
    # 4.x's 10 s: DESIGN's timing (expire after 120 s silent, scan every 10 s); 5.x scans every 5 s.
    scan_not_active_broker_interval: int = runtime_updatable(10_000)
    # rocketq's name for RocketMQ's hard-coded BROKER_CHANNEL_EXPIRED_TIME.
    broker_channel_expired_time: int = runtime_updatable(120_000)
    order_message_enable: bool = runtime_updatable(False)
    enable_all_topic_list: bool = runtime_updatable(True)
    enable_topic_list: bool = runtime_updatable(True)
    need_wait_for_service: bool = runtime_updatable(False)
    wait_seconds_for_service: int = runtime_updatable(45)
    # rocketq's Prometheus endpoint (GET /metrics): -1 = off, 0 = a free port.
    metrics_port: int = restart_required(-1, why="the metrics endpoint is started with the server")
    # ACL on the name server (docs/security.md): broker registration, KV config and config changes
    # need an admin signature; a broker's registration can be replaced only by the same account.
    acl_enable: bool = restart_required(False, why="the ACL is set up at start")
    # "" = <data-dir>/conf/plain_acl.yml (the parent of kvConfigPath's directory).
    plain_acl_file: str = restart_required("", why="the ACL is set up at start")
    # RocketMQ 5: run a controller inside this name server (docs/ha.md, controller mode), on its
    # port; controllerPeers are the name servers running one ("host:port;..."; Raft on port + 1).
    enable_controller_in_namesrv: bool = restart_required(False, why="the controller starts with the server")
    controller_peers: str = restart_required("", why="the controller starts with the server")

    def __post_init__(self) -> None:
        check_port("listenPort", self.listen_port)
        check_port("metricsPort", self.metrics_port, off=True)
        if self.scan_not_active_broker_interval <= 0:
            raise invalid("scanNotActiveBrokerInterval", "must be > 0 ms")
        if self.broker_channel_expired_time <= 0:
            raise invalid("brokerChannelExpiredTime", "must be > 0 ms")
