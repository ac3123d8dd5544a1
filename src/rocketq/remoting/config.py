"""Transport settings, named after RocketMQ's NettyServerConfig / NettyClientConfig keys
(``listenPort`` -> ``listen_port``). Only the keys this transport honours are here; all of them are
applied when a server binds or a connection opens, so none changes at runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rocketq.config.fields import restart_required

__all__ = ["RemotingClientConfig", "RemotingServerConfig"]

_BIND = "applied when the server binds its socket"
_CONNECT = "applied when a connection opens"
_KEPT = "the server keeps the value it started with"


@dataclass(frozen=True, slots=True)
class RemotingServerConfig:
    # RocketMQ binds 0.0.0.0; we default to loopback so nothing is exposed by accident.
    # Set bindAddress=0.0.0.0 to serve other hosts.
    bind_address: str = restart_required("127.0.0.1", why=_BIND)
    listen_port: int = restart_required(10911, why=_BIND)
    server_channel_max_idle_time_seconds: int = restart_required(120, why=_CONNECT)
    server_socket_snd_buf_size: int = restart_required(0, why=_CONNECT)  # 0: the OS default
    server_socket_rcv_buf_size: int = restart_required(0, why=_CONNECT)
    server_socket_backlog: int = restart_required(1024, why=_BIND)
    write_buffer_high_water_mark: int = restart_required(0, why=_CONNECT)  # 0: asyncio's default (64 KiB)
    write_buffer_low_water_mark: int = restart_required(0, why=_CONNECT)
    # Graceful stop waits up to this long for in-flight handlers when enabled; otherwise a short
    # fixed grace applies (RemotingServer.DEFAULT_SHUTDOWN_GRACE).
    enable_shutdown_gracefully: bool = restart_required(False, why=_KEPT)
    shutdown_wait_time_seconds: int = restart_required(30, why=_KEPT)
    # TLS (docs/security.md), under TlsSystemConfig's names. permissive: TLS and plain on one port
    # (told apart by the first byte); enforcing: TLS only; disabled: plain only. Without a
    # certificate the port is plain whatever the mode says (enforcing then refuses to start).
    tls_server_mode: Literal["disabled", "permissive", "enforcing"] = restart_required(
        "permissive", key="tls.server.mode", why=_BIND)
    tls_server_cert_path: str = restart_required("", key="tls.server.certPath", why=_BIND)
    tls_server_key_path: str = restart_required("", key="tls.server.keyPath", why=_BIND)
    # none / optional / require: ask clients for a certificate signed by trustCertPath.
    tls_server_need_client_auth: Literal["none", "optional", "require"] = restart_required(
        "none", key="tls.server.need.client.auth", why=_BIND)
    tls_server_trust_cert_path: str = restart_required("", key="tls.server.trustCertPath", why=_BIND)
    # This process's own connections (a broker's to the name servers) use TLS; Java's defaults:
    # the server's certificate is not checked unless tls.client.authServer=true.
    tls_enable: bool = restart_required(False, key="tls.enable", why=_CONNECT)
    tls_client_auth_server: bool = restart_required(False, key="tls.client.authServer", why=_CONNECT)
    tls_client_trust_cert_path: str = restart_required("", key="tls.client.trustCertPath", why=_CONNECT)


@dataclass(frozen=True, slots=True)
class RemotingClientConfig:
    connect_timeout_millis: int = restart_required(3000, why=_CONNECT)
    client_channel_max_idle_time_seconds: int = restart_required(120, why=_CONNECT)
    client_socket_snd_buf_size: int = restart_required(0, why=_CONNECT)
    client_socket_rcv_buf_size: int = restart_required(0, why=_CONNECT)
    write_buffer_high_water_mark: int = restart_required(0, why=_CONNECT)
    write_buffer_low_water_mark: int = restart_required(0, why=_CONNECT)
