"""TLS for both ends, with the standard library's ``ssl`` (RocketMQ's TlsHelper and the server's
HandshakeHandler).

A server in ``permissive`` mode (RocketMQ's default) serves TLS and plain connections on one port:
it peeks at the first byte a connection sends, and 0x16 (a TLS handshake record) starts TLS over
it, anything else is served plain. ``enforcing`` closes plain connections, ``disabled`` serves
plain only (a TLS hello then fails as a bad frame). After the first read the connection is an
ordinary one: the sniffer hands the transport to the connection's protocol for good.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Final, cast

__all__ = ["HANDSHAKE_MAGIC", "TlsSniffer", "client_context", "server_context"]

log = logging.getLogger("rocketq.remoting")

HANDSHAKE_MAGIC: Final = 0x16
# A connection that says nothing for this long is closed before it is served at all.
FIRST_BYTE_TIMEOUT: Final = 30.0
HANDSHAKE_TIMEOUT: Final = 10


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
    plain from the first byte the peer sends, then hands the connection over for good.

    For TLS it puts asyncio's own TLS protocol (``asyncio.sslproto.SSLProtocol``, what
    ``loop.start_tls`` uses) in its place and feeds it the bytes already read: the decision needs
    the first read, and ``start_tls`` cannot be given bytes that were read before it.
    """

    def __init__(self, make_protocol: Callable[[], asyncio.Protocol], ctx: ssl.SSLContext,
                 enforcing: bool) -> None:
        self._make = make_protocol
        self._ctx = ctx
        self._enforcing = enforcing
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._timer = asyncio.get_running_loop().call_later(FIRST_BYTE_TIMEOUT, self._silent)

    def _silent(self) -> None:
        if self._transport is not None:
            log.info("connection from %s sent nothing for %ss, closed", transport_peer(self._transport),
                     FIRST_BYTE_TIMEOUT)
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        if transport is None or not data:
            return
        self._transport = None  # decided: this object is out of the path from here on
        if self._timer is not None:
            self._timer.cancel()
        if data[0] == HANDSHAKE_MAGIC:
            self._start_tls(transport, data)
            return
        if self._enforcing:
            log.warning("Clients intend to establish an insecure connection while this server is "
                        "running in SSL enforcing mode: %s closed", transport_peer(transport))
            transport.close()
            return
        protocol = self._make()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.data_received(data)

    def _start_tls(self, transport: asyncio.Transport, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        handshake: asyncio.Future[None] = loop.create_future()
        peer = transport_peer(transport)
        handshake.add_done_callback(lambda f: _handshake_done(f, peer))
        tls = sslproto.SSLProtocol(loop, self._make(), self._ctx, handshake, server_side=True,
                                   ssl_handshake_timeout=HANDSHAKE_TIMEOUT)
        transport.set_protocol(tls)
        tls.connection_made(transport)
        view = tls.get_buffer(len(data))
        n = min(len(view), len(data))
        view[:n] = data[:n]
        tls.buffer_updated(n)
        rest = data[n:]
        while rest:  # a hello larger than the protocol's buffer: the rest in further pieces
            view = tls.get_buffer(len(rest))
            n = min(len(view), len(rest))
            view[:n] = rest[:n]
            tls.buffer_updated(n)
            rest = rest[n:]


def _handshake_done(fut: asyncio.Future[None], peer: str) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("TLS handshake with %s failed: %s", peer, fut.exception())


def transport_peer(transport: asyncio.BaseTransport | None) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
