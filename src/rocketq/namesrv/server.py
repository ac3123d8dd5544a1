"""NamesrvController: wires the route tables, the KV store, the processor and the transport, and
runs the broker-expiry scan.

Contract (the CLI and the tests call exactly this)::

    ctl = NamesrvController(namesrv_config, server_config)
    await ctl.start(); ctl.address  # "host:port"
    await ctl.shutdown()

Several name servers run side by side without talking to each other: brokers register with all
of them and clients may ask any, so there is nothing to coordinate here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from rocketq.config import ConfigChange, RuntimeConfig
from rocketq.namesrv.config import NamesrvConfig
from rocketq.namesrv.kv_config import KVConfigManager
from rocketq.namesrv.processor import DefaultRequestProcessor
from rocketq.namesrv.route_info import RouteInfoManager
from rocketq.remoting import Channel, RemotingServer, RemotingServerConfig

__all__ = ["NamesrvController"]

log = logging.getLogger(__name__)

_WILDCARD_HOSTS = {"", "0.0.0.0", "::"}


class NamesrvController:
    """RocketMQ's NamesrvController."""

    def __init__(self, namesrv_config: NamesrvConfig, server_config: RemotingServerConfig) -> None:
        self.namesrv_config = namesrv_config
        self.server_config = server_config
        self.runtime_config = RuntimeConfig([namesrv_config], self._apply_config_change)
        self.kv_config_manager = KVConfigManager(namesrv_config.kv_config_path)
        self.route_info_manager = RouteInfoManager(
            broker_channel_expired_time=namesrv_config.broker_channel_expired_time
        )
        self.remoting_server = RemotingServer.from_config(server_config)
        self.acl = self._build_acl()
        self.processor = DefaultRequestProcessor(self)
        self.processor.register(self.remoting_server)
        self.remoting_server.on_channel_close(self._on_channel_close)
        self._scan_task: asyncio.Task[None] | None = None
        self._wake_scan: asyncio.Event | None = None
        self._started_at = 0.0
        self.metrics: Any = None  # NamesrvMetrics while metricsPort >= 0
        self.controller: Any = None  # a controller in this process: its series join the metrics

    def _build_acl(self) -> Any:
        """aclEnable: protected requests are checked before their processor (namesrv/acl.py)."""
        if not self.namesrv_config.acl_enable:
            return None
        from rocketq.acl import PlainPermissionManager
        from rocketq.namesrv.acl import NamesrvAcl

        configured = self.namesrv_config.plain_acl_file
        path = (Path(configured).expanduser() if configured else
                Path(self.namesrv_config.kv_config_path).expanduser().absolute().parent.parent
                / "conf" / "plain_acl.yml")
        acl = NamesrvAcl(PlainPermissionManager(path), self.route_info_manager)
        self.remoting_server.set_request_validator(acl.validate)
        return acl

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self.kv_config_manager.load)
        await self.remoting_server.start()
        self._started_at = time.monotonic()
        self._wake_scan = asyncio.Event()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan")
        if self.namesrv_config.metrics_port >= 0:
            try:
                await self._start_metrics(self.namesrv_config.metrics_port)
            except BaseException:
                await self.shutdown()
                raise
        log.info("NamesrvController started, listening on %s", self.address)

    async def _start_metrics(self, port: int) -> None:
        # imported here: prometheus_client is only needed by name servers that export metrics
        from rocketq.namesrv.metrics import NamesrvMetrics

        self.metrics = NamesrvMetrics(self)
        await self.metrics.start(self.server_config.bind_address, port)
        log.info("name server metrics on http://%s/metrics", self.metrics.address)

    @property
    def metrics_address(self) -> str | None:
        """``host:port`` of the Prometheus endpoint, or None when metricsPort is off."""
        return self.metrics.address if self.metrics is not None else None

    async def shutdown(self) -> None:
        address = self.address
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            with contextlib.suppress(Exception):
                await metrics.stop()
        await self.remoting_server.stop()
        log.info("NamesrvController shutdown, %s closed", address)

    @property
    def address(self) -> str:
        """``host:port`` clients and brokers should use (the bound port once started)."""
        ports = self.remoting_server.bound_ports
        port = ports[0] if ports else self.server_config.listen_port
        host = self.server_config.bind_address
        if host in _WILDCARD_HOSTS:
            host = "127.0.0.1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def ready_for_service(self) -> bool:
        """needWaitForService: routes are held back until brokers had time to register after a
        restart, so clients never see a half-empty route table."""
        if not self.namesrv_config.need_wait_for_service:
            return True
        waited = time.monotonic() - self._started_at
        return self._started_at > 0 and waited >= self.namesrv_config.wait_seconds_for_service

    def _apply_config_change(self, change: ConfigChange) -> None:
        """The one change listener (UPDATE_NAMESRV_CONFIG): the processor reads ``namesrv_config`` at
        each request; the route table keeps its own copy of the expiry; the scan loop re-reads its
        interval once woken."""
        config = change.new(NamesrvConfig)
        self.namesrv_config = config
        self.route_info_manager.broker_channel_expired_time = config.broker_channel_expired_time
        if self._wake_scan is not None:
            self._wake_scan.set()  # the scan interval may have changed

    # -- broker liveness ---------------------------------------------------------------------------

    def _on_channel_close(self, channel: Channel) -> None:
        self.route_info_manager.on_channel_destroy(channel)

    def scan_not_active_broker(self) -> int:
        expired = self.route_info_manager.scan_not_active_broker()
        for broker in expired:
            if isinstance(broker.channel, Channel):
                broker.channel.close()
        return len(expired)

    async def _scan_loop(self) -> None:
        wake = self._wake_scan
        assert wake is not None
        while True:
            interval = self.namesrv_config.scan_not_active_broker_interval / 1000.0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await wake.wait()
            if wake.is_set():
                wake.clear()
                continue
            try:
                self.scan_not_active_broker()
            except Exception:  # the scan must outlive any bug in one round
                log.exception("scanNotActiveBroker failed")

    def __repr__(self) -> str:
        return f"NamesrvController({self.address})"
