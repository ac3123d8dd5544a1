"""TLS for both ends, with the standard library's ``ssl`` (RocketMQ's TlsHelper and the server's
HandshakeHandler).

A server in ``permissive`` mode (RocketMQ's default) serves TLS and plain connections on one port:
it peeks at the first byte a connection sends, and 0x16 (a TLS handshake record) starts TLS over
it, anything else is served plain. ``enforcing`` closes plain connections, ``disabled`` serves
plain only (a TLS hello then fails as a bad frame). The peek reads nothing off the socket, so
asyncio's own ``start_tls`` does the handshake; after it the connection is an ordinary one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any, Final, cast

__all__ = ["HANDSHAKE_MAGIC", "TlsSniffer", "client_context", "server_context"]

log = logging.getLogger("rocketq.remoting")

HANDSHAKE_MAGIC: Final = 0x16
# A connection that says nothing for this long is closed before it is served at all.
FIRST_BYTE_TIMEOUT: Final = 30.0
HANDSHAKE_TIMEOUT: Final = 10.0


def server_context(
    cert_file: str,
    key_file: str,
    *,
    key_password: str | None = None,
    need_client_auth: str = "none",
    trust_cert_file: str | None = None,
) -> ssl.SSLContext:
    """tls.server.*: the certificate chain and key; ``need_client_auth`` none/optional/require."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file, password=key_password or None)
    mode = need_client_auth.strip().lower()
    if mode not in ("none", "optional", "require"):
        raise ValueError(f"tls.server.need.client.auth must be none, optional or require, not {mode!r}")
    if mode != "none":
        if trust_cert_file:
            ctx.load_verify_locations(trust_cert_file)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = ssl.CERT_REQUIRED if mode == "require" else ssl.CERT_OPTIONAL
    return ctx


def client_context(
    *,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    verify: bool = True,
) -> ssl.SSLContext:
    """The SDK's side: verify the server against ``ca_file`` (or the system's CAs), optionally
    present a client certificate. ``verify=False`` is Java's tls.client.authServer=false."""
    ctx = ssl.create_default_context(cafile=ca_file)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


class TlsSniffer(asyncio.Protocol):
    """The first protocol of every accepted connection on a TLS-capable port: decides TLS or
    plain from the first byte, then hands the connection to ``make_protocol()``'s protocol."""

    def __init__(self, make_protocol: Callable[[], asyncio.Protocol], ctx: ssl.SSLContext,
                 enforcing: bool) -> None:
        self._make = make_protocol
        self._ctx = ctx
        self._enforcing = enforcing
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        transport.pause_reading()
        self._task = asyncio.get_running_loop().create_task(self._decide(transport))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def data_received(self, data: bytes) -> None:  # reading is paused until the decision
        log.warning("data before the TLS decision from %s, closing", transport_peer(self._transport))
        if self._transport is not None:
            self._transport.close()

    async def _decide(self, transport: asyncio.Transport) -> None:
        peer = transport_peer(transport)
        try:
            first = await asyncio.wait_for(_peek(transport), FIRST_BYTE_TIMEOUT)
        except (TimeoutError, OSError) as e:
            log.info("connection from %s closed before its first byte: %s", peer, e or "timeout")
            transport.close()
            return
        protocol = self._make()
        if first == HANDSHAKE_MAGIC:
            loop = asyncio.get_running_loop()
            try:
                tls = await loop.start_tls(transport, protocol, self._ctx, server_side=True,
                                           ssl_handshake_timeout=HANDSHAKE_TIMEOUT)
            except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as e:
                log.warning("TLS handshake with %s failed: %s", peer, e)
                transport.close()
                return
            if tls is None:
                transport.close()
                return
            protocol.connection_made(tls)
            return
        if self._enforcing:
            log.warning("Clients intend to establish an insecure connection while this server is "
                        "running in SSL enforcing mode: %s closed", peer)
            transport.close()
            return
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        transport.resume_reading()


def transport_peer(transport: asyncio.BaseTransport | None) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)


async def _peek(transport: asyncio.Transport) -> int:
    """The first byte the peer sent, left in the socket; -1 when it closed without a byte."""
    raw: Any = transport.get_extra_info("socket")
    loop = asyncio.get_running_loop()
    # A duplicate descriptor: ours to watch and close; the transport keeps its own.
    sock = socket.socket(fileno=os.dup(raw.fileno()))
    try:
        sock.setblocking(False)
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(sock.fileno(), readable)
        try:
            await ready
        finally:
            loop.remove_reader(sock.fileno())
        data = sock.recv(1, socket.MSG_PEEK)
        if not data:
            raise ConnectionResetError("closed")
        return data[0]
    finally:
        sock.close()
