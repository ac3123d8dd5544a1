"""plain_acl.yml on disk: loaded with a YAML library, reloaded on change (a broken edit keeps the
rules in force), and rewritten by the admin changes with a bumped dataVersion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from rocketq.acl import PlainPermissionManager, RequestSigner, SessionCredentials
from rocketq.acl.errors import AclError
from rocketq.codec.command import RemotingCommand

# distribution/conf/plain_acl.yml as RocketMQ 4.9.8 ships it
SHIPPED = """\
globalWhiteRemoteAddresses:
- 10.10.103.*
- 192.168.0.*

accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - topicA=DENY
  - topicB=PUB|SUB
  - topicC=SUB
  groupPerms:
  # the group should convert to retry topic
  - groupA=DENY
  - groupB=PUB|SUB
  - groupC=SUB

- accessKey: rocketmq2
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  # if it is admin, it could access all resources
  admin: true
"""


def _send(topic: str, creds: SessionCredentials) -> RemotingCommand:
    cmd = RemotingCommand.request(310, {"a": "g", "b": topic})
    RequestSigner(creds)(cmd)
    return cmd


def _touch_later(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_rocketmqs_shipped_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SHIPPED)
    manager = PlainPermissionManager(path)
    assert set(manager.rules.accounts) == {"RocketMQ", "rocketmq2"}
    assert manager.rules.accounts["RocketMQ"].secret_key == "12345678"  # YAML's int, as Java reads it
    manager.validate(_send("topicB", SessionCredentials("RocketMQ", "12345678")), "1.1.1.1:1")
    with pytest.raises(AclError, match="topic:topicA"):
        manager.validate(_send("topicA", SessionCredentials("RocketMQ", "12345678")), "1.1.1.1:1")


def test_a_missing_file_lets_only_nobody_in(tmp_path: Path) -> None:
    manager = PlainPermissionManager(tmp_path / "absent.yml")
    with pytest.raises(AclError, match="No acl config for RocketMQ"):
        manager.validate(_send("t", SessionCredentials("RocketMQ", "12345678")), "1.1.1.1:1")


def test_an_edit_is_picked_up_and_a_broken_edit_keeps_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SHIPPED)
    manager = PlainPermissionManager(path)
    assert not manager.reload_if_changed()
    path.write_text(SHIPPED.replace("- topicA=DENY", "- topicA=PUB"))
    _touch_later(path)
    assert manager.reload_if_changed()
    manager.validate(_send("topicA", SessionCredentials("RocketMQ", "12345678")), "1.1.1.1:1")
    path.write_text("accounts: [: broken")
    _touch_later(path)
    manager.reload_if_changed()
    manager.validate(_send("topicA", SessionCredentials("RocketMQ", "12345678")), "1.1.1.1:1")


def test_admin_changes_rewrite_the_file_with_a_new_version(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "plain_acl.yml"
    manager = PlainPermissionManager(path)
    manager.update_account({"accessKey": "newuser1", "secretKey": "newsecret1", "defaultTopicPerm": "PUB",
                            "topicPerms": ["t1=SUB"], "admin": False})
    first = manager.data_version()["counter"]
    manager.validate(_send("any", SessionCredentials("newuser1", "newsecret1")), "1.1.1.1:1")
    manager.update_account({"accessKey": "newuser1", "defaultTopicPerm": "DENY"})
    assert manager.data_version()["counter"] == first + 1
    with pytest.raises(AclError):
        manager.validate(_send("any", SessionCredentials("newuser1", "newsecret1")), "1.1.1.1:1")
    manager.update_global_white_addrs(["127.0.0.*"])
    on_disk = yaml.safe_load(path.read_text())
    assert on_disk["globalWhiteRemoteAddresses"] == ["127.0.0.*"]
    assert on_disk["accounts"][0]["secretKey"] == "newsecret1"
    assert manager.delete_account("newuser1") and not manager.delete_account("newuser1")
    assert yaml.safe_load(path.read_text())["accounts"] == []


@pytest.mark.parametrize(("account", "remark"), [
    ({"accessKey": "short"}, "length should longer than 6"),
    ({"accessKey": "longenough", "secretKey": "tiny"}, "length should longer than 6"),
    ({"accessKey": "longenough", "secretKey": "longsecret", "topicPerms": ["t=WRITE"]},
     "The expected permissions are"),
    ({"accessKey": "longenough"}, "cannot be null"),
])
def test_bad_updates_are_refused_and_nothing_is_written(tmp_path: Path, account: dict[str, object],
                                                        remark: str) -> None:
    path = tmp_path / "plain_acl.yml"
    manager = PlainPermissionManager(path)
    with pytest.raises(AclError, match=remark):
        manager.update_account(account)
    assert not path.exists()
