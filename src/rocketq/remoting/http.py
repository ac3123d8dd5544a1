"""A tiny HTTP/1.1 responder for ``GET /metrics``, on the server's own event loop (no thread of its own).

Prometheus scrapes every 15 s or so; a full HTTP stack would be a heavy dependency for one
read-only page. This speaks just enough HTTP/1.1 for scrapers, curl and browsers: GET and HEAD,
keep-alive and pipelining, Content-Length bodies, clear 4xx answers for everything else, and a
bounded request head so a misbehaving peer cannot make the server buffer without limit.

It also holds :class:`RequestStats`, the per-request observer a remoting server calls with
(request code, response code, seconds); it appends to two typed arrays per request and folds
them with numpy every 64 Ki requests or when scraped, so serving pays next to nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rocketq.codec.codes import RequestCode, ResponseCode

__all__ = [
    "RPC_LATENCY_BUCKETS_MS",
    "HttpResponder",
    "MetricsEndpoint",
    "RequestObserver",
    "RequestStats",
    "Route",
    "request_metric_families",
]

log = logging.getLogger("rocketq.remoting.http")

# A route answers (body, content type), or an awaitable of it; it runs on the loop, so it must not
# block (an awaitable route can hand the heavy part to a worker thread).
Route = Callable[[], tuple[bytes, str] | Awaitable[tuple[bytes, str]]]
# What a remoting server calls once per answered request: (request code, response code, seconds
# from dispatch to the response being written).
RequestObserver = Callable[[int, int, float], None]

MAX_HEAD_BYTES = 16 * 1024
MAX_PIPELINED = 16  # requests parsed ahead of their answers before we stop reading
IDLE_TIMEOUT = 60.0
_REASONS = {
    200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 413: "Content Too Large", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 505: "HTTP Version Not Supported",
}
_TEXT = "text/plain; charset=utf-8"


class HttpResponder:
    """Serves ``routes`` (path -> :data:`Route`) over HTTP/1.1 on ``host:port`` (0: a free port)."""

    def __init__(self, routes: Mapping[str, Route], host: str = "127.0.0.1", port: int = 0, *,
                 idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.routes = dict(routes)
        self.host = host
        self.port = port
        self.idle_timeout = idle_timeout
        self._server: asyncio.Server | None = None
        self._conns: set[_HttpProtocol] = set()

    @property
    def is_serving(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        """``host:port`` to scrape (the bound port once started; a wildcard host reads as loopback)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        if host == "::":
            host = "::1"
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("HttpResponder already started")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _HttpProtocol(self), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics http server listening on %s", self.address)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for conn in list(self._conns):
            conn.close()
        await server.wait_closed()
        log.info("metrics http server on %s stopped", self.address)

    async def respond(self, method: str, target: str) -> tuple[int, bytes, str, dict[str, str]]:
        """(status, body, content type, extra headers) for one request head; never raises."""
        path = target.split("?", 1)[0].split("#", 1)[0] or "/"
        route = self.routes.get(path)
        if route is None:
            return 404, f"not found: {path}\n".encode(errors="replace"), _TEXT, {}
        if method not in ("GET", "HEAD"):
            return 405, b"only GET and HEAD\n", _TEXT, {"Allow": "GET, HEAD"}
        try:
            result = route()
            if inspect.isawaitable(result):
                result = await result
            body, ctype = result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("metrics route %s failed", path)
            return 500, f"{type(exc).__name__}\n".encode(), _TEXT, {}
        return 200, body, ctype, {}


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    target: str
    keep_alive: bool


@dataclass(frozen=True, slots=True)
class _Refusal:
    status: int
    text: str


class _HttpProtocol(asyncio.Protocol):
    """One connection: parse heads as they complete, answer them in order, one at a time (a route
    may await), close after an error or ``Connection: close``."""

    def __init__(self, responder: HttpResponder) -> None:
        self._responder = responder
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._skip = 0  # body bytes of the current request still to discard
        self._idle: asyncio.TimerHandle | None = None
        self._queue: deque[_Request | _Refusal] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._paused = False
        self._done_parsing = False  # after a refusal or Connection: close nothing more is read
        self._closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport
        self._responder._conns.add(self)
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._responder._conns.discard(self)
        if self._idle is not None:
            self._idle.cancel()
        if self._worker is not None:
            self._worker.cancel()
        self._transport = None

    def close(self) -> None:
        if self._transport is not None and not self._closing:
            self._closing = True
            self._transport.close()

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(self._responder.idle_timeout, self.close)

    def data_received(self, data: bytes) -> None:
        if self._closing or self._done_parsing:
            return
        self._arm_idle()
        self._buf += data
        while not self._done_parsing:
            if self._skip:
                n = min(self._skip, len(self._buf))
                del self._buf[:n]
                self._skip -= n
                if self._skip:
                    break
            end = self._buf.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEAD_BYTES:
                if len(self._buf) > MAX_HEAD_BYTES:
                    self._enqueue(_Refusal(431, "request head too large"))
                break
            head = bytes(self._buf[:end])
            del self._buf[: end + 4]
            self._enqueue(self._parse(head))
        if len(self._queue) >= MAX_PIPELINED and self._transport is not None and not self._paused:
            self._paused = True  # a client pipelining without reading: stop reading it too
            self._transport.pause_reading()
        if self._queue and (self._worker is None or self._worker.done()):
            self._worker = asyncio.get_running_loop().create_task(self._answer())

    def _enqueue(self, item: _Request | _Refusal) -> None:
        self._queue.append(item)
        if isinstance(item, _Refusal) or not item.keep_alive:
            self._done_parsing = True

    def _parse(self, head: bytes) -> _Request | _Refusal:
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            headers = _parse_headers(lines[1:])
        except ValueError:
            return _Refusal(400, "malformed request")
        if not version.startswith("HTTP/1."):
            return _Refusal(505, "HTTP/1.x only")
        if "transfer-encoding" in headers:
            return _Refusal(501, "request bodies are not supported")
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            return _Refusal(400, "bad Content-Length")
        if not 0 <= length <= MAX_HEAD_BYTES:
            return _Refusal(413, "request body too large")
        self._skip = length
        conn = headers.get("connection", "").lower()
        keep_alive = "close" not in conn if version == "HTTP/1.1" else "keep-alive" in conn
        return _Request(method, target, keep_alive)

    async def _answer(self) -> None:
        while self._queue and self._transport is not None:
            item = self._queue.popleft()
            if isinstance(item, _Refusal):
                self._send(item.status, (item.text + "\n").encode(), _TEXT, {}, keep_alive=False,
                           head_only=False)
                return
            status, body, ctype, extra = await self._responder.respond(item.method, item.target)
            self._send(status, body, ctype, extra, keep_alive=item.keep_alive,
                       head_only=item.method == "HEAD")
            if self._paused and len(self._queue) < MAX_PIPELINED // 2 and self._transport is not None:
                self._paused = False
                self._transport.resume_reading()

    def _send(self, status: int, body: bytes, ctype: str, extra: Mapping[str, str], *,
              keep_alive: bool, head_only: bool) -> None:
        transport = self._transport
        if transport is None:
            return
        fields = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}",
            f"Content-Type: {ctype}",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-store",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
            *(f"{k}: {v}" for k, v in extra.items()),
        ]
        transport.write(("\r\n".join(fields) + "\r\n\r\n").encode("latin-1"))
        if not head_only and body:
            transport.write(body)
        if not keep_alive:
            self._closing = True
            transport.close()


def _parse_headers(lines: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"bad header line {line!r}")
        out[name.lower()] = value.strip()
    return out


# ---------------------------------------------------------------------------------------------
# Request statistics: counts and latency by request code, responses by response code.

# RocketMQ 5's rpc latency histogram is in milliseconds; these are its kind of bounds.
RPC_LATENCY_BUCKETS_MS: tuple[float, ...] = (1, 3, 5, 10, 50, 100, 500, 1000, 3000, 10000)
_FOLD_AT = 1 << 16
_RESP_MASK = (1 << 16) - 1


class RequestStats:
    """The :data:`RequestObserver` of a remoting server, and what it has seen.

    A call appends (request code, response code) as one int64 and the seconds as one double to two
    typed arrays: no Python objects are kept and no branch is taken. ``fold()`` reduces them with
    one searchsorted and one sort (numpy, over zero-copy views) into per-code histograms and
    per-(code, response code) counts; it runs every 64 Ki requests and before every read, so memory
    stays bounded whether or not anyone scrapes.
    """

    __slots__ = ("_keys", "_secs", "bounds_ms", "latency", "responses")

    def __init__(self, bounds_ms: Iterable[float] = RPC_LATENCY_BUCKETS_MS) -> None:
        self.bounds_ms = tuple(sorted(bounds_ms))
        self._keys = array("q")
        self._secs = array("d")
        # (request code, response code) -> responses
        self.responses: dict[tuple[int, int], int] = {}
        # request code -> (bucket counts, non-cumulative, the last one +Inf; [sum of seconds])
        self.latency: dict[int, tuple[list[int], list[float]]] = {}

    def observe(self, code: int, response_code: int, seconds: float) -> None:
        """The observer: hand the server this bound method (cheaper to call than the instance)."""
        self._keys.append((code << 16) | (response_code & _RESP_MASK))
        secs = self._secs
        secs.append(seconds)
        if len(secs) >= _FOLD_AT:
            self.fold()

    __call__ = observe

    def fold(self) -> None:
        keys_buf, secs_buf = self._keys, self._secs
        if not secs_buf:
            return
        self._keys, self._secs = array("q"), array("d")
        keys = np.frombuffer(keys_buf, dtype=np.int64)
        secs = np.maximum(np.frombuffer(secs_buf, dtype=np.float64), 0.0)  # a clock that stepped back
        nb = len(self.bounds_ms) + 1
        # bucket i holds values <= bounds[i] (Prometheus's "le"); the last one everything above
        idx = np.searchsorted(np.asarray(self.bounds_ms, dtype=np.float64), secs * 1000.0, side="left")
        combos, inverse, counts = np.unique(keys * nb + idx, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=secs)
        for combo, n, total in zip(combos.tolist(), counts.tolist(), sums.tolist(), strict=True):
            key, bucket = divmod(combo, nb)
            code, resp = key >> 16, _signed16(key & _RESP_MASK)
            self.responses[(code, resp)] = self.responses.get((code, resp), 0) + n
            entry = self.latency.get(code)
            if entry is None:
                entry = self.latency[code] = ([0] * nb, [0.0])
            entry[0][bucket] += n
            entry[1][0] += total

    def snapshot(self) -> RequestStats:
        """A folded copy, safe to read in another thread while this one keeps observing."""
        self.fold()
        copy = RequestStats(self.bounds_ms)
        copy.responses = dict(self.responses)
        copy.latency = {code: (list(b), list(t)) for code, (b, t) in self.latency.items()}
        return copy

    def request_count(self, code: int) -> int:
        self.fold()
        entry = self.latency.get(code)
        return sum(entry[0]) if entry is not None else 0

    def iter_responses(self) -> Iterator[tuple[int, int, int]]:
        """(request code, response code, count), folding first."""
        self.fold()
        for (code, resp), n in sorted(self.responses.items()):
            yield code, resp, n


def _signed16(v: int) -> int:
    return v - (1 << 16) if v & 0x8000 else v


def _code_label(enum_cls: Any, code: int) -> str:
    try:
        return str(enum_cls(code).name).lower()
    except ValueError:
        return str(code)


class MetricsEndpoint:
    """A Prometheus registry of ``collectors`` and the process's own series, served at /metrics
    (prometheus_client is imported here, not at module import: only servers that export need it)."""

    def __init__(self, *collectors: Any) -> None:
        from prometheus_client import CollectorRegistry
        from prometheus_client.process_collector import ProcessCollector

        self.registry = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        self.endpoint: HttpResponder | None = None

    @property
    def address(self) -> str | None:
        ep = self.endpoint
        return ep.address if ep is not None and ep.is_serving else None

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    async def start(self, host: str, port: int) -> None:
        self.endpoint = HttpResponder({"/metrics": self.render}, host, port)
        await self.endpoint.start()

    async def stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop()


def request_metric_families(stats: RequestStats, labels: Mapping[str, str]) -> list[Any]:
    """Prometheus families of ``stats``: ``rocketmq_rpc_latency`` (histogram, ms, by request
    code) and ``rocketmq_rpc_responses_total`` (by request code and response code)."""
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

    names = list(labels)
    values = list(labels.values())
    responses = CounterMetricFamily(
        "rocketmq_rpc_responses", "Requests answered, by request code and response code",
        labels=[*names, "protocol_type", "request_code", "response_code"])
    for code, resp, n in stats.iter_responses():
        responses.add_metric([*values, "remoting", _code_label(RequestCode, code),
                              _code_label(ResponseCode, resp)], n)
    latency = HistogramMetricFamily(
        "rocketmq_rpc_latency", "Time from dispatch to response written, in milliseconds",
        labels=[*names, "protocol_type", "request_code"], unit="")
    les = [_le(b) for b in stats.bounds_ms] + ["+Inf"]
    for code, (counts, total) in sorted(stats.latency.items()):
        cumulative, running = [], 0
        for le, c in zip(les, counts, strict=True):
            running += c
            cumulative.append((le, running))
        latency.add_metric([*values, "remoting", _code_label(RequestCode, code)], cumulative,
                           sum_value=total[0] * 1000.0)
    return [responses, latency]


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))
