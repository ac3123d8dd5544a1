"""The gRPC endpoint's ACL decisions (broker/grpc/auth.py): who signed a call, and the permissions
of its remoting twin, for plain_acl.yml accounts and ACL 2.0 users."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from rocketq.acl.errors import AclError
from rocketq.acl.grpc_auth import grpc_signature
from rocketq.broker.acl import AclService
from rocketq.broker.grpc.auth import Unauthorized, authenticate, authorize, remoting_twin
from rocketq.broker.grpc.protocol import load
from rocketq.codec.codes import RequestCode

PLAIN = """\
globalWhiteRemoteAddresses: ["10.9.*"]
accounts:
- accessKey: appAccount
  secretKey: appSecret12
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms: [orders=PUB|SUB, audit=SUB]
  groupPerms: [blocked=DENY]
"""
ACL2 = {"users": [{"username": "alice", "password": "alicePassword"}],
        "acls": [{"subject": "User:alice", "policies": [{"policyType": "CUSTOM", "entries": [
            {"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"}]}]}]}
NOW = "20261125T135200Z"
IP = "10.1.2.3"
D, S, _ = load()


def _service(tmp_path: Path, **mode: Any) -> AclService:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "plain_acl.yml").write_text(PLAIN)
    (conf / "acl2.json").write_bytes(orjson.dumps(ACL2))
    return AclService(conf / "plain_acl.yml", **mode)


def _md(ak: str, secret: str) -> dict[str, str]:
    sig = grpc_signature(secret, NOW)
    return {"x-mq-date-time": NOW,
            "authorization": f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"}


def _send(topic: str) -> Any:
    return S.SendMessageRequest(messages=[D.Message(topic=D.Resource(name=topic))])


def _receive(topic: str, group: str) -> Any:
    return S.ReceiveMessageRequest(group=D.Resource(name=group),
                                   message_queue=D.MessageQueue(topic=D.Resource(name=topic)))


def _verdict(acl: AclService, md: dict[str, str], method: str, request: Any, ip: str = IP) -> str:
    try:
        who = authenticate(acl, md, ip)
        authorize(acl, who, remoting_twin(method, request, ""), ip)
    except Unauthorized as e:
        return f"UNAUTHORIZED {e}"
    except AclError as e:
        return f"FORBIDDEN {e}"
    return "ok"


def test_each_rpc_is_judged_as_its_remoting_twin() -> None:
    (send,) = remoting_twin("SendMessage", _send("orders"), "")
    assert send.code == RequestCode.SEND_MESSAGE_V2 and send.ext_fields["b"] == "orders"  # type: ignore[index]
    (pull,) = remoting_twin("ReceiveMessage", _receive("orders", "g1"), "ns1")
    assert pull.code == RequestCode.PULL_MESSAGE
    assert pull.ext_fields == {"topic": "ns1%orders", "consumerGroup": "ns1%g1"}
    ack = S.AckMessageRequest(group=D.Resource(name="g1"), topic=D.Resource(name="orders"))
    assert remoting_twin("AckMessage", ack, "")[0].ext_fields == {"topic": "orders", "consumerGroup": "g1"}
    (route,) = remoting_twin("QueryRoute", S.QueryRouteRequest(topic=D.Resource(name="x")), "")
    assert route.code == RequestCode.GET_ROUTEINFO_BY_TOPIC  # only the caller must be known


@pytest.mark.parametrize(("md", "method", "request_", "expected"), [
    (_md("appAccount", "appSecret12"), "SendMessage", _send("orders"), "ok"),
    (_md("appAccount", "appSecret12"), "ReceiveMessage", _receive("audit", "g1"), "ok"),
    (_md("appAccount", "wrongSecret"), "SendMessage", _send("orders"),
     "UNAUTHORIZED Check signature failed for accessKey=appAccount"),
    (_md("nobody1", "whatever1"), "SendMessage", _send("orders"), "UNAUTHORIZED No acl config for nobody1"),
    ({}, "SendMessage", _send("orders"), "UNAUTHORIZED authorization header is missing"),
    (_md("appAccount", "appSecret12"), "SendMessage", _send("audit"),
     "FORBIDDEN No default permission for topic:audit"),
    (_md("appAccount", "appSecret12"), "ReceiveMessage", _receive("orders", "blocked"),
     "FORBIDDEN No default permission for group:blocked"),
    (_md("alice", "alicePassword"), "SendMessage", _send("orders"), "ok"),
    (_md("alice", "alicePassword"), "SendMessage", _send("audit"),
     "FORBIDDEN User:alice has no permission to access Topic:audit from 10.1.2.3, no matched policies."),
    (_md("alice", "notHers1"), "SendMessage", _send("orders"),
     "UNAUTHORIZED Check signature failed for accessKey=alice"),
], ids=["send", "receive-sub-only", "wrong-secret", "unknown-key", "unsigned", "no-pub",
        "denied-group", "user-2.0", "user-2.0-no-policy", "user-2.0-wrong-password"])
def test_acl_enable_checks_accounts_and_users(tmp_path: Path, md: dict[str, str], method: str,
                                              request_: Any, expected: str) -> None:
    verdict = _verdict(_service(tmp_path), md, method, request_)
    assert verdict == expected
    assert "appSecret12" not in verdict and "alicePassword" not in verdict


def test_a_globally_white_listed_peer_needs_no_signature(tmp_path: Path) -> None:
    assert _verdict(_service(tmp_path), {}, "SendMessage", _send("audit"), ip="10.9.0.1") == "ok"


def test_53_switches_without_acl_enable(tmp_path: Path) -> None:
    # authorization alone: the named user is judged unverified (as 5.3 does)
    acl = _service(tmp_path, v1=False, authorization=True)
    assert _verdict(acl, _md("alice", "anything1"), "SendMessage", _send("orders")) == "ok"
    assert _verdict(acl, _md("alice", "anything1"), "SendMessage", _send("audit")).startswith("FORBIDDEN")
    # authentication alone: a signed user may do anything, a 1.0 account is no 2.0 user
    acl = _service(tmp_path, v1=False, authentication=True)
    assert _verdict(acl, _md("alice", "alicePassword"), "SendMessage", _send("audit")) == "ok"
    assert _verdict(acl, _md("appAccount", "appSecret12"), "SendMessage", _send("orders")) == \
        "UNAUTHORIZED User:appAccount is not found."


def test_change_log_level_needs_an_admin_account(tmp_path: Path) -> None:
    from rocketq.broker.grpc.protocol import load_admin

    request = load_admin()[0].ChangeLogLevelRequest(level=1)
    (twin,) = remoting_twin("ChangeLogLevel", request, "")
    assert twin.code == RequestCode.UPDATE_BROKER_CONFIG
    acl = _service(tmp_path)
    assert _verdict(acl, _md("appAccount", "appSecret12"), "ChangeLogLevel", request).startswith("FORBIDDEN")
    wrong = _md("appAccount", "wrongSecret1")
    assert _verdict(acl, wrong, "ChangeLogLevel", request).startswith("UNAUTHORIZED")
