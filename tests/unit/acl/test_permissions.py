"""The permission model against a table of cases: topic/group x PUB/SUB/DENY x white lists x admin
codes, each decided as RocketMQ 4.9.8's PlainPermissionManager decides it (its remark included)."""

from __future__ import annotations

from typing import Any

import pytest

from rocketq.acl import AclRules, RequestSigner, SessionCredentials, parse_request
from rocketq.acl.errors import AclError
from rocketq.codec.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
from rocketq.codec.codes import RequestCode as C
from rocketq.codec.command import RemotingCommand

RULES = AclRules.from_mapping({
    "globalWhiteRemoteAddresses": ["10.10.103.*", "192.168.0.{1,2}"],
    "accounts": [
        {"accessKey": "RocketMQ", "secretKey": "12345678", "whiteRemoteAddress": None, "admin": False,
         "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB", "topicP=PUB"],
         "groupPerms": ["groupA=DENY", "groupB=PUB|SUB", "groupC=SUB"]},
        {"accessKey": "rocketmq2", "secretKey": "12345678", "whiteRemoteAddress": "192.168.1.*",
         "admin": True},
        {"accessKey": "pubsub00", "secretKey": "87654321", "defaultTopicPerm": "PUB|SUB",
         "defaultGroupPerm": "DENY"},
        {"accessKey": "adminwithperms", "secretKey": "87654321", "admin": True,
         "topicPerms": ["onlyT=SUB"], "defaultTopicPerm": "DENY"},
    ],
})

NORMAL = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")
DEFAULTS = SessionCredentials("pubsub00", "87654321")
ADMIN_PERMS = SessionCredentials("adminwithperms", "87654321")
WRONG = SessionCredentials("RocketMQ", "not-the-secret")
UNKNOWN = SessionCredentials("nobody123", "12345678")
OUTSIDE = "172.16.0.9:40000"


def send(topic: str, group: str = "pg") -> RemotingCommand:
    return RemotingCommand.request(C.SEND_MESSAGE_V2, {"a": group, "b": topic, "c": "TBW102", "d": "4"},
                                   body=b"body")


def pull(topic: str, group: str) -> RemotingCommand:
    return RemotingCommand.request(C.PULL_MESSAGE, {"consumerGroup": group, "topic": topic,
                                                    "queueId": "0", "queueOffset": "0"})


def heartbeat(group: str, *topics: str) -> RemotingCommand:
    data = HeartbeatData(client_id="c1", consumer_data_set=(
        ConsumerData(group_name=group, subscription_data_set=tuple(SubscriptionData(t) for t in topics)),))
    return RemotingCommand.request(C.HEART_BEAT, {}, body=data.to_json())


def code(c: int, **ext: str) -> RemotingCommand:
    return RemotingCommand.request(c, dict(ext))


# (case id, request, credentials or None for unsigned, peer address, expected remark or None)
CASES: list[tuple[str, RemotingCommand, SessionCredentials | None, str, str | None]] = [
    # topic permissions of a normal account
    ("pub-topic-denied", send("topicA"), NORMAL, OUTSIDE, "No default permission for topic:topicA"),
    ("pub-topic-pubsub", send("topicB"), NORMAL, OUTSIDE, None),
    ("pub-topic-sub-only", send("topicC"), NORMAL, OUTSIDE, "No default permission for topic:topicC"),
    ("pub-topic-pub-only", send("topicP"), NORMAL, OUTSIDE, None),
    ("pub-topic-default-deny", send("other"), NORMAL, OUTSIDE, "No default permission for topic:other"),
    ("pull-topic-sub", pull("topicC", "groupC"), NORMAL, OUTSIDE, None),
    ("pull-topic-pub-only", pull("topicP", "groupC"), NORMAL, OUTSIDE,
     "No default permission for topic:topicP"),
    ("pull-topic-denied", pull("topicA", "groupC"), NORMAL, OUTSIDE,
     "No default permission for topic:topicA"),
    # group permissions
    ("pull-group-denied", pull("topicB", "groupA"), NORMAL, OUTSIDE,
     "No default permission for group:groupA"),
    ("pull-group-pubsub", pull("topicB", "groupB"), NORMAL, OUTSIDE, None),
    ("pull-group-default-sub", pull("topicB", "anyGroup"), NORMAL, OUTSIDE, None),
    ("offset-group-denied", code(C.UPDATE_CONSUMER_OFFSET, consumerGroup="groupA", topic="topicB",
                                 queueId="0", commitOffset="1"),
     NORMAL, OUTSIDE, "No default permission for group:groupA"),
    ("offset-allowed", code(C.UPDATE_CONSUMER_OFFSET, consumerGroup="groupB", topic="topicC", queueId="0",
                            commitOffset="1"), NORMAL, OUTSIDE, None),
    ("send-back-group-denied", code(C.CONSUMER_SEND_MSG_BACK, group="groupA", offset="0"), NORMAL, OUTSIDE,
     "No default permission for group:groupA"),
    ("consumer-list-allowed", code(C.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="groupC"), NORMAL, OUTSIDE,
     None),
    ("unregister-group-denied", code(C.UNREGISTER_CLIENT, clientID="c", consumerGroup="groupA"), NORMAL,
     OUTSIDE, "No default permission for group:groupA"),
    ("retry-topic-send-needs-group-sub", send("%RETRY%groupA", "groupA"), NORMAL, OUTSIDE,
     "No default permission for group:groupA"),
    ("retry-topic-send-group-ok", send("%RETRY%groupC", "groupC"), NORMAL, OUTSIDE, None),
    ("query-topic-sub", code(C.QUERY_MESSAGE, topic="topicC", key="k", maxNum="1", beginTimestamp="0",
                             endTimestamp="1"), NORMAL, OUTSIDE, None),
    ("heartbeat-topic-denied", heartbeat("groupB", "topicB", "topicA"), NORMAL, OUTSIDE,
     "No default permission for topic:topicA"),
    ("heartbeat-allowed", heartbeat("groupB", "topicB", "topicC"), NORMAL, OUTSIDE, None),
    ("heartbeat-group-denied", heartbeat("groupA", "topicB"), NORMAL, OUTSIDE,
     "No default permission for group:groupA"),
    ("batch-send-checked-like-v2", RemotingCommand.request(C.SEND_BATCH_MESSAGE, {"a": "pg", "b": "topicA"}),
     NORMAL, OUTSIDE, "No default permission for topic:topicA"),
    ("trace-topic-always-pub", send("RMQ_SYS_TRACE_TOPIC"), NORMAL, OUTSIDE, None),
    # codes outside the table need a valid signature only
    ("no-resource-code", code(C.GET_ROUTEINFO_BY_TOPIC, topic="topicA"), NORMAL, OUTSIDE, None),
    # admin codes
    ("create-topic-needs-admin", code(C.UPDATE_AND_CREATE_TOPIC, topic="x"), NORMAL, OUTSIDE,
     "Need admin permission for request code=17, but accessKey=RocketMQ is not"),
    ("delete-group-needs-admin", code(C.DELETE_SUBSCRIPTIONGROUP, groupName="g"), NORMAL, OUTSIDE,
     "Need admin permission for request code=207, but accessKey=RocketMQ is not"),
    ("acl-change-needs-admin", code(C.UPDATE_AND_CREATE_ACL_CONFIG, accessKey="x"), NORMAL, OUTSIDE,
     "Need admin permission for request code=50, but accessKey=RocketMQ is not"),
    ("acl-secrets-need-admin", code(C.GET_BROKER_CLUSTER_ACL_CONFIG), DEFAULTS, OUTSIDE,
     "Need admin permission for request code=54, but accessKey=pubsub00 is not"),
    ("admin-creates-topic", code(C.UPDATE_AND_CREATE_TOPIC, topic="x"), ADMIN, OUTSIDE, None),
    ("admin-without-perms-pubs", send("anything"), ADMIN, OUTSIDE, None),
    ("admin-with-perms-is-bound", send("elsewhere"), ADMIN_PERMS, OUTSIDE,
     "No default permission for topic:elsewhere"),
    ("admin-with-perms-subs", pull("onlyT", "g"), ADMIN_PERMS, OUTSIDE,
     "No default permission for group:g"),
    # default permissions
    ("defaults-pubsub-topic", send("anything"), DEFAULTS, OUTSIDE, None),
    ("defaults-deny-group", pull("anything", "g"), DEFAULTS, OUTSIDE, "No default permission for group:g"),
    # identity and signature
    ("wrong-secret", send("topicB"), WRONG, OUTSIDE, "Check signature failed for accessKey=RocketMQ"),
    ("unknown-key", send("topicB"), UNKNOWN, OUTSIDE, "No acl config for nobody123"),
    ("unsigned", send("topicB"), None, OUTSIDE, "No accessKey is configured"),
    # white lists
    ("global-white-range-unsigned", send("topicA"), None, "10.10.103.7:1234", None),
    ("global-white-braces", send("topicA"), None, "192.168.0.2:1234", None),
    ("global-white-braces-miss", send("topicA"), None, "192.168.0.3:1234", "No accessKey is configured"),
    ("account-white-skips-signature", send("x"), SessionCredentials("rocketmq2", "wrong-secret"),
     "192.168.1.77:999", None),
    ("account-white-miss-checks-signature", send("x"), SessionCredentials("rocketmq2", "wrong-secret"),
     "192.168.2.77:999", "Check signature failed for accessKey=rocketmq2"),
]


def _decide(cmd: RemotingCommand, creds: SessionCredentials | None, peer: str) -> str | None:
    if creds is not None:
        RequestSigner(creds)(cmd)
    try:
        RULES.check(parse_request(cmd, peer))
    except AclError as e:
        return str(e)
    return None


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize(("request_", "creds", "peer", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_permission_case(request_: RemotingCommand, creds: SessionCredentials | None, peer: str,
                         expected: str | None) -> None:
    assert _decide(request_, creds, peer) == expected


def _rules(**account: Any) -> AclRules:
    account = {"accessKey": "RocketMQ", "secretKey": "12345678", **account}
    return AclRules.from_mapping({"accounts": [account]})


@pytest.mark.parametrize(("account", "remark"), [
    ({"secretKey": "short"}, "The accessKey=RocketMQ and secretKey=*** cannot be null"),
    ({"topicPerms": ["noequals"]}, "Parse resource permission failed for topic:noequals"),
    ({"whiteRemoteAddress": "1.2.3"}, "Netaddress examine Exception netaddress is 1.2.3"),
])
def test_a_broken_account_is_refused_naming_what_is_wrong_and_never_the_secret(
        account: dict[str, Any], remark: str) -> None:
    with pytest.raises(AclError) as info:
        _rules(**account)
    assert remark in str(info.value)
    assert "12345678" not in str(info.value) and "short" not in str(info.value)


def test_unknown_permission_text_is_deny() -> None:
    rules = _rules(defaultTopicPerm="WRITE")
    cmd = send("t")
    RequestSigner(NORMAL)(cmd)
    with pytest.raises(AclError, match="No default permission for topic:t"):
        rules.check(parse_request(cmd, OUTSIDE))
