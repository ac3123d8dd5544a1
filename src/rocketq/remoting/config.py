"""Transport settings, named after RocketMQ's NettyServerConfig / NettyClientConfig keys
(``listenPort`` -> ``listen_port``). Only the keys this transport honours are here."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RemotingClientConfig", "RemotingServerConfig"]


@dataclass
class RemotingServerConfig:
    # RocketMQ binds 0.0.0.0; we default to loopback so nothing is exposed by accident.
    # Set bindAddress=0.0.0.0 to serve other hosts.
    bind_address: str = "127.0.0.1"
    listen_port: int = 10911
    server_channel_max_idle_time_seconds: int = 120
    server_socket_snd_buf_size: int = 0  # 0: the OS default
    server_socket_rcv_buf_size: int = 0
    server_socket_backlog: int = 1024
    write_buffer_high_water_mark: int = 0  # 0: asyncio's default (64 KiB)
    write_buffer_low_water_mark: int = 0
    # Graceful stop waits up to this long for in-flight handlers when enabled; otherwise a short
    # fixed grace applies (RemotingServer.DEFAULT_SHUTDOWN_GRACE).
    enable_shutdown_gracefully: bool = False
    shutdown_wait_time_seconds: int = 30


@dataclass
class RemotingClientConfig:
    connect_timeout_millis: int = 3000
    client_channel_max_idle_time_seconds: int = 120
    client_socket_snd_buf_size: int = 0
    client_socket_rcv_buf_size: int = 0
    write_buffer_high_water_mark: int = 0
    write_buffer_low_water_mark: int = 0
