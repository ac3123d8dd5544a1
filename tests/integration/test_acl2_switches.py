"""RocketMQ 5.3's switches on a real `rocketq up`: authenticationEnabled + authorizationEnabled
without aclEnable, the broker bootstrapped by initAuthenticationUser. The bootstrap super user
creates a normal user and its policy with `rocketq admin`; that user sends where the policy
allows and nowhere else; unsigned and wrongly signed requests are refused and store nothing;
GET_BROKER_CONFIG reports the switches but never the bootstrap password."""

from __future__ import annotations

import asyncio

import pytest
from tests.harness import SMALL_STORE, AdminRun, Cluster, module_cluster
from tests.wire import create_topic, get_max_offset, send_message, signed_client

from rocketq.acl import SessionCredentials
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand

pytestmark = pytest.mark.timeout(120)

ROOT = SessionCredentials("root", "rootBootPassword7")
BOB = SessionCredentials("bob", "bobPassword1")
TOPIC, OTHER = "Auth53Topic", "Auth53Other"

cluster = module_cluster(
    "acl2-switches", *SMALL_STORE, "--set", "authenticationEnabled=true",
    "--set", "authorizationEnabled=true",
    "--set", f'initAuthenticationUser={{"username":"{ROOT.access_key}","password":"{ROOT.secret_key}"}}')


async def _send(cluster: Cluster, creds: SessionCredentials | None, topic: str) -> RemotingCommand:
    async with signed_client(creds) as rc:
        return await send_message(rc, cluster.broker, topic, b"53", queue_id=0)


def test_bootstrap_user_switches_and_policies(cluster: Cluster, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    async def setup() -> str:
        async with signed_client(ROOT) as rc:
            for topic in (TOPIC, OTHER):
                assert (await create_topic(rc, cluster.broker, topic)).code == ResponseCode.SUCCESS
            get_config = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {})
            conf = await rc.invoke(cluster.broker, get_config, 5)
            return conf.body_bytes().decode()

    config_text = asyncio.run(setup())
    assert "authenticationEnabled=true" in config_text and "authorizationEnabled=true" in config_text
    assert ROOT.secret_key not in config_text

    admin = AdminRun(capsys, cluster.namesrv)
    b = ["-b", cluster.broker]
    monkeypatch.setenv("ROCKETQ_ACCESS_KEY", ROOT.access_key)
    monkeypatch.setenv("ROCKETQ_SECRET_KEY", ROOT.secret_key)
    assert admin.json("getUser", *b, "-u", "root")[cluster.broker]["userType"] == "Super"
    admin.json("createUser", *b, "-u", BOB.access_key, "-p", BOB.secret_key)
    admin.json("createAcl", *b, "-s", "User:bob", "-r", f"Topic:{TOPIC}", "-a", "Pub")

    assert asyncio.run(_send(cluster, BOB, TOPIC)).code == ResponseCode.SUCCESS
    refused = asyncio.run(_send(cluster, BOB, OTHER))
    assert refused.code == ResponseCode.NO_PERMISSION
    assert "User:bob has no permission to access Topic:Auth53Other" in (refused.remark or "")
    unsigned = asyncio.run(_send(cluster, None, TOPIC))
    assert (unsigned.code, unsigned.remark) == (ResponseCode.NO_PERMISSION, "username cannot be null.")
    wrong = asyncio.run(_send(cluster, SessionCredentials("bob", "notBobsPassword"), TOPIC))
    assert (wrong.code, wrong.remark) == (ResponseCode.NO_PERMISSION, "check signature failed.")

    async def stored() -> tuple[int, int]:
        async with signed_client(ROOT) as rc:
            return (await get_max_offset(rc, cluster.broker, TOPIC, 0),
                    await get_max_offset(rc, cluster.broker, OTHER, 0))
    assert asyncio.run(stored()) == (1, 0)
