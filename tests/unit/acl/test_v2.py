"""ACL 2.0 (RocketMQ 5.3): users authenticate with the 1.0 signature; super users may do anything;
a normal user's most specific matching policy entry decides, Deny winning ties; no entry, no access."""

from __future__ import annotations

import pytest

from rocketq.acl import RequestSigner, SessionCredentials, parse_request
from rocketq.acl.errors import AclError
from rocketq.acl.v2 import AclPolicy, AuthRules, PolicyEntry, User, contexts
from rocketq.codec.codes import RequestCode as C
from rocketq.codec.command import RemotingCommand

RULES = AuthRules.from_mapping({
    "users": [
        {"username": "root", "password": "rootpw", "userType": "Super"},
        {"username": "alice", "password": "alicepw"},
        {"username": "carol", "password": "carolpw", "userStatus": "disable"},
        {"username": "nobody", "password": "nobodypw"},
    ],
    "acls": [{"subject": "User:alice", "policies": [
        {"policyType": "CUSTOM", "entries": [
            {"resource": "Topic:orders", "actions": ["Pub", "Sub"], "decision": "Allow"},
            {"resource": "Topic:pay-*", "actions": ["Pub"], "decision": "Allow"},
            {"resource": "Topic:pay-secret", "actions": ["Pub"], "decision": "Deny"},
            {"resource": "Topic:*", "actions": ["Sub"], "decision": "Allow", "sourceIps": ["10.0.0.*"]},
            {"resource": "Group:g-*", "actions": ["Sub"], "decision": "Allow"},
            {"resource": "Group:g-banned", "actions": ["All"], "decision": "Deny"},
        ]},
        {"policyType": "DEFAULT", "entries": [{"resource": "*", "actions": ["Get"], "decision": "Allow"}]},
    ]}],
})


def _check(cmd: RemotingCommand, user: str, password: str, ip: str = "192.168.1.5") -> str | None:
    RequestSigner(SessionCredentials(user, password))(cmd)
    req = parse_request(cmd, f"{ip}:4000")
    try:
        RULES.authorize(RULES.authenticate(req), cmd, req.remote_ip)
    except AclError as e:
        return str(e)
    return None


def send(topic: str, group: str = "pg") -> RemotingCommand:
    return RemotingCommand.request(C.SEND_MESSAGE_V2, {"a": group, "b": topic})


def pull(topic: str, group: str) -> RemotingCommand:
    return RemotingCommand.request(C.PULL_MESSAGE, {"topic": topic, "consumerGroup": group})


def deny(resource: str, ip: str = "192.168.1.5", why: str = "no matched policies.") -> str:
    return f"User:alice has no permission to access {resource} from {ip}, {why}"


@pytest.mark.parametrize(("cmd", "user", "password", "ip", "expected"), [
    (send("orders"), "alice", "alicepw", "192.168.1.5", None),
    (send("pay-in"), "alice", "alicepw", "192.168.1.5", None),
    (send("pay-secret"), "alice", "alicepw", "192.168.1.5",
     deny("Topic:pay-secret", why="the decision is deny.")),
    (send("other"), "alice", "alicepw", "192.168.1.5", deny("Topic:other")),
    (pull("orders", "g-1"), "alice", "alicepw", "192.168.1.5", None),
    (pull("elsewhere", "g-1"), "alice", "alicepw", "192.168.1.5", deny("Topic:elsewhere")),
    (pull("elsewhere", "g-1"), "alice", "alicepw", "10.0.0.9", None),
    (pull("orders", "g-banned"), "alice", "alicepw", "192.168.1.5",
     deny("Group:g-banned", why="the decision is deny.")),
    (pull("orders", "other-group"), "alice", "alicepw", "192.168.1.5", deny("Group:other-group")),
    (send("%RETRY%g-1", "g-1"), "alice", "alicepw", "192.168.1.5", None),
    (send("%RETRY%g-1"), "alice", "alicepw", "192.168.1.5", deny("Group:pg")),
    (RemotingCommand.request(C.QUERY_MESSAGE, {"topic": "anything"}), "alice", "alicepw", "1.1.1.1", None),
    (RemotingCommand.request(C.UPDATE_AND_CREATE_TOPIC, {"topic": "orders"}), "alice", "alicepw",
     "1.1.1.1", "User:alice has no permission to access Topic:orders from 1.1.1.1, no matched policies."),
    (RemotingCommand.request(3001, {"username": "x"}), "alice", "alicepw", "1.1.1.1",
     "User:alice is not a super user: users and ACLs are managed by super users"),
    (RemotingCommand.request(C.GET_BROKER_CONFIG, {}), "alice", "alicepw", "1.1.1.1", None),
    (send("anything"), "root", "rootpw", "1.1.1.1", None),
    (RemotingCommand.request(3001, {"username": "x"}), "root", "rootpw", "1.1.1.1", None),
    (send("orders"), "alice", "wrong", "1.1.1.1", "check signature failed."),
    (send("orders"), "carol", "carolpw", "1.1.1.1", "User:carol is disabled."),
    (send("orders"), "dave", "davepw", "1.1.1.1", "User:dave is not found."),
    (send("orders"), "nobody", "nobodypw", "1.1.1.1",
     "User:nobody has no permission to access Topic:orders from 1.1.1.1, no matched policies."),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_decision(cmd: RemotingCommand, user: str, password: str, ip: str, expected: str | None) -> None:
    assert _check(cmd, user, password, ip) == expected


def test_contexts_of_a_heartbeat_and_an_offset_update() -> None:
    from rocketq.codec.bodies.client import ConsumerData, HeartbeatData, SubscriptionData

    body = HeartbeatData(client_id="c", consumer_data_set=(ConsumerData(
        group_name="g1", subscription_data_set=(SubscriptionData("t1"), SubscriptionData("%RETRY%g1"))),))
    hb = RemotingCommand.request(C.HEART_BEAT, {}, body=body.to_json())
    assert contexts(hb) == [("Group:g1", ("Sub",)), ("Topic:t1", ("Sub",))]
    offset = RemotingCommand.request(C.UPDATE_CONSUMER_OFFSET, {"topic": "t", "consumerGroup": "g"})
    assert contexts(offset) == [("Topic:t", ("Sub", "Update")), ("Group:g", ("Sub", "Update"))]


@pytest.mark.parametrize(("entry", "remark"), [
    ({"resource": "Queue:x", "actions": ["Pub"]}, "The resource Queue:x is illegal"),
    ({"resource": "Topic:x", "actions": ["Fly"]}, "The actions ['Fly'] are illegal"),
    ({"resource": "Topic:x", "actions": ["Pub"], "decision": "Maybe"}, "The decision Maybe is illegal"),
])
def test_bad_entries_are_refused(entry: dict[str, object], remark: str) -> None:
    with pytest.raises(AclError, match=remark.replace("[", r"\[").replace("]", r"\]")):
        AclPolicy.from_info({"subject": "User:a", "policies": [{"entries": [entry]}]})


def test_users_and_acls_round_trip_and_update_by_resource() -> None:
    again = AuthRules.from_mapping(RULES.to_mapping())
    assert again.users == RULES.users and again.acls == RULES.acls
    acl = RULES.acls["User:alice"]
    changed = acl.merged(AclPolicy("User:alice", (PolicyEntry.of("Topic:orders", ["Sub"], "Deny"),)))
    assert next(e for e in changed.custom if e.resource == "Topic:orders").decision == "Deny"
    assert len(changed.custom) == len(acl.custom)
    assert acl.without("Topic:orders") is not None and acl.without(None) is None
    assert "alicepw" not in repr(RULES.users["alice"])
    with pytest.raises(AclError, match="userType"):
        User.from_info({"username": "x", "password": "y", "userType": "God"})
