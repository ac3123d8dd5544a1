"""Campaign: every request code the broker and the name server register, sent with missing and
garbage fields and bodies (issue 9 item 8).

Each request gets an answer with a response code (and a remark when it is not SUCCESS) on the
same connection, and the servers log no traceback and nothing at ERROR. The servers run in this
process so that the registration tables name exactly the codes to try and ``caplog`` holds
everything they logged.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
from campaign import GARBAGE_BODIES, GARBAGE_VALUES, KNOWN_ELSEWHERE, header_keys, random_ext, report
from tests.wire import create_topic, heartbeat, in_process_cluster, send_message

from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient, RemotingServer

pytestmark = pytest.mark.timeout(600)


def _registered(server: RemotingServer) -> list[int]:
    return sorted(server._processors)


Variant = tuple[dict[str, str] | None, bytes]


def _variants(keys: list[str], rnd: random.Random, random_rounds: int) -> list[Variant]:
    out: list[Variant] = [(None, b""), ({}, b"")]
    out += [({k: value for k in keys}, rnd.choice(GARBAGE_BODIES)) for value in GARBAGE_VALUES]
    out += [(random_ext(rnd, keys), rnd.choice(GARBAGE_BODIES)) for _ in range(random_rounds)]
    return out


async def _campaign(tmp_path: Path, caplog: pytest.LogCaptureFixture, random_rounds: int, name: str) -> None:
    caplog.set_level(logging.INFO)
    keys = header_keys()
    rnd = random.Random(9)
    sent = answered = refused = 0
    async with in_process_cluster(tmp_path) as (ns, broker, client):
        targets = [("broker", broker.address, broker.server), ("namesrv", ns.address, ns.remoting_server)]
        codes = {role: _registered(server) for role, _, server in targets}
        # Real names among the garbage let requests get past the lookups into the processors.
        assert (await create_topic(client, broker.address, "TopicTest")).code == ResponseCode.SUCCESS
        for q in range(4):
            sent_one = await send_message(client, broker.address, "TopicTest", b"m", queue_id=q, keys="K")
            assert sent_one.code == ResponseCode.SUCCESS
        assert (await heartbeat(client, broker.address, "127.0.0.1@1", producer_groups=["G"],
                                consumer_groups={"G": ["TopicTest"]})).code == 0
        for role, addr, _ in targets:
            for code in codes[role]:
                for ext, body in _variants(keys, rnd, random_rounds):
                    request = RemotingCommand.request(code, ext, body)
                    resp = await client.invoke(addr, request, 20)
                    sent += 1
                    assert resp.opaque == request.opaque
                    if resp.code == ResponseCode.SUCCESS:
                        answered += 1
                        continue
                    refused += 1
                    assert resp.remark, f"{role} code {code}: answer {resp.code} without a remark for {ext}"
        # Still serving normally: a route query and a send after all of that.
        async with RemotingClient() as fresh:
            resp = await fresh.invoke(broker.address, RemotingCommand.request(26), 5)  # GET_BROKER_CONFIG
            assert resp.code == ResponseCode.SUCCESS
    tracebacks = [r for r in caplog.records if r.exc_info]
    known = [r for r in tracebacks if r.getMessage().startswith(KNOWN_ELSEWHERE)]
    tracebacks = [r for r in tracebacks if r not in known]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    report(name, broker_codes=len(codes["broker"]), namesrv_codes=len(codes["namesrv"]),
           requests=sent, success=answered, refused=refused, error_lines=len(errors),
           tracebacks=len(tracebacks), known_elsewhere=len(known))
    assert not tracebacks, "\n\n".join(_describe(r) for r in tracebacks[:5])


def _describe(record: logging.LogRecord) -> str:
    exc = record.exc_info[1] if record.exc_info else None
    where = ""
    if exc is not None and exc.__traceback__ is not None:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    return f"{record.name}: {record.getMessage()}: {exc!r}{where}"


async def test_campaign_every_request_code_with_garbage(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    await _campaign(tmp_path, caplog, random_rounds=30, name="request_codes")


@pytest.mark.slow
async def test_campaign_every_request_code_with_garbage_slow(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    await _campaign(tmp_path, caplog, random_rounds=2000, name="request_codes_slow")
