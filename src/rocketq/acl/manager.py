"""PlainPermissionManager: one plain_acl.yml on disk, its rules in memory, and the admin changes
(update/delete an account, the global white list) written back with a bumped dataVersion.

File I/O only (no sockets, no event loop): the broker and name server call ``reload_if_changed``
from a timer, as RocketMQ's AclFileWatchService polls the file.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rocketq.acl.errors import AclError
from rocketq.acl.model import (
    ACCESS_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_LENGTH,
    AccessRequest,
    AclRules,
    check_resource_perms,
)
from rocketq.acl.resource import parse_request, remote_ip
from rocketq.codec.command import RemotingCommand

__all__ = ["PlainPermissionManager", "load_rules"]

log = logging.getLogger("rocketq.acl")

_IP_CACHE_MAX = 65536

# PlainAccessConfig's members, in the order Java writes them.
ACCOUNT_KEYS = ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                "defaultGroupPerm", "topicPerms", "groupPerms")


def load_rules(path: Path) -> tuple[AclRules, dict[str, Any]]:
    """The rules of one file and its raw mapping; a missing or empty file holds no rules."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AclRules(), {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AclError(f"{path}: not YAML: {e}") from None
    if data is None:
        return AclRules(), {}
    if not isinstance(data, dict):
        raise AclError(f"{path}: the top level is not a mapping")
    return AclRules.from_mapping(data), data


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


class PlainPermissionManager:
    """The ACL of one server: ``validate`` a request, reload on change, apply admin changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rules = AclRules()
        self._data: dict[str, Any] = {}
        self._stamp: tuple[int, int] | None = None
        self._ips: dict[str, str] = {}  # "ip:port" -> ip, for the channels seen
        self.reload()

    # -- the file ---------------------------------------------------------------------------------

    def reload(self) -> None:
        """Read the file now. A broken file keeps the rules that were in force (and says why)."""
        stamp = _stamp(self.path)
        try:
            rules, data = load_rules(self.path)
        except AclError as e:
            log.error("plain acl file %s not loaded, the previous rules stay: %s", self.path, e)
            self._stamp = stamp
            return
        self.rules, self._data, self._stamp = rules, data, stamp
        log.info("plain acl file %s loaded: %d accounts, %d global white addresses", self.path,
                 len(rules.accounts), len(rules.global_white_addrs))

    def reload_if_changed(self) -> bool:
        if _stamp(self.path) == self._stamp:
            return False
        self.reload()
        return True

    def _write(self, data: dict[str, Any]) -> None:
        version = (data.get("dataVersion") or [{}])[0] or {}
        counter = int(version.get("counter", 0)) + 1
        data["dataVersion"] = [{"counter": counter, "timestamp": int(time.time() * 1000)}]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
        os.replace(tmp, self.path)
        self.reload()

    # -- checks -----------------------------------------------------------------------------------

    def validate(self, cmd: RemotingCommand, remote_addr: str) -> None:
        """Raise ``AclError`` (NO_PERMISSION with Java's remark) when ``cmd`` may not pass."""
        ip = self._ips.get(remote_addr)
        if ip is None:
            if len(self._ips) >= _IP_CACHE_MAX:
                self._ips.clear()
            ip = self._ips[remote_addr] = remote_ip(remote_addr)
        self.rules.check(parse_request(cmd, remote_addr, ip))

    def check(self, req: AccessRequest) -> None:
        self.rules.check(req)

    # -- admin changes (codes 50-54) --------------------------------------------------------------

    def update_account(self, account: Mapping[str, Any]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create the account, or change the members given."""
        ak = account.get("accessKey")
        sk = account.get("secretKey")
        if not ak or len(str(ak)) <= ACCESS_KEY_MIN_LENGTH:
            raise AclError(f"The accessKey={ak} cannot be null and length should longer than 6")
        if sk is not None and len(str(sk)) <= SECRET_KEY_MIN_LENGTH:
            raise AclError("The secretKey=*** value length should longer than 6")
        check_resource_perms(account.get("topicPerms"))
        check_resource_perms(account.get("groupPerms"))
        data = dict(self._data)
        accounts = [dict(a) for a in data.get("accounts") or ()]
        entry = next((a for a in accounts if a.get("accessKey") == ak), None)
        if entry is None:
            if sk is None:
                raise AclError(f"The accessKey={ak} and secretKey=*** cannot be null and length "
                               "should longer than 6")
            entry = {}
            accounts.append(entry)
        for key in ACCOUNT_KEYS:
            if account.get(key) is not None:
                entry[key] = account[key]
        data["accounts"] = accounts
        AclRules.from_mapping(data)  # refuse what would not load, before writing it
        self._write(data)

    def delete_account(self, access_key: str) -> bool:
        data = dict(self._data)
        accounts = [a for a in data.get("accounts") or () if a.get("accessKey") != access_key]
        if len(accounts) == len(data.get("accounts") or ()):
            return False
        data["accounts"] = accounts
        self._write(data)
        return True

    def update_global_white_addrs(self, addrs: list[str]) -> None:
        data = dict(self._data)
        data["globalWhiteRemoteAddresses"] = list(addrs)
        AclRules.from_mapping(data)
        self._write(data)

    # -- reads ------------------------------------------------------------------------------------

    def data_version(self) -> dict[str, int]:
        version = (self._data.get("dataVersion") or [{}])[0] or {}
        return {"stateVersion": 0, "timestamp": int(version.get("timestamp", 0)),
                "counter": int(version.get("counter", 0))}

    def all_config(self) -> dict[str, Any]:
        """AclConfig's JSON: the accounts (secrets included, as Java answers admins) and whites."""
        return {
            "globalWhiteAddrs": list(self.rules.global_white_addrs),
            "plainAccessConfigs": [
                {"accessKey": a.access_key, "secretKey": a.secret_key,
                 "whiteRemoteAddress": a.white_remote_address, "admin": a.admin,
                 **{k: v for k, v in _raw_account(self._data, a.access_key).items()
                    if k in ("defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms")}}
                for a in self.rules.accounts.values()
            ],
        }


def _raw_account(data: Mapping[str, Any], access_key: str) -> dict[str, Any]:
    for raw in data.get("accounts") or ():
        if isinstance(raw, Mapping) and raw.get("accessKey") == access_key:
            return dict(raw)
    return {}
