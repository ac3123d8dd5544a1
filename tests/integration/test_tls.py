"""TLS on the name server and broker ports (tls.server.mode): in permissive mode (the default) TLS
and plain clients share a port, enforcing refuses plain ones, and a certificate the client does not
trust (another CA, or expired) fails with a message that says so. Certificates are made at test
time with the openssl command line; no key is ever committed."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.harness import SMALL_STORE, Cluster, start_cluster, unique_name, wait_until
from tests.wire import create_topic, get_max_offset, get_route, send_message

from rocketq.client.message import Message
from rocketq.client.producer import Producer
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import RemotingConnectError, RemotingError
from rocketq.remoting import RemotingClient
from rocketq.remoting.tls import client_context

pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    expired_cert: Path
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("certs")
    _ca(d, "ca")
    _ca(d, "other")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, days in (("server", "2"), ("expired", "-1")):
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", days, "-extfile", "ext.cnf", cwd=d)
    return Certs(d / "ca.pem", d / "server.pem", d / "server.key", d / "expired.pem", d / "other.pem")


def _tls_flags(cert: Path, key: Path, *more: str) -> tuple[str, ...]:
    return ("--set", f"tls.server.certPath={cert}", "--set", f"tls.server.keyPath={key}", *more)


@pytest.fixture(scope="module")
def permissive(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("tls-permissive"), *SMALL_STORE,
                      *_tls_flags(certs.server_cert, certs.server_key))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def enforcing(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # The broker reaches its (also enforcing) name server over TLS: tls.enable.
    c = start_cluster(tmp_path_factory.mktemp("tls-enforcing"), *SMALL_STORE,
                      *_tls_flags(certs.server_cert, certs.server_key, "--set", "tls.server.mode=enforcing",
                                  "--set", "tls.enable=true"))
    try:
        yield c
    finally:
        c.stop()


def _tls_client(ca: Path) -> RemotingClient:
    client = RemotingClient()
    client.ssl_context = client_context(ca_file=str(ca))
    return client


async def _roundtrip(client: RemotingClient, cluster: Cluster) -> None:
    topic = unique_name("TlsT")
    assert (await create_topic(client, cluster.broker, topic)).code == ResponseCode.SUCCESS
    assert (await send_message(client, cluster.broker, topic, b"over tls", queue_id=1)).code == 0
    assert await get_max_offset(client, cluster.broker, topic, 1) == 1
    await wait_until(lambda: get_route(client, cluster.namesrv, topic), timeout=15)


async def test_permissive_serves_tls_and_plain_on_one_port(permissive: Cluster, certs: Certs) -> None:
    async with _tls_client(certs.ca) as tls:
        await _roundtrip(tls, permissive)
        assert tls.channels and all(c._transport.get_extra_info("ssl_object") for c in tls.channels)
    async with RemotingClient() as plain:
        await _roundtrip(plain, permissive)


async def test_the_sdk_produces_over_tls(permissive: Cluster, certs: Certs) -> None:
    topic = unique_name("TlsSdk")
    async with _tls_client(certs.ca) as admin:
        assert (await create_topic(admin, permissive.broker, topic)).code == 0
        await wait_until(lambda: get_route(admin, permissive.namesrv, topic), timeout=15)
    producer = Producer(unique_name("PG"), namesrv_addr=permissive.namesrv, tls=True,
                        tls_ca_file=str(certs.ca))
    await producer.start()
    try:
        result = await producer.send(Message(topic, b"sdk over tls"))
    finally:
        await producer.shutdown()
    assert result.status.name == "SEND_OK"


def test_openssl_s_client_completes_a_verified_handshake(permissive: Cluster, certs: Certs) -> None:
    for addr in (permissive.namesrv, permissive.broker):
        done = subprocess.run(
            ["openssl", "s_client", "-connect", addr, "-CAfile", str(certs.ca), "-verify_return_error",
             "-servername", "localhost"],
            input=b"", capture_output=True, timeout=30)
        out = done.stdout.decode(errors="replace")
        assert done.returncode == 0, out + done.stderr.decode(errors="replace")
        assert "Verify return code: 0 (ok)" in out


async def test_an_untrusted_certificate_fails_clearly(permissive: Cluster, certs: Certs) -> None:
    async with _tls_client(certs.other_ca) as client:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        with pytest.raises(RemotingConnectError, match=r"TLS handshake.*certificate verify failed"):
            await client.invoke(permissive.namesrv, request, 5.0)


async def test_an_expired_certificate_fails_clearly(certs: Certs, tmp_path: Path) -> None:
    from rocketq.remoting import RemotingServer
    from rocketq.remoting.tls import server_context

    server = RemotingServer("127.0.0.1", [0], ssl_context=server_context(str(certs.expired_cert),
                                                                         str(certs.server_key)))
    server.register_processor(RequestCode.GET_BROKER_CLUSTER_INFO,
                              lambda req, ch: req.make_response(ResponseCode.SUCCESS))
    await server.start()
    try:
        async with _tls_client(certs.ca) as client:
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            with pytest.raises(RemotingConnectError, match="certificate has expired"):
                await client.invoke(f"127.0.0.1:{server.bound_ports[0]}", request, 5.0)
    finally:
        await server.stop()


async def test_enforcing_refuses_plain_clients(enforcing: Cluster, certs: Certs) -> None:
    async with _tls_client(certs.ca) as tls:
        await _roundtrip(tls, enforcing)  # the broker registered with its name server over TLS
    async with RemotingClient() as plain:
        for addr in (enforcing.namesrv, enforcing.broker):
            with pytest.raises(RemotingError):
                await plain.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5.0)


async def test_a_silent_peer_does_not_block_others(permissive: Cluster, certs: Certs) -> None:
    # A connection that never sends its first byte must not hold up the ones behind it.
    _, writer = await asyncio.open_connection(*permissive.broker.rsplit(":", 1))
    try:
        async with _tls_client(certs.ca) as tls:
            await _roundtrip(tls, permissive)
    finally:
        writer.close()
