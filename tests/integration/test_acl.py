"""ACL 1.0 against a real `rocketq up` with aclEnable on the broker and the name server: signed
clients produce and consume; a wrong secret, an unknown key, a missing permission and no signature
are refused with NO_PERMISSION and store nothing; `rocketq admin` manages accounts; the name server
refuses the route hijack (a REGISTER_BROKER of topic HijackT to 127.0.0.1:1)."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterator

import pytest
import yaml
from tests.harness import AdminRun, Cluster, start_acl_cluster, unique_name, wait_until
from tests.wire import create_topic, get_max_offset, get_route, send_message
from tests.wire import signed_client as signed

from rocketq.acl import SessionCredentials
from rocketq.aio import PushConsumer
from rocketq.client.consumer import ConsumeStatus
from rocketq.client.message import Message
from rocketq.client.producer import Producer
from rocketq.codec.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.errors import NoPermission

pytestmark = pytest.mark.timeout(120)

ADMIN = SessionCredentials("adminAccount", "adminSecret1")
APP = SessionCredentials("appAccount", "appSecret12")
INTRUDER = SessionCredentials("intruderAdmin", "intruderSecret")
TOPIC = "AclTopic"

PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
- accessKey: {ADMIN.access_key}
  secretKey: {ADMIN.secret_key}
  admin: true
- accessKey: {APP.access_key}
  secretKey: {APP.secret_key}
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - {TOPIC}=PUB|SUB
  - SubOnlyTopic=SUB
  groupPerms:
  - DeniedGroup=DENY
- accessKey: {INTRUDER.access_key}
  secretKey: {INTRUDER.secret_key}
  admin: true
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_acl_cluster(tmp_path_factory.mktemp("acl"), PLAIN_ACL)
    try:
        yield c
    finally:
        c.stop()


async def max_offsets(cluster: Cluster, topic: str) -> list[int]:
    async with signed(ADMIN) as rc:
        return [await get_max_offset(rc, cluster.broker, topic, q) for q in range(4)]


async def test_signed_clients_produce_and_consume(cluster: Cluster) -> None:
    async with signed(ADMIN) as rc:
        assert (await create_topic(rc, cluster.broker, TOPIC)).code == ResponseCode.SUCCESS
        await wait_until(lambda: get_route(rc, cluster.namesrv, TOPIC), timeout=15)
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, credentials=APP)
    await producer.start()
    try:
        for i in range(6):
            await producer.send(Message(TOPIC, f"m{i}".encode()))
    finally:
        await producer.shutdown()
    got: set[bytes] = set()

    def listener(msgs: list[object], ctx: object) -> ConsumeStatus:
        got.update(m.body for m in msgs)  # type: ignore[attr-defined]
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(unique_name("CG"), namesrv_addr=cluster.namesrv, credentials=APP,
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await wait_until(lambda: len(got) == 6, timeout=30)
    finally:
        await consumer.shutdown()
    assert got == {f"m{i}".encode() for i in range(6)}


@pytest.mark.parametrize(("creds", "topic", "remark"), [
    (SessionCredentials(APP.access_key, "wrongSecret1"), TOPIC,
     f"Check signature failed for accessKey={APP.access_key}"),
    (SessionCredentials("unknownKey1", "whatever1"), TOPIC, "No acl config for unknownKey1"),
    (APP, "SubOnlyTopic", "No default permission for topic:SubOnlyTopic"),
    (None, TOPIC, "No accessKey is configured"),
], ids=["wrong-secret", "unknown-key", "missing-permission", "unsigned"])
async def test_refused_sends_store_nothing(cluster: Cluster, creds: SessionCredentials | None, topic: str,
                                           remark: str) -> None:
    async with signed(ADMIN) as rc:
        assert (await create_topic(rc, cluster.broker, topic)).code == ResponseCode.SUCCESS
    before = await max_offsets(cluster, topic)
    async with signed(creds) as rc:
        response = await send_message(rc, cluster.broker, topic, b"refused", queue_id=0)
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == remark
    assert APP.secret_key not in (response.remark or "")
    assert await max_offsets(cluster, topic) == before


async def test_our_producer_sees_no_permission(cluster: Cluster) -> None:
    producer = Producer(unique_name("PG"), namesrv_addr=cluster.namesrv,
                        credentials=SessionCredentials(APP.access_key, "wrongSecret1"),
                        retry_times_when_send_failed=0)
    await producer.start()
    try:
        with pytest.raises(NoPermission, match="Check signature failed"):
            await producer.send(Message(TOPIC, b"x"))
    finally:
        await producer.shutdown()


def test_admin_manages_accounts(cluster: Cluster, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    admin = AdminRun(capsys, cluster.namesrv)
    new = ["-a", "tempAccount1", "-s", "tempSecret12", "-i", "PUB|SUB", "-u", "SUB"]
    denied = admin.fails("updateAclConfig", "-b", cluster.broker, *new)
    assert "No accessKey is configured" in denied
    as_app = ["--access-key", APP.access_key, "--secret-key", APP.secret_key]
    assert "Need admin permission for request code=50" in admin.fails(
        "updateAclConfig", "-b", cluster.broker, *new, *as_app)
    monkeypatch.setenv("ROCKETQ_ACCESS_KEY", ADMIN.access_key)
    monkeypatch.setenv("ROCKETQ_SECRET_KEY", ADMIN.secret_key)
    before = admin.json("clusterAclConfigVersion", "-b", cluster.broker)[0]["version"]["counter"]
    out = admin.json("updateAclConfig", "-b", cluster.broker, *new)
    assert out["brokers"] == [cluster.broker] and "tempSecret12" not in str(out)
    after = admin.json("clusterAclConfigVersion", "-b", cluster.broker)[0]["version"]["counter"]
    assert after == before + 1

    async def send_as_temp() -> int:
        async with signed(SessionCredentials("tempAccount1", "tempSecret12")) as rc:
            return (await send_message(rc, cluster.broker, TOPIC, b"temp", queue_id=0)).code

    assert asyncio.run(send_as_temp()) == ResponseCode.SUCCESS
    admin.json("deleteAclConfig", "-b", cluster.broker, "-a", "tempAccount1")
    assert asyncio.run(send_as_temp()) == ResponseCode.NO_PERMISSION


async def test_the_file_is_reloaded_when_it_changes(cluster: Cluster) -> None:
    path = cluster.data_dir / "conf" / "plain_acl.yml"
    original = path.read_text()
    data = yaml.safe_load(original)
    data["accounts"].append({"accessKey": "editedAccount", "secretKey": "editedSecret1",
                             "defaultTopicPerm": "PUB"})
    path.write_text(yaml.safe_dump(data))

    async def send_as_edited() -> bool:
        async with signed(SessionCredentials("editedAccount", "editedSecret1")) as rc:
            return (await send_message(rc, cluster.broker, TOPIC, b"e", queue_id=0)).code == 0

    try:
        await wait_until(send_as_edited, timeout=15, interval=0.3)
    finally:
        path.write_text(original)


def _register(name: str, broker_addr: str, topic: str) -> RemotingCommand:
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {topic: TopicConfig(topic, 4, 4)}, DataVersion(0, 1_700_000_000_000, 1))).encode(False)
    ext = {"brokerName": name, "brokerAddr": broker_addr, "clusterName": "DefaultCluster",
           "haServerAddr": broker_addr, "brokerId": "0", "compressed": "false",
           "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


async def test_the_route_hijack_is_refused(cluster: Cluster) -> None:
    async with signed(None) as rc:
        response = await rc.invoke(cluster.namesrv, _register("HijackB", "127.0.0.1:1", "HijackT"), 5.0)
        assert response.code == ResponseCode.NO_PERMISSION, response.remark
        kv = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"})
        assert (await rc.invoke(cluster.namesrv, kv, 5.0)).code == ResponseCode.NO_PERMISSION
        # reads stay open: unsigned clients can still find brokers
        assert await get_route(rc, cluster.namesrv, "HijackT") is None
    async with signed(APP) as rc:  # signed, but not an admin
        response = await rc.invoke(cluster.namesrv, _register("HijackB", "127.0.0.1:1", "HijackT"), 5.0)
        assert response.code == ResponseCode.NO_PERMISSION
        assert "Need admin permission" in (response.remark or "")
    # Another admin account may not take over the real broker's name.
    async with signed(ADMIN) as rc:
        route = await wait_until(lambda: get_route(rc, cluster.namesrv, TOPIC), timeout=15)
    real_name = route.broker_datas[0].broker_name
    async with signed(INTRUDER) as rc:
        response = await rc.invoke(cluster.namesrv, _register(real_name, "127.0.0.1:1", "HijackT"), 5.0)
        assert response.code == ResponseCode.NO_PERMISSION
        assert "registered by another identity" in (response.remark or "")
        assert await get_route(rc, cluster.namesrv, "HijackT") is None


def test_acl_2_users_and_policies(cluster: Cluster, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """ACL 2.0 beside 1.0: a 1.0 admin creates a user and its policy with `rocketq admin`, the user
    sends where its policy allows and is refused elsewhere; a normal user manages no users."""
    admin = AdminRun(capsys, cluster.namesrv)
    b = ["-b", cluster.broker]
    as_app = ["--access-key", APP.access_key, "--secret-key", APP.secret_key]
    assert "Need admin permission for request code=3001" in admin.fails(
        "createUser", *b, "-u", "alice2", "-p", "alicePassword", *as_app)
    monkeypatch.setenv("ROCKETQ_ACCESS_KEY", ADMIN.access_key)
    monkeypatch.setenv("ROCKETQ_SECRET_KEY", ADMIN.secret_key)
    admin.json("createUser", *b, "-u", "alice2", "-p", "alicePassword")
    admin.json("createAcl", *b, "-s", "User:alice2", "-r", f"Topic:{TOPIC}", "-a", "Pub")
    shown = admin.json("getUser", *b, "-u", "alice2")[cluster.broker]
    assert shown == {"username": "alice2", "userType": "Normal", "userStatus": "enable"}
    policy = admin.json("getAcl", *b, "-s", "User:alice2")[cluster.broker]
    assert policy["policies"][0]["entries"][0]["resource"] == f"Topic:{TOPIC}"
    alice = SessionCredentials("alice2", "alicePassword")

    async def send_as(creds: SessionCredentials, topic: str) -> RemotingCommand:
        async with signed(creds) as rc:
            return await send_message(rc, cluster.broker, topic, b"v2", queue_id=0)

    assert asyncio.run(send_as(alice, TOPIC)).code == ResponseCode.SUCCESS
    refused = asyncio.run(send_as(alice, "SubOnlyTopic"))
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == ("User:alice2 has no permission to access Topic:SubOnlyTopic from 127.0.0.1, "
                              "no matched policies.")
    wrong = asyncio.run(send_as(SessionCredentials("alice2", "notHerPassword"), TOPIC))
    assert (wrong.code, wrong.remark) == (ResponseCode.NO_PERMISSION, "check signature failed.")
    admin.json("updateAcl", *b, "-s", "User:alice2", "-r", f"Topic:{TOPIC}", "-a", "Pub", "-d", "Deny")
    assert asyncio.run(send_as(alice, TOPIC)).code == ResponseCode.NO_PERMISSION
    assert [u["username"] for u in admin.json("listUser", *b)[cluster.broker]] == ["alice2"]
    admin.json("deleteUser", *b, "-u", "alice2")
    gone = asyncio.run(send_as(alice, TOPIC))
    assert gone.code == ResponseCode.NO_PERMISSION and "No acl config for alice2" in (gone.remark or "")


def test_sync_clients_sign_too(cluster: Cluster) -> None:
    """The blocking Producer and LitePullConsumer take the same ``credentials=``."""
    import rocketq

    topic = TOPIC
    producer = rocketq.Producer(unique_name("PG"), namesrv_addr=cluster.namesrv, credentials=APP)
    producer.start()
    try:
        sent = {producer.send(rocketq.Message(topic, f"sync-{i}".encode())).msg_id for i in range(3)}
    finally:
        producer.shutdown()
    consumer = rocketq.LitePullConsumer(unique_name("LG"), namesrv_addr=cluster.namesrv, credentials=APP,
                                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic, "*")
    consumer.start()
    got: set[str] = set()
    try:
        deadline = time.monotonic() + 30
        while not sent <= got and time.monotonic() < deadline:
            got |= {m.msg_id for m in consumer.poll(timeout=0.5)}
    finally:
        consumer.shutdown()
    assert sent <= got
