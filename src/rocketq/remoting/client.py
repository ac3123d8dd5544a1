"""RemotingClient: one lazily opened connection per ``host:port``, request/response by opaque,
one-way sends, and processors for requests the server sends back on the same connection."""

from __future__ import annotations

import asyncio
import logging
import ssl
from functools import partial

from rocketq.codec.command import RemotingCommand
from rocketq.codec.frame import DEFAULT_MAX_FRAME_LENGTH
from rocketq.errors import RemotingConnectError, RemotingTimeoutError, RocketQError
from rocketq.remoting.channel import Channel, Connection
from rocketq.remoting.config import RemotingClientConfig
from rocketq.remoting.endpoint import RemotingEndpoint

__all__ = ["RemotingClient", "split_address"]

log = logging.getLogger("rocketq.remoting")

DEFAULT_TIMEOUT = 3.0  # mqClientApiTimeout


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port); ``RemotingConnectError`` if malformed."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(f"bad address {addr!r}, expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class RemotingClient(RemotingEndpoint):
    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        idle_timeout: float | None = 120.0,
        socket_snd_buf_size: int = 0,
        socket_rcv_buf_size: int = 0,
        write_buffer_high_water_mark: int = 0,
        write_buffer_low_water_mark: int = 0,
    ) -> None:
        super().__init__(
            max_frame_length=max_frame_length,
            idle_timeout=idle_timeout,
            socket_snd_buf_size=socket_snd_buf_size,
            socket_rcv_buf_size=socket_rcv_buf_size,
            write_buffer_high_water_mark=write_buffer_high_water_mark,
            write_buffer_low_water_mark=write_buffer_low_water_mark,
        )
        self.connect_timeout = connect_timeout
        self._by_addr: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Future[Channel]] = {}
        self._closed = False
        self.on_channel_close(self._forget)
        # TLS to every server this client connects to (None: plain TCP).
        self.ssl_context: ssl.SSLContext | None = None

    @classmethod
    def from_config(
        cls, config: RemotingClientConfig, *, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
    ) -> RemotingClient:
        idle = config.client_channel_max_idle_time_seconds
        return cls(
            connect_timeout=config.connect_timeout_millis / 1000.0,
            max_frame_length=max_frame_length,
            idle_timeout=float(idle) if idle > 0 else None,
            socket_snd_buf_size=config.client_socket_snd_buf_size,
            socket_rcv_buf_size=config.client_socket_rcv_buf_size,
            write_buffer_high_water_mark=config.write_buffer_high_water_mark,
            write_buffer_low_water_mark=config.write_buffer_low_water_mark,
        )

    # -- channels -------------------------------------------------------------------------------

    def _forget(self, channel: Channel) -> None:
        for addr, known in list(self._by_addr.items()):
            if known is channel:
                del self._by_addr[addr]

    async def get_channel(self, addr: str, timeout: float | None = None) -> Channel:
        """The open channel to ``addr``, connecting (once, however many callers wait) if needed."""
        channel = self._by_addr.get(addr)
        if channel is not None and channel.is_active:
            return channel
        if self._closed:
            raise RemotingConnectError(f"connect to <{addr}> failed: client closed")
        fut = self._connecting.get(addr)
        if fut is None:
            fut = asyncio.ensure_future(self._connect(addr))
            self._connecting[addr] = fut
            fut.add_done_callback(partial(self._connect_done, addr))
        if timeout is None:
            return await asyncio.shield(fut)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            raise RemotingConnectError(f"connect to <{addr}> failed: timeout") from None

    def _connect_done(self, addr: str, fut: asyncio.Future[Channel]) -> None:
        if self._connecting.get(addr) is fut:
            del self._connecting[addr]
        if not fut.cancelled():
            fut.exception()  # retrieved here so a connect nobody waits for any more stays quiet

    async def _connect(self, addr: str) -> Channel:
        host, port = split_address(addr)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.ssl_context is None:
                    _, protocol = await loop.create_connection(lambda: Connection(self), host, port)
                else:
                    _, protocol = await loop.create_connection(
                        lambda: Connection(self), host, port, ssl=self.ssl_context,
                        server_hostname=host if self.ssl_context.check_hostname else None)
        except TimeoutError:
            raise RemotingConnectError(f"connect to <{addr}> failed: timeout") from None
        except ssl.SSLError as e:  # an OSError too: say it is the TLS handshake that failed
            raise RemotingConnectError(f"connect to <{addr}> failed: TLS handshake: {e}") from None
        except OSError as e:
            raise RemotingConnectError(f"connect to <{addr}> failed: {e}") from None
        channel = protocol.channel
        if channel is None or not channel.is_active:
            raise RemotingConnectError(f"connect to <{addr}> failed: closed at once")
        if self._closed:
            channel.close()
            raise RemotingConnectError(f"connect to <{addr}> failed: client closed")
        self._by_addr[addr] = channel
        log.info("createChannel: connect remote host[%s] success", addr)
        return channel

    def close_channel(self, addr: str) -> None:
        channel = self._by_addr.pop(addr, None)
        if channel is not None:
            channel.close()

    # -- invocations ----------------------------------------------------------------------------

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and return the response.

        Raises ``RemotingConnectError`` (no connection), ``RemotingSendError`` (the channel closed
        before sending) or ``RemotingTimeoutError`` (no response within ``timeout`` s, connect time
        included).
        """
        channel = self._by_addr.get(addr)
        if channel is None or channel._closed:
            loop = asyncio.get_running_loop()
            start = loop.time()
            channel = await self.get_channel(addr, min(timeout, self.connect_timeout))
            timeout -= loop.time() - start
            if timeout <= 0:
                raise RemotingTimeoutError(f"invoke to <{addr}> timeout: connecting took the whole budget")
        # Channel.invoke inlined: one coroutine frame less per request on the client's hot path.
        opaque, fut = channel.start_request(cmd, timeout)
        try:
            return await fut
        finally:
            channel.release(opaque, fut)

    def invoke_oneway(
        self, addr: str, cmd: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> asyncio.Future[None]:
        """Send ``cmd`` without waiting for (or getting) a response.

        On an open channel the frame is queued before this returns; otherwise the connect and
        the send happen in the background. Either way the returned future reports the outcome
        (``await`` it to see connect errors; not awaiting it is fine too).
        """
        channel = self._by_addr.get(addr)
        if channel is not None and not channel._closed:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            try:
                channel.invoke_oneway(cmd)
            except RocketQError as e:
                fut.set_exception(e)
            else:
                fut.set_result(None)
            return fut
        return asyncio.ensure_future(self._oneway_after_connect(addr, cmd, timeout))

    def send_oneway_now(self, addr: str, cmd: RemotingCommand) -> bool:
        """``invoke_oneway`` on the open channel to ``addr``, queued before this returns, with no
        future to report it (errors raise, as ``Channel.invoke_oneway``); False, and nothing sent,
        when no channel is open (then use ``invoke_oneway``)."""
        channel = self._by_addr.get(addr)
        if channel is None or channel._closed:
            return False
        channel.invoke_oneway(cmd)
        return True

    async def _oneway_after_connect(self, addr: str, cmd: RemotingCommand, timeout: float) -> None:
        channel = await self.get_channel(addr, min(timeout, self.connect_timeout))
        channel.invoke_oneway(cmd)

    async def close(self) -> None:
        """Close every channel (pending requests fail) and stop background work."""
        self._closed = True
        for connecting in list(self._connecting.values()):
            connecting.cancel()
        for handling in list(self._inflight):
            handling.cancel()
        channels = list(self._channels)
        for channel in channels:
            channel.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.0
        while self._channels and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for channel in list(self._channels):
            channel.abort()
        await self._stop_housekeeper()

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
