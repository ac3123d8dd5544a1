"""What servers and clients share (RocketMQ's NettyRemotingAbstract): the processor table and
dispatch, the channel set, close listeners, and one housekeeping task that fails overdue
requests and closes idle channels."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from time import perf_counter
from typing import Any, TypeAlias, TypeVar

from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import FLAG_ONEWAY, FLAG_RESPONSE, RejectedCommand, RemotingCommand
from rocketq.codec.frame import DEFAULT_MAX_FRAME_LENGTH
from rocketq.errors import RocketQError
from rocketq.remoting.channel import Channel

__all__ = [
    "BatchHandler",
    "CloseListener",
    "Handler",
    "HandlerResult",
    "RemotingEndpoint",
    "handles_runs",
    "handles_runs_of",
]

log = logging.getLogger("rocketq.remoting")

HandlerResult: TypeAlias = RemotingCommand | Awaitable[RemotingCommand | None] | None
# A processor: return the response (or None for none), or an awaitable of it.
Handler: TypeAlias = Callable[[RemotingCommand, Channel], HandlerResult]
# A processor for a run of consecutive requests of one code, read together from one channel:
# one result per request, in order; an exception instance stands for what the single handler
# would have raised for that request.
BatchHandler: TypeAlias = Callable[[list[RemotingCommand], Channel], Sequence[HandlerResult | BaseException]]
CloseListener: TypeAlias = Callable[[Channel], object]
RequestObserver: TypeAlias = Callable[[int, int, float], object]
# Checks a request before its handler runs (ACL): raise a RocketQError to refuse it with its code.
RequestValidator: TypeAlias = Callable[[RemotingCommand, Channel], None]
# Changes a request just before it leaves (a client's signer): RocketMQ's client RPCHook.
RequestHook: TypeAlias = Callable[[RemotingCommand], None]

_H = TypeVar("_H", bound=Callable[..., Any])
_RUNS_ATTR = "__rocketq_runs_handler__"


def handles_runs(method_name: str) -> Callable[[_H], _H]:
    """Mark a processor method whose object also has a `BatchHandler` called `method_name`.

    Registering the bound method (``register_processor(code, obj.process)``) then registers
    ``obj.<method_name>`` for runs of that code too, so the one registration table stays the
    only place that routes codes. The batch handler must act exactly as the single handler
    called on each request in order (the same stored effects and responses); it is what lets
    a processor amortise per-request work over everything one read delivered.
    """

    def mark(fn: _H) -> _H:
        setattr(fn, _RUNS_ATTR, method_name)
        return fn

    return mark


def _runs_handler_of(handler: Handler) -> BatchHandler | None:
    # A bound method forwards attribute reads to its function, where `handles_runs` left the name.
    name = getattr(handler, _RUNS_ATTR, None)
    owner = getattr(handler, "__self__", None)
    if name is None or owner is None:
        return None
    runs: BatchHandler = getattr(owner, name)
    return runs


def handles_runs_of(handler: Handler) -> bool:
    """Whether registering ``handler`` also registers a batch handler (``handles_runs``)."""
    return _runs_handler_of(handler) is not None

def _guarded(handler: Handler, validator: RequestValidator) -> Handler:
    def guarded(request: RemotingCommand, channel: Channel) -> HandlerResult:
        validator(request, channel)  # a refusal raises: answered by _respond_error
        return handler(request, channel)

    return guarded


def _guarded_runs(runs: BatchHandler | None, validator: RequestValidator) -> BatchHandler | None:
    if runs is None:
        return None

    def guarded(requests: list[RemotingCommand], channel: Channel) -> Sequence[HandlerResult | BaseException]:
        refused: dict[int, BaseException] = {}
        for i, request in enumerate(requests):
            try:
                validator(request, channel)
            except RocketQError as e:
                refused[i] = e
        if not refused:
            return runs(requests, channel)
        passed = [r for i, r in enumerate(requests) if i not in refused]
        answers = iter(runs(passed, channel) if passed else ())
        return [refused[i] if i in refused else next(answers) for i in range(len(requests))]

    return guarded


# How often pending requests are checked against their deadlines while any are pending: a
# request fails at most this long after its deadline.
RESPONSE_SCAN_INTERVAL = 0.05
# Longest sleep of the housekeeping task when nothing is pending (it is woken early by a request).
IDLE_SCAN_INTERVAL = 1.0


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class RemotingEndpoint:
    """Base of RemotingServer and RemotingClient."""

    # Stop reading a peer's requests while our output to it is above the write high-water mark.
    pause_reading_when_unwritable = False

    def __init__(
        self,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        idle_timeout: float | None = None,
        socket_snd_buf_size: int = 0,
        socket_rcv_buf_size: int = 0,
        write_buffer_high_water_mark: int = 0,
        write_buffer_low_water_mark: int = 0,
    ) -> None:
        self.max_frame_length = max_frame_length
        self.idle_timeout = idle_timeout
        self._snd_buf = socket_snd_buf_size
        self._rcv_buf = socket_rcv_buf_size
        self._high_water = write_buffer_high_water_mark
        self._low_water = write_buffer_low_water_mark
        self._processors: dict[int, Handler] = {}
        self._run_processors: dict[int, BatchHandler] = {}
        self._default_processor: Handler | None = None
        self._channels: set[Channel] = set()
        self._waiting: set[Channel] = set()  # channels with requests awaiting a response
        self._close_listeners: list[CloseListener] = []
        self._inflight: set[asyncio.Future[RemotingCommand | None]] = set()
        self._housekeeper: asyncio.Task[None] | None = None
        self._sleeper: asyncio.Future[None] | None = None
        # Metrics: observer(request_code, response_code, seconds) once per answered request. Off
        # (None) costs one attribute test per dispatch; on, one clock read per dispatch or run.
        self._observer: RequestObserver | None = None
        self._t0 = 0.0
        # Set before processors are registered; None (the default) adds nothing to any dispatch.
        self._validator: RequestValidator | None = None
        # Read by Channel.start_request/invoke_oneway; None: requests leave as built.
        self.request_hook: RequestHook | None = None

    # -- registration ---------------------------------------------------------------------------

    def set_request_validator(self, validator: RequestValidator | None) -> None:
        """Check every request with ``validator`` before its handler (RocketMQ's server RPCHook).

        Call it before registering processors: each handler is wrapped as it is registered, so
        an endpoint without a validator dispatches exactly as before.
        """
        self._validator = validator

    def register_processor(self, code: int, handler: Handler) -> None:
        """Route requests of `code` to `handler` (and runs of them to its `handles_runs` partner)."""
        runs = _runs_handler_of(handler)
        if self._validator is not None:
            handler, runs = _guarded(handler, self._validator), _guarded_runs(runs, self._validator)
        self._processors[int(code)] = handler
        if runs is None:
            self._run_processors.pop(int(code), None)
        else:
            self._run_processors[int(code)] = runs

    def register_default_processor(self, handler: Handler) -> None:
        if self._validator is not None:
            handler = _guarded(handler, self._validator)
        self._default_processor = handler

    def set_request_observer(self, observer: RequestObserver | None) -> None:
        """Call ``observer(code, response_code, seconds)`` for every request answered (one-way: 0)."""
        self._observer = observer

    def on_channel_close(self, callback: CloseListener) -> None:
        """Call ``callback(channel)`` whenever a channel of this endpoint closes."""
        self._close_listeners.append(callback)

    @property
    def channels(self) -> frozenset[Channel]:
        return frozenset(self._channels)

    # -- dispatch -------------------------------------------------------------------------------

    def _dispatch(self, request: RemotingCommand, channel: Channel) -> None:
        if self._observer is not None:
            self._t0 = perf_counter()
        handler = self._processors.get(request.code, self._default_processor)
        if handler is None:
            remark = f" request type {request.code} not supported"
            log.warning("%s from %s", remark, channel.remote_address)
            self._respond(
                request, RemotingCommand.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark), channel
            )
            return
        try:
            result = handler(request, channel)
        except Exception as e:
            self._respond_error(request, channel, e)
            return
        if result is None:
            return
        if isinstance(result, RemotingCommand):
            self._respond(request, result, channel)
            return
        # An awaitable: only now pay for a Task.
        try:
            fut: asyncio.Future[RemotingCommand | None] = asyncio.ensure_future(result)
        except TypeError:
            self._respond_error(request, channel, TypeError(f"processor returned {type(result).__name__}"))
            return
        self._inflight.add(fut)
        fut.add_done_callback(partial(self._finish, request, channel, self._t0))

    def _reject(self, request: RejectedCommand, channel: Channel) -> None:
        """A request whose header held a bad value: answer it with the error, keep the connection."""
        log.debug("bad request header from %s, opaque=%s: %s", channel.remote_address, request.opaque,
                  request.remark)
        if request.flag & FLAG_ONEWAY:
            return
        error = request.error
        channel.send(RemotingCommand.response(error.code, str(error), opaque=request.opaque))

    def _dispatch_run(self, requests: list[RemotingCommand], channel: Channel, runs: BatchHandler) -> None:
        """Requests of one code with a batch handler, in the order they arrived."""
        if self._observer is not None:
            self._t0 = perf_counter()
        try:
            results = runs(requests, channel)
        except Exception as e:  # batch handlers answer per request; this one broke that contract
            for request in requests:
                self._respond_error(request, channel, e)
            return
        if len(results) != len(requests):
            err = RuntimeError(f"batch handler answered {len(results)} of {len(requests)} requests")
            log.error("process request run failed, code=%s: %s", requests[0].code, err)
            for request in requests:
                self._respond_error(request, channel, err)
            return
        respond = self._respond
        for request, result in zip(requests, results, strict=True):
            if result is None:
                continue
            if isinstance(result, RemotingCommand):
                respond(request, result, channel)
            elif isinstance(result, BaseException):
                self._respond_error(request, channel, result)
            else:
                try:
                    fut: asyncio.Future[RemotingCommand | None] = asyncio.ensure_future(result)
                except TypeError:
                    self._respond_error(
                        request, channel, TypeError(f"processor returned {type(result).__name__}"))
                    continue
                self._inflight.add(fut)
                fut.add_done_callback(partial(self._finish, request, channel, self._t0))

    def _finish(
        self,
        request: RemotingCommand,
        channel: Channel,
        started: float,
        fut: asyncio.Future[RemotingCommand | None],
    ) -> None:
        self._inflight.discard(fut)
        self._t0 = started  # the observer measures from this request's own dispatch
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self._respond_error(request, channel, exc)
            return
        response = fut.result()
        if response is not None:
            self._respond(request, response, channel)

    def _respond(self, request: RemotingCommand, response: RemotingCommand, channel: Channel) -> None:
        observer = self._observer
        if request.flag & FLAG_ONEWAY:
            if observer is not None:
                observer(request.code, 0, perf_counter() - self._t0)
            return
        if observer is not None:
            observer(request.code, response.code, perf_counter() - self._t0)
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        try:
            channel.send(response)
        except RocketQError as e:  # the response itself cannot be encoded
            log.error("encode response to %s failed: %s", channel.remote_address, e)
            # The request's own members were validated at decode, so this plain answer encodes.
            channel.send(request.make_response(ResponseCode.SYSTEM_ERROR, f"cannot encode the response: {e}"))

    def _respond_error(self, request: RemotingCommand, channel: Channel, exc: BaseException) -> None:
        if isinstance(exc, RocketQError):
            code, remark = exc.code, str(exc) or type(exc).__name__
            log.debug("process request code %s from %s: %s", request.code, channel.remote_address, exc)
        else:
            code, remark = ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__
            log.error(
                "process request exception, code=%s from %s",
                request.code,
                channel.remote_address,
                exc_info=exc,
            )
        self._respond(request, RemotingCommand.response(code, remark), channel)

    # -- channel lifecycle ----------------------------------------------------------------------

    def _configure_transport(self, transport: asyncio.Transport) -> None:
        if self._high_water > 0:
            low = self._low_water if self._low_water > 0 else None
            transport.set_write_buffer_limits(high=self._high_water, low=low)
        sock = transport.get_extra_info("socket")
        if sock is None:
            return
        try:
            if self._snd_buf > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._snd_buf)
            if self._rcv_buf > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._rcv_buf)
        except OSError as e:
            log.warning("set socket buffer sizes failed: %s", e)

    def _channel_opened(self, channel: Channel) -> None:
        self._channels.add(channel)
        self._ensure_housekeeper()

    def _channel_closed(self, channel: Channel, exc: Exception | None) -> None:
        self._channels.discard(channel)
        self._waiting.discard(channel)
        log.info("close the connection to remote address[%s] (%s)", channel.remote_address, exc or "closed")
        for listener in self._close_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("channel close listener failed for %s", channel.remote_address)

    # -- housekeeping -----------------------------------------------------------------------------

    def _track(self, channel: Channel) -> None:
        """A request on ``channel`` now awaits a response: make sure the scan watches it."""
        self._waiting.add(channel)
        sleeper = self._sleeper
        if sleeper is not None:
            self._sleeper = None
            _wake(sleeper)

    def _ensure_housekeeper(self) -> None:
        if self._housekeeper is None or self._housekeeper.done():
            self._housekeeper = asyncio.get_running_loop().create_task(self._housekeeping())

    async def _housekeeping(self) -> None:
        loop = asyncio.get_running_loop()
        idle = self.idle_timeout
        idle_every = min(IDLE_SCAN_INTERVAL, idle / 4) if idle else IDLE_SCAN_INTERVAL
        next_idle_scan = loop.time() + idle_every
        while True:
            if self._waiting:
                await asyncio.sleep(RESPONSE_SCAN_INTERVAL)
            else:
                # Sleep long, but let the first new request wake us so its deadline is watched.
                sleeper = loop.create_future()
                self._sleeper = sleeper
                handle = loop.call_later(max(0.0, next_idle_scan - loop.time()), _wake, sleeper)
                try:
                    await sleeper
                finally:
                    handle.cancel()
                    self._sleeper = None
            now = loop.time()
            if self._waiting:
                for channel in list(self._waiting):
                    if not channel._expire(now):
                        self._waiting.discard(channel)
            if now >= next_idle_scan:
                next_idle_scan = now + idle_every
                if idle:
                    self._close_idle(now, idle)

    def _close_idle(self, now: float, idle: float) -> None:
        for channel in list(self._channels):
            if now - channel.last_read > idle:
                log.warning("IDLE exception [%s], close the channel", channel.remote_address)
                channel.close()

    async def _stop_housekeeper(self) -> None:
        task, self._housekeeper = self._housekeeper, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
