"""One TCP connection: ``Channel`` (what processors and clients use) and ``Connection`` (the
asyncio Protocol that feeds it).

Writes are corked: everything sent while a batch of frames is being dispatched, or during one
loop iteration, leaves in a single ``writelines()`` call. Requests this side sends wait in a
per-channel table keyed by opaque; the owning endpoint's periodic scan fails them at their
deadline, and a closing channel fails all of its own at once.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any, cast

from rocketq.codec.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    Buffer,
    RejectedCommand,
    RemotingCommand,
    next_opaque,
)
from rocketq.codec.frame import FrameDecoder, encode_frame
from rocketq.errors import ProtocolError, RemotingConnectError, RemotingSendError, RemotingTimeoutError

if TYPE_CHECKING:
    from rocketq.remoting.endpoint import RemotingEndpoint

__all__ = ["Channel", "Connection", "channel_address", "format_address"]

log = logging.getLogger("rocketq.remoting")

# Frames (buffers) queued before a corked batch is written out anyway. A pipelining producer's
# read holds dozens of requests; answering them in one write instead of several saves the
# syscalls and, above all, the peer's extra wake-ups (each write on loopback wakes it).
CORK_LIMIT = 64


def channel_address(channel: Any) -> str:
    """The peer's "ip:port" for logs and client-host fields, whatever the channel calls it (a
    ``Channel``, or a stand-in in tests)."""
    for name in ("remote_address", "remote_addr", "address", "peer"):
        value = getattr(channel, name, None)
        if isinstance(value, str):
            return value
    return repr(channel)


def format_address(addr: Any) -> str:
    """``(host, port, ...)`` from ``getpeername()`` as RocketMQ's ``host:port``."""
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr) if addr else ""


class Channel:
    """A connection as seen by processors: send frames, invoke the peer, hang state on ``attrs``."""

    __slots__ = (
        "__weakref__",
        "_closed",
        "_corked",
        "_endpoint",
        "_flush_scheduled",
        "_loop",
        "_out",
        "_pending",
        "_transport",
        "attrs",
        "last_read",
        "local_address",
        "remote_address",
    )

    def __init__(self, transport: asyncio.Transport, endpoint: RemotingEndpoint) -> None:
        self._transport = transport
        self._endpoint = endpoint
        self._loop = asyncio.get_running_loop()
        self._out: list[Buffer] = []
        self._flush_scheduled = False
        self._corked = False
        self._closed = False
        # opaque -> (future, deadline on the loop clock, timeout in seconds for the error text)
        self._pending: dict[int, tuple[asyncio.Future[RemotingCommand], float, float]] = {}
        self.remote_address = format_address(transport.get_extra_info("peername"))
        self.local_address = format_address(transport.get_extra_info("sockname"))
        self.attrs: dict[str, Any] = {}
        self.last_read = self._loop.time()

    def __repr__(self) -> str:
        state = "active" if self.is_active else "closed"
        return f"Channel({self.local_address} -> {self.remote_address}, {state})"

    @property
    def is_active(self) -> bool:
        return not self._closed and not self._transport.is_closing()

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    # -- writing ------------------------------------------------------------------------------

    def send(self, cmd: RemotingCommand) -> bool:
        """Queue one frame; False (and nothing sent) when the channel is closed."""
        if self._closed:
            log.debug("send to closed channel %s dropped: code=%s", self.remote_address, cmd.code)
            return False
        parts = encode_frame(cmd)
        out = self._out
        if len(parts) == 1:
            out.append(parts[0])
        else:
            out.extend(parts)
        if len(out) >= CORK_LIMIT:
            # Let the peer start on part of a burst while we encode the rest: across two
            # processes that overlap is worth more than the fewer syscalls of one big write.
            self._write_out()
        elif not self._corked and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return True

    def flush(self) -> None:
        """Write what is queued now rather than at the end of this loop turn: for a frame whose
        latency matters more than sharing a write (a lone send, a woken long poll's answer).
        A corked channel (inside a read of its own) is written at the end of that read anyway."""
        if not self._corked:
            self._write_out()

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._write_out()

    def _write_out(self) -> None:
        out = self._out
        if not out:
            return
        self._out = []
        if self._closed:
            return
        try:
            self._transport.writelines(out)
        except (RuntimeError, OSError) as e:  # the transport closed under us
            log.debug("write to %s failed: %s", self.remote_address, e)

    # -- requests from this side ----------------------------------------------------------------

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request and wait for its response (``RemotingTimeoutError`` at the deadline)."""
        opaque, fut = self.start_request(cmd, timeout)
        try:
            return await fut
        finally:
            self.release(opaque, fut)

    def release(self, opaque: int, fut: asyncio.Future[RemotingCommand]) -> None:
        """Forget a request its caller stopped waiting for. A cancelled one (a consumer shutting
        down mid long poll) stays until its deadline, so that its late answer is dropped quietly
        rather than taken for a stray response."""
        if not fut.cancelled():
            self._pending.pop(opaque, None)

    def start_request(
        self, cmd: RemotingCommand, timeout: float
    ) -> tuple[int, asyncio.Future[RemotingCommand]]:
        """Send a request; its response (or error) arrives on the returned future.

        The caller owns the entry under the returned opaque: it pops it from the pending table
        if it stops waiting early (``invoke`` does this for you).
        """
        if self._closed or self._transport.is_closing():
            raise RemotingSendError(f"send request to <{self.remote_address}> failed: channel closed")
        hook = self._endpoint.request_hook
        if hook is not None:
            hook(cmd)
        opaque = next_opaque()
        cmd.opaque = opaque
        cmd.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        loop = self._loop
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = (fut, loop.time() + timeout, timeout)
        self._endpoint._track(self)
        try:
            self.send(cmd)
        except BaseException:
            del self._pending[opaque]
            raise
        return opaque, fut

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that gets no response."""
        if not self.is_active:
            raise RemotingSendError(f"send request to <{self.remote_address}> failed: channel closed")
        hook = self._endpoint.request_hook
        if hook is not None:
            hook(cmd)
        cmd.opaque = next_opaque()
        cmd.flag = (cmd.flag & ~FLAG_RESPONSE) | FLAG_ONEWAY
        self.send(cmd)

    def _on_response(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque, None)
        if entry is None:
            log.warning(
                "receive response, but not matched any request, %s, opaque=%s",
                self.remote_address,
                cmd.opaque,
            )
            return
        fut = entry[0]
        if fut.done():
            log.debug("response to an abandoned request from %s, opaque=%s, dropped", self.remote_address,
                      cmd.opaque)
            return
        if cmd.__class__ is RejectedCommand:
            # The peer answered, but with a header we cannot read: fail that one request.
            log.warning("bad response header from %s, opaque=%s: %s", self.remote_address, cmd.opaque,
                        cmd.remark)
            fut.set_exception(cmd.error)
        else:
            fut.set_result(cmd)

    def _expire(self, now: float) -> bool:
        """Fail requests past their deadline; True while some are still pending."""
        pending = self._pending
        expired = [
            opaque for opaque, (fut, deadline, _) in pending.items()
            if deadline <= now or (fut.done() and not fut.cancelled())
        ]
        for opaque in expired:
            fut, _, timeout = pending.pop(opaque)
            if not fut.done():
                fut.set_exception(
                    RemotingTimeoutError(
                        f"wait response on the channel <{self.remote_address}> timeout, "
                        f"{round(timeout * 1000)}(ms)"
                    )
                )
        return bool(pending)

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for fut, _, _ in pending.values():
            if not fut.done():
                fut.set_exception(
                    RemotingConnectError(
                        f"channel <{self.remote_address}> closed before the response arrived"
                    )
                )

    # -- closing --------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush what is queued, then close (idempotent)."""
        if self._closed:
            return
        self._write_out()
        self._closed = True
        self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping unsent data."""
        self._transport.abort()


class Connection(asyncio.Protocol):
    """The asyncio side of a channel: bytes in -> commands -> the endpoint; back-pressure."""

    __slots__ = ("_backlog", "_decoder", "_endpoint", "_transport", "_write_paused", "channel")

    def __init__(self, endpoint: RemotingEndpoint) -> None:
        self._endpoint = endpoint
        self._decoder = FrameDecoder(endpoint.max_frame_length)
        self.channel: Channel | None = None
        self._transport: asyncio.Transport | None = None
        self._write_paused = False
        # Requests decoded but not dispatched yet because the peer stopped reading our output.
        self._backlog: list[RemotingCommand] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._endpoint._configure_transport(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.channel = Channel(transport, self._endpoint)
        self._endpoint._channel_opened(self.channel)

    def data_received(self, data: bytes) -> None:
        channel = self.channel
        if channel is None:
            return
        channel.last_read = channel._loop.time()
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as e:
            log.warning("decode frame from %s failed, close the channel: %s", channel.remote_address, e)
            channel.close()
            return
        if self._backlog:
            self._backlog.extend(commands)
            commands, self._backlog = self._backlog, []
        if commands:
            self._process(channel, commands)

    def _process(self, channel: Channel, commands: list[RemotingCommand]) -> None:
        endpoint = self._endpoint
        runs = endpoint._run_processors
        channel._corked = True
        try:
            i, n = 0, len(commands)
            while i < n:
                if self._write_paused:
                    # Dispatching more would only queue more output for a peer that is not
                    # reading it: keep the rest until resume_writing().
                    self._backlog = commands[i:]
                    break
                cmd = commands[i]
                i += 1
                if cmd.flag & FLAG_RESPONSE:
                    channel._on_response(cmd)
                    continue
                code = cmd.code
                handler = runs.get(code) if runs else None
                if handler is None:
                    # A rejected frame's code is never registered, so it can only turn up here.
                    if cmd.__class__ is RejectedCommand:
                        endpoint._reject(cmd, channel)
                    else:
                        endpoint._dispatch(cmd, channel)
                    continue
                # A pipelining producer's requests arrive many to a read: hand the whole run of
                # one code to its batch handler (a run of one included, so one path serves all).
                start = i - 1
                while i < n and commands[i].code == code and not commands[i].flag & FLAG_RESPONSE:
                    i += 1
                endpoint._dispatch_run(commands[start:i], channel, handler)
        finally:
            channel._corked = False
            channel._write_out()

    def pause_writing(self) -> None:
        # The peer is not reading: stop reading (and dispatching) its requests until it catches up.
        # Only servers do this. A client that stopped reading because the server reads slowly
        # would stop reading the very responses the server is blocked on: a deadlock.
        if not self._endpoint.pause_reading_when_unwritable:
            return
        self._write_paused = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        channel = self.channel
        if self._backlog and channel is not None:
            commands, self._backlog = self._backlog, []
            self._process(channel, commands)
        if not self._write_paused and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        channel = self.channel
        if channel is None:
            return
        channel._closed = True
        channel._out = []
        channel._fail_pending()
        self._endpoint._channel_closed(channel, exc)
