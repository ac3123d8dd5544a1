"""The official C++ client (SetProducerSessionCredentials) and ali-ons (accessKey/secretKey) sign
their requests; against a broker with aclEnable=true they produce and consume with a valid account,
and a wrong secret, an unknown key or a missing permission is refused with nothing stored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.harness import SMALL_STORE, ClientRunner, Cluster, assert_client_ok, start_cluster, unique_name
from tests.wire import create_topic, get_max_offset, get_route

from rocketq.acl import RequestSigner, SessionCredentials
from rocketq.remoting import RemotingClient

pytestmark = [pytest.mark.compat, pytest.mark.timeout(120)]

ADMIN = SessionCredentials("compatAdmin", "compatAdminSecret")
APP = SessionCredentials("compatApp1", "compatAppSecret")

PLAIN_ACL = f"""\
accounts:
- accessKey: {ADMIN.access_key}
  secretKey: {ADMIN.secret_key}
  admin: true
- accessKey: {APP.access_key}
  secretKey: {APP.secret_key}
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - CompatAcl.*=DENY
"""


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("compat-acl")
    (tmp / "data" / "conf").mkdir(parents=True)
    (tmp / "data" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    c = start_cluster(tmp, *SMALL_STORE, "--set", "aclEnable=true")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def cluster(acl_cluster: Cluster) -> Cluster:
    """What the `cpp` and `ali_ons` fixtures run against: the ACL cluster of this module."""
    return acl_cluster


async def _admin_topic(cluster: Cluster, topic: str, app_perm: str | None) -> None:
    """Create ``topic`` as the admin and, if asked, give the app account ``app_perm`` on it."""
    async with RemotingClient() as rc:
        rc.request_hook = RequestSigner(ADMIN)
        assert (await create_topic(rc, cluster.broker, topic)).code == 0
        for _ in range(100):
            if await get_route(rc, cluster.namesrv, topic):
                break
            await asyncio.sleep(0.2)
        if app_perm is not None:
            from rocketq.codec.codes import RequestCode
            from rocketq.codec.command import RemotingCommand

            grant = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": APP.access_key, "topicPerms": f"{topic}={app_perm}"})
            assert (await rc.invoke(cluster.broker, grant, 5.0)).code == 0


async def _stored(cluster: Cluster, topic: str) -> int:
    async with RemotingClient() as rc:
        rc.request_hook = RequestSigner(ADMIN)
        return sum([await get_max_offset(rc, cluster.broker, topic, q) for q in range(4)])


def _keys(creds: SessionCredentials) -> tuple[str, ...]:
    return ("--access-key", creds.access_key, "--secret-key", creds.secret_key)


REFUSED = [
    (SessionCredentials(APP.access_key, "notTheSecret"), None,
     f"Check signature failed for accessKey={APP.access_key}"),
    (SessionCredentials("unknownKey9", "whatever99"), None, "No acl config for unknownKey9"),
    (APP, "SUB", "No default permission for topic:"),
]
REFUSED_IDS = ["wrong-secret", "unknown-key", "missing-permission"]


def test_cpp_client_with_credentials_produces_and_consumes(cpp: ClientRunner, cluster: Cluster) -> None:
    topic, group = unique_name("CppAcl"), unique_name("CppAclGroup")
    asyncio.run(_admin_topic(cluster, topic, "PUB|SUB"))
    sent = assert_client_ok(cpp("produce", topic, group, 6, *_keys(APP)), cluster)
    assert len(sent.of("sent")) == 6
    got = assert_client_ok(cpp("consume", topic, group, 6, *_keys(APP)), cluster)
    assert {r["body"] for r in got.of("received")} == {s["body"] for s in sent.of("sent")}


@pytest.mark.parametrize(("creds", "grant", "remark"), REFUSED, ids=REFUSED_IDS)
def test_cpp_client_is_refused(cpp: ClientRunner, cluster: Cluster, tmp_path: Path,
                               creds: SessionCredentials, grant: str | None, remark: str) -> None:
    topic = unique_name("CppAclNo")
    asyncio.run(_admin_topic(cluster, topic, grant))
    run = cpp("produce", topic, unique_name("G"), 2, *_keys(creds), timeout=20)
    assert run.returncode != 0 and not run.of("sent"), run.describe()
    # The binding's exception only says the sends failed; the library logs each answer it got.
    logs = "".join(p.read_text(errors="replace")
                   for p in (tmp_path / "cpp-home" / "logs" / "rocketmq-cpp").glob("*.log*"))
    assert f"remark:{remark}" in logs and "error code:16" in logs, run.describe()
    assert asyncio.run(_stored(cluster, topic)) == 0


def test_ali_ons_with_credentials_produces_and_consumes(ali_ons: ClientRunner, cluster: Cluster) -> None:
    topic, group = unique_name("AliAcl"), unique_name("AliAclGroup")
    asyncio.run(_admin_topic(cluster, topic, "PUB|SUB"))
    run = assert_client_ok(ali_ons("roundtrip", topic, group, 8, *_keys(APP)), cluster)
    assert len(run.of("sent")) == 8
    assert {r["body"] for r in run.of("received")} == {s["body"] for s in run.of("sent")}


@pytest.mark.parametrize(("creds", "grant", "remark"), REFUSED, ids=REFUSED_IDS)
def test_ali_ons_is_refused(ali_ons: ClientRunner, cluster: Cluster, creds: SessionCredentials,
                            grant: str | None, remark: str) -> None:
    topic = unique_name("AliAclNo")
    asyncio.run(_admin_topic(cluster, topic, grant))
    run = ali_ons("produce", topic, unique_name("G"), 2, *_keys(creds), timeout=20)
    assert run.returncode != 0 and not run.of("sent"), run.describe()
    errors = run.of("sendError")
    assert errors and all(e["code"] == 16 and remark in e["message"] for e in errors), run.describe()
    assert asyncio.run(_stored(cluster, topic)) == 0
