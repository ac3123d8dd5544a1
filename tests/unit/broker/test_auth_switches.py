"""RocketMQ 5.3's authenticationEnabled / authorizationEnabled without aclEnable, and the
initAuthenticationUser bootstrap: what the broker's validator lets through in each mode."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from rocketq.acl import RequestSigner, SessionCredentials
from rocketq.acl.errors import AclError
from rocketq.broker.acl import AclService
from rocketq.broker.config import BrokerConfig
from rocketq.codec.codes import RequestCode as C
from rocketq.codec.command import RemotingCommand
from rocketq.config.fields import config_fields
from rocketq.errors import ConfigError

ACL2 = {"users": [{"username": "alice", "password": "alicePassword"}],
        "acls": [{"subject": "User:alice", "policies": [{"policyType": "CUSTOM", "entries": [
            {"resource": "Topic:orders", "actions": ["Pub"], "decision": "Allow"}]}]}]}
PEER = SimpleNamespace(remote_address="10.1.2.3:5000")


def _send(topic: str, creds: SessionCredentials | None, *, access_key: str | None = None) -> RemotingCommand:
    ext = {"a": "pg", "b": topic, "c": "TBW102", "d": "4"}
    cmd = RemotingCommand.request(C.SEND_MESSAGE_V2, ext, body=b"x")
    if creds is not None:
        RequestSigner(creds)(cmd)
    if access_key is not None:  # a claimed name with no signature
        cmd.ext_fields["AccessKey"] = access_key  # type: ignore[index]
    return cmd


def _service(tmp_path: Path, **mode: object) -> AclService:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "acl2.json").write_bytes(orjson.dumps(ACL2))
    return AclService(conf / "plain_acl.yml", **mode)  # type: ignore[arg-type]


def _verdict(acl: AclService, cmd: RemotingCommand) -> str:
    try:
        acl.validate(cmd, PEER)  # type: ignore[arg-type]
    except AclError as e:
        return str(e)
    return "ok"


ALICE = SessionCredentials("alice", "alicePassword")
WRONG = SessionCredentials("alice", "notHerPassword")


def test_the_switches_have_53s_names_and_defaults() -> None:
    fields = config_fields(BrokerConfig)
    assert fields["authentication_enabled"].key == "authenticationEnabled"
    assert fields["authorization_enabled"].key == "authorizationEnabled"
    assert fields["init_authentication_user"].key == "initAuthenticationUser"
    cfg = BrokerConfig()
    assert (cfg.authentication_enabled, cfg.authorization_enabled, cfg.init_authentication_user) == (
        False, False, "")


def test_authentication_only_checks_the_signature_not_the_policies(tmp_path: Path) -> None:
    acl = _service(tmp_path, v1=False, authentication=True)
    assert _verdict(acl, _send("anything", ALICE)) == "ok"
    assert _verdict(acl, _send("orders", WRONG)) == "check signature failed."
    assert _verdict(acl, _send("orders", None)) == "username cannot be null."
    assert _verdict(acl, _send("orders", None, access_key="alice")) == "check signature failed."


def test_authorization_only_judges_the_named_user(tmp_path: Path) -> None:
    acl = _service(tmp_path, v1=False, authorization=True)
    assert _verdict(acl, _send("orders", WRONG)) == "ok"  # 5.3: no authentication, no signature check
    assert "no permission to access Topic:other" in _verdict(acl, _send("other", ALICE))
    assert _verdict(acl, _send("orders", None, access_key="mallory")) == "User:mallory is not found."


def test_both_switches_without_acl_enable_ignore_plain_acl_accounts(tmp_path: Path) -> None:
    acl = _service(tmp_path, v1=False, authentication=True, authorization=True)
    (tmp_path / "conf" / "plain_acl.yml").write_text(
        "accounts:\n- accessKey: rocketmq2\n  secretKey: '12345678'\n  admin: true\n")
    assert _verdict(acl, _send("orders", ALICE)) == "ok"
    assert "no permission to access Topic:other" in _verdict(acl, _send("other", ALICE))
    assert _verdict(acl, _send("orders", SessionCredentials("rocketmq2", "12345678"))) == \
        "User:rocketmq2 is not found."


def test_init_authentication_user_creates_a_super_user_once(tmp_path: Path) -> None:
    boot = '{"username": "root", "password": "rootPassword1"}'
    acl = _service(tmp_path, v1=False, authentication=True, authorization=True, init_user=boot)
    root = acl.auth2.rules.users["root"]
    assert root.user_type == "Super"
    assert _verdict(acl, _send("other", SessionCredentials("root", "rootPassword1"))) == "ok"
    saved = orjson.loads((tmp_path / "conf" / "acl2.json").read_bytes())
    assert {u["username"] for u in saved["users"]} == {"alice", "root"}
    # a restart with another password for an existing user keeps the stored one (5.3: create if absent)
    again = AclService(tmp_path / "conf" / "plain_acl.yml", v1=False, authentication=True,
                       init_user='{"username": "root", "password": "otherPassword"}')
    assert again.auth2.rules.users["root"].password == "rootPassword1"


@pytest.mark.parametrize("boot", ["not json", '["root"]', '{"username": "root"}'])
def test_a_bad_init_authentication_user_stops_the_start(tmp_path: Path, boot: str) -> None:
    with pytest.raises(ConfigError, match="initAuthenticationUser: Init authentication user error"):
        _service(tmp_path, v1=False, authentication=True, init_user=boot)
