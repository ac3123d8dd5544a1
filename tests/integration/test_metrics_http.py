"""The metrics plumbing in-process: the HTTP responder over real sockets, RequestStats' folding,
the exposition of both, and the flush histogram."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketq.broker.metrics import LatencyHistogram
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.remoting.http import MAX_HEAD_BYTES, HttpResponder, RequestStats, request_metric_families

pytestmark = pytest.mark.timeout(30)


async def _exchange(port: int, data: bytes, *, until_close: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        if until_close:
            return await asyncio.wait_for(reader.read(), 5)
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


@pytest.fixture
async def responder():  # type: ignore[no-untyped-def]
    calls = []

    def metrics() -> tuple[bytes, str]:
        calls.append(1)
        return b"m 1\n", "text/plain; version=0.0.4"

    def broken() -> tuple[bytes, str]:
        raise RuntimeError("boom")

    r = HttpResponder({"/metrics": metrics, "/broken": broken}, "127.0.0.1", 0)
    await r.start()
    r.calls = calls  # type: ignore[attr-defined]
    yield r
    await r.stop()


async def test_get_head_and_keep_alive_pipelining(responder: HttpResponder) -> None:
    assert responder.port > 0 and responder.address == f"127.0.0.1:{responder.port}"
    two = (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
           b"HEAD /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw = await _exchange(responder.port, two)
    first, _, rest = raw.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 OK")
    assert b"Content-Length: 4" in first and b"Connection: keep-alive" in first
    assert rest.startswith(b"m 1\nHTTP/1.1 200 OK")
    assert rest.endswith(b"Connection: close\r\n\r\n")  # HEAD: headers only
    assert len(responder.calls) == 2  # type: ignore[attr-defined]


async def test_errors_are_answered_and_close(responder: HttpResponder) -> None:
    raw = await _exchange(responder.port, b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 404 ")
    raw = await _exchange(responder.port, b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n"
                                          b"Connection: close\r\n\r\nabc")
    assert raw.startswith(b"HTTP/1.1 405 ") and b"Allow: GET, HEAD" in raw
    raw = await _exchange(responder.port, b"GET /broken HTTP/1.0\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 500 ") and b"RuntimeError" in raw
    raw = await _exchange(responder.port, b"garbage\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400 ")
    raw = await _exchange(responder.port, b"GET /metrics SPDY/3\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 505 ")
    raw = await _exchange(responder.port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD_BYTES + 10))
    assert raw.startswith(b"HTTP/1.1 431 ")
    # the server is still fine after all that
    raw = await _exchange(responder.port, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 ")


async def test_stop_closes_idle_keep_alive_connections(responder: HttpResponder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", responder.port)
    writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
    await reader.readuntil(b"m 1\n")
    await responder.stop()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    assert not responder.is_serving


def test_request_stats_fold_counts_and_buckets() -> None:
    stats = RequestStats(bounds_ms=(1, 10, 100))
    send, pull = int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.PULL_MESSAGE)
    for seconds in (0.0005, 0.001, 0.005, 0.05, 2.0):
        stats(send, int(ResponseCode.SUCCESS), seconds)
    stats(send, int(ResponseCode.SYSTEM_ERROR), 0.0002)
    stats(pull, int(ResponseCode.PULL_NOT_FOUND), 15.0)
    stats(99999, 1, -1.0)  # unknown code, clock went backwards: counted, as 0 s
    assert stats.request_count(send) == 6
    counts, total = stats.latency[send]
    # le=1 ms: 0.5, 1.0, 0.2 ; le=10: 5 ; le=100: 50 ; +Inf: 2000
    assert counts == [3, 1, 1, 1]
    assert total[0] == pytest.approx(0.0005 + 0.001 + 0.005 + 0.05 + 2.0 + 0.0002, rel=1e-3)
    assert dict(((c, r), n) for c, r, n in stats.iter_responses()) == {
        (send, 0): 5, (send, int(ResponseCode.SYSTEM_ERROR)): 1,
        (pull, int(ResponseCode.PULL_NOT_FOUND)): 1, (99999, 1): 1,
    }


def test_request_stats_fold_by_itself_past_the_threshold() -> None:
    stats = RequestStats()
    observe = stats.observe
    for _ in range(70_000):
        observe(10, 0, 0.0001)
    assert len(stats._secs) == 70_000 - 65_536  # folded once on the way, the rest still raw
    assert stats.latency[10][0][0] == 65_536
    assert stats.request_count(10) == 70_000


def test_request_families_render_as_prometheus_text() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    stats = RequestStats(bounds_ms=(1, 10))
    stats(int(RequestCode.SEND_MESSAGE_V2), 0, 0.002)
    stats(int(RequestCode.SEND_MESSAGE_V2), 0, 0.020)

    class C:
        def collect(self):  # type: ignore[no-untyped-def]
            return request_metric_families(stats, {"node_type": "broker"})

    reg = CollectorRegistry(auto_describe=False)
    reg.register(C())  # type: ignore[arg-type]
    text = generate_latest(reg).decode()
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(text) for s in f.samples}
    base = (("node_type", "broker"), ("protocol_type", "remoting"), ("request_code", "send_message_v2"))
    assert got[("rocketmq_rpc_latency_bucket", tuple(sorted((*base, ("le", "1")))))] == 0
    assert got[("rocketmq_rpc_latency_bucket", tuple(sorted((*base, ("le", "10")))))] == 1
    assert got[("rocketmq_rpc_latency_bucket", tuple(sorted((*base, ("le", "+Inf")))))] == 2
    assert got[("rocketmq_rpc_latency_count", base)] == 2
    assert got[("rocketmq_rpc_latency_sum", base)] == pytest.approx(22.0)
    assert got[("rocketmq_rpc_responses_total", tuple(sorted((*base, ("response_code", "success")))))] == 2


def test_latency_histogram_cumulative() -> None:
    h = LatencyHistogram((1, 10))
    for s in (0.0001, 0.001, 0.002, 0.5):
        h.observe(s)
    buckets, total = h.snapshot()
    assert buckets == [("1", 2), ("10", 3), ("+Inf", 4)]
    assert total == pytest.approx(503.1)


async def test_awaiting_routes_answer_pipelined_requests_in_order() -> None:
    async def slow() -> tuple[bytes, str]:
        await asyncio.sleep(0.2)
        return b"slow\n", "text/plain"

    r = HttpResponder({"/slow": slow, "/fast": lambda: (b"fast\n", "text/plain")}, "127.0.0.1", 0)
    await r.start()
    try:
        pipelined = b"GET /slow HTTP/1.1\r\n\r\nGET /fast HTTP/1.1\r\nConnection: close\r\n\r\n"
        raw = await _exchange(r.port, pipelined)
        assert raw.index(b"slow\n") < raw.index(b"fast\n")
        assert raw.count(b"HTTP/1.1 200 OK") == 2
    finally:
        await r.stop()


async def test_name_server_wires_the_request_observer_and_exports_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The observer hook as the remoting server will offer it: installed at start, exported at
    scrape, removed at shutdown."""
    import urllib.request

    from rocketq.config import NamesrvConfig
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting import RemotingServerConfig

    ctl = NamesrvController(NamesrvConfig(listen_port=0, metrics_port=0,
                                          kv_config_path=str(tmp_path / "kv.json")),
                            RemotingServerConfig(listen_port=0))
    installed: list[object] = []
    ctl.remoting_server.set_request_observer = installed.append  # type: ignore[attr-defined]
    await ctl.start()
    try:
        assert ctl.metrics_address is not None
        observe = installed[0]
        observe(int(RequestCode.GET_ROUTEINFO_BY_TOPIC), int(ResponseCode.TOPIC_NOT_EXIST), 0.004)  # type: ignore[operator]
        observe(int(RequestCode.GET_ROUTEINFO_BY_TOPIC), 0, 0.0001)  # type: ignore[operator]

        def get() -> str:
            with urllib.request.urlopen(f"http://{ctl.metrics_address}/metrics", timeout=5) as resp:
                return str(resp.read().decode())

        text = await asyncio.to_thread(get)
        got = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
        labels = {"node_type": "namesrv", "node_id": ctl.address, "protocol_type": "remoting",
                  "request_code": "get_routeinfo_by_topic"}
        assert got[("rocketmq_rpc_latency_count", tuple(sorted(labels.items())))] == 2
        err = tuple(sorted({**labels, "response_code": "topic_not_exist"}.items()))
        assert got[("rocketmq_rpc_responses_total", err)] == 1
    finally:
        await ctl.shutdown()
    assert installed[-1] is None  # removed again
    assert ctl.metrics_address is None
