"""RemotingServer: listens on one or more ports (the broker serves listenPort and the VIP port
listenPort - 2 with the same processors) and dispatches requests by code."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Sequence

from rocketq.codec.frame import DEFAULT_MAX_FRAME_LENGTH
from rocketq.remoting.channel import Connection
from rocketq.remoting.config import RemotingServerConfig
from rocketq.remoting.endpoint import RemotingEndpoint
from rocketq.remoting.tls import TlsSniffer, server_context

__all__ = ["RemotingServer"]

log = logging.getLogger("rocketq.remoting")


class RemotingServer(RemotingEndpoint):
    # Grace for in-flight handlers at stop() when the config does not ask for a longer one.
    DEFAULT_SHUTDOWN_GRACE = 3.0
    # A peer that does not read its responses must not make us buffer without bound.
    pause_reading_when_unwritable = True

    def __init__(
        self,
        host: str = "127.0.0.1",
        ports: Sequence[int] = (0,),
        *,
        idle_timeout: float | None = 120.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        backlog: int = 1024,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        socket_snd_buf_size: int = 0,
        socket_rcv_buf_size: int = 0,
        write_buffer_high_water_mark: int = 0,
        write_buffer_low_water_mark: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        tls_mode: str = "permissive",
    ) -> None:
        super().__init__(
            max_frame_length=max_frame_length,
            idle_timeout=idle_timeout,
            socket_snd_buf_size=socket_snd_buf_size,
            socket_rcv_buf_size=socket_rcv_buf_size,
            write_buffer_high_water_mark=write_buffer_high_water_mark,
            write_buffer_low_water_mark=write_buffer_low_water_mark,
        )
        if not ports:
            raise ValueError("a RemotingServer needs at least one port")
        self.host = host
        self.ports = list(ports)
        self.backlog = backlog
        self.shutdown_grace = shutdown_grace
        self._servers: list[asyncio.Server] = []
        self._bound: list[int] = []
        # TLS (remoting/tls.py): None or tls_mode "disabled" serves plain connections only.
        self.ssl_context = ssl_context
        self.tls_mode = tls_mode

    @classmethod
    def from_config(
        cls,
        config: RemotingServerConfig,
        ports: Sequence[int] | None = None,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
    ) -> RemotingServer:
        """A server for ``config``; ``ports`` defaults to ``[config.listen_port]``."""
        grace = (
            float(config.shutdown_wait_time_seconds)
            if config.enable_shutdown_gracefully
            else cls.DEFAULT_SHUTDOWN_GRACE
        )
        idle = config.server_channel_max_idle_time_seconds
        ctx = None
        if config.tls_server_mode != "disabled" and config.tls_server_cert_path:
            ctx = server_context(
                config.tls_server_cert_path, config.tls_server_key_path or config.tls_server_cert_path,
                need_client_auth=config.tls_server_need_client_auth,
                trust_cert_file=config.tls_server_trust_cert_path or None)
        elif config.tls_server_mode == "enforcing":
            raise ValueError("tls.server.mode=enforcing needs tls.server.certPath (and keyPath)")
        return cls(
            config.bind_address,
            [config.listen_port] if ports is None else ports,
            idle_timeout=float(idle) if idle > 0 else None,
            max_frame_length=max_frame_length,
            backlog=config.server_socket_backlog,
            shutdown_grace=grace,
            socket_snd_buf_size=config.server_socket_snd_buf_size,
            socket_rcv_buf_size=config.server_socket_rcv_buf_size,
            write_buffer_high_water_mark=config.write_buffer_high_water_mark,
            write_buffer_low_water_mark=config.write_buffer_low_water_mark,
            ssl_context=ctx,
            tls_mode=config.tls_server_mode,
        )

    def _protocol_factory(self) -> Callable[[], asyncio.Protocol]:
        ctx = self.ssl_context
        if ctx is None or self.tls_mode == "disabled":
            return lambda: Connection(self)
        enforcing = self.tls_mode == "enforcing"
        return lambda: TlsSniffer(lambda: Connection(self), ctx, enforcing)

    @property
    def bound_ports(self) -> list[int]:
        """The ports actually listened on, in the order given (0 resolved to the chosen port)."""
        return list(self._bound)

    @property
    def is_serving(self) -> bool:
        return bool(self._servers)

    async def start(self) -> None:
        if self._servers:
            raise RuntimeError("RemotingServer already started")
        loop = asyncio.get_running_loop()
        factory = self._protocol_factory()
        try:
            for port in self.ports:
                server = await loop.create_server(
                    factory,
                    self.host,
                    port,
                    backlog=self.backlog,
                    reuse_address=True,
                )
                self._servers.append(server)
                self._bound.append(server.sockets[0].getsockname()[1])
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers.clear()
            self._bound.clear()
            raise
        self._ensure_housekeeper()
        log.info("remoting server started, listening on %s:%s", self.host, self._bound)

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting, let in-flight handlers finish (up to ``grace`` s), close every channel."""
        grace = self.shutdown_grace if grace is None else grace
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        inflight = set(self._inflight)
        if inflight:
            _, late = await asyncio.wait(inflight, timeout=grace)
            for fut in late:
                fut.cancel()
        channels = list(self._channels)
        for channel in channels:
            channel.close()
        if channels:
            await self._wait_channels_closed(1.0)
        for channel in list(self._channels):
            channel.abort()
        await self._stop_housekeeper()
        self._bound.clear()
        log.info("remoting server stopped")

    async def _wait_channels_closed(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._channels and loop.time() < deadline:
            await asyncio.sleep(0.01)
