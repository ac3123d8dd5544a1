"""The broker's ACL: the validator every request passes (BrokerController.initialAcl), the watch of
plain_acl.yml, and the admin codes 50-54 (AdminBrokerProcessor's access-config requests)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from rocketq.acl import PlainPermissionManager, RequestSigner, SessionCredentials, parse_request
from rocketq.acl.errors import AclError
from rocketq.acl.signature import ACCESS_KEY
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting.channel import Channel

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = ["AclAdminProcessor", "AclService", "acl_file_path"]

log = logging.getLogger("rocketq.broker.acl")

# Java's AclFileWatchService checks its files every 500 ms; a second is quick enough for an edit.
WATCH_INTERVAL: Final = 1.0
# RocketMQ 4.9's ResponseCode values for failed ACL changes (5.x reused the numbers for pop).
UPDATE_AND_CREATE_ACL_CONFIG_FAILED: Final = 209
DELETE_ACL_CONFIG_FAILED: Final = 210
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: Final = 211


def acl_file_path(configured: str, data_dir: Path) -> Path:
    """``plainAclFile``, or ``<data-dir>/conf/plain_acl.yml`` ($ROCKETMQ_HOME/conf/plain_acl.yml)."""
    return Path(configured).expanduser() if configured else data_dir / "conf" / "plain_acl.yml"


class AclService:
    """One server's ACL: validate each request, reload the file when it changes.

    ``v1`` (aclEnable): plain_acl.yml's accounts, and 2.0 users checked in full. Without it, 5.3's
    switches: ``authentication`` (a user's signature), ``authorization`` (the user's policies)."""

    def __init__(self, path: Path, *, v1: bool = True, authentication: bool = False,
                 authorization: bool = False, init_user: str = "") -> None:
        from rocketq.broker.auth2 import Auth2Store

        self.v1 = v1
        self.authentication = authentication or v1
        self.authorization = authorization or v1
        self.manager = PlainPermissionManager(path)
        # ACL 2.0's users and ACLs, beside the 1.0 file (broker/auth2.py)
        self.auth2 = Auth2Store(path.with_name("acl2.json"))
        if init_user.strip():
            self.auth2.init_user(init_user)
        if v1 and not path.exists():
            log.warning("aclEnable=true but %s does not exist: only white-listed peers get in", path)
        if self.authorization and not self.authentication:
            log.warning("authorizationEnabled without authenticationEnabled: a request is judged by "
                        "the user its AccessKey names, unverified (as RocketMQ 5.3 does)")

    def validate(self, request: RemotingCommand, channel: Channel) -> None:
        """A 1.0 account of plain_acl.yml is checked as 1.0; a 2.0 user (a name no 1.0 account
        has) as 2.0; anything else is refused by the 1.0 rules (with their remarks)."""
        if not self.v1:
            self._validate_v2(request, channel)
            return
        users = self.auth2.rules.users
        if users:
            fields = request.fields()
            ak = fields.get(ACCESS_KEY) if fields else None
            if ak is not None and ak in users and ak not in self.manager.rules.accounts:
                addr = channel.remote_address
                req = parse_request(request, addr)
                rules = self.auth2.rules
                rules.authorize(rules.authenticate(req), request, req.remote_ip)
                return
        self.manager.validate(request, channel.remote_address)

    def _validate_v2(self, request: RemotingCommand, channel: Channel) -> None:
        """RocketMQ 5.3's AuthenticationProcessor / AuthorizationProcessor, each when enabled."""
        rules = self.auth2.rules
        req = parse_request(request, channel.remote_address)
        if self.authentication:
            user = rules.authenticate(req)
        else:
            found = rules.users.get(req.access_key or "")
            if found is None:
                raise AclError(f"User:{req.access_key} is not found.")
            user = found
        if self.authorization:
            rules.authorize(user, request, req.remote_ip)

    def reload_if_changed(self) -> None:
        self.manager.reload_if_changed()

    def signer(self, access_key: str = "") -> RequestSigner | None:
        """A signer for this server's own outgoing requests: ``access_key``'s account, or the
        first admin account of the file; None when there is none."""
        accounts = self.manager.rules.accounts
        account = accounts.get(access_key) if access_key else next(
            (a for a in accounts.values() if a.admin), None)
        if account is None:
            return None
        return RequestSigner(SessionCredentials(account.access_key, account.secret_key))

    def outgoing_hook(self, access_key: str = "") -> Callable[[RemotingCommand], None]:
        """A request hook signing with the account as the file says now (it may be edited)."""
        def sign(cmd: RemotingCommand) -> None:
            signer = self.signer(access_key)
            if signer is not None:
                signer(cmd)
        return sign


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


class AclAdminProcessor:
    """UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51), GET_BROKER_CLUSTER_ACL_INFO (52),
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) and GET_BROKER_CLUSTER_ACL_CONFIG (54)."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    def _manager(self) -> PlainPermissionManager | None:
        acl: AclService | None = getattr(self._ctl, "acl", None)
        return None if acl is None else acl.manager

    @staticmethod
    def _disabled(request: RemotingCommand, code: int) -> RemotingCommand:
        return request.make_response(code, "The broker does not enable acl")

    def update_and_create_access_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return self._disabled(request, UPDATE_AND_CREATE_ACL_CONFIG_FAILED)
        ext = request.fields() or {}
        account: dict[str, Any] = {k: ext.get(k) for k in (
            "accessKey", "secretKey", "whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm")}
        account["topicPerms"] = _split(ext.get("topicPerms"))
        account["groupPerms"] = _split(ext.get("groupPerms"))
        account["admin"] = (ext.get("admin") or "false").lower() == "true"
        try:
            manager.update_account(account)
        except (AclError, OSError) as e:
            log.warning("update acl config of %s from %s failed: %s", account["accessKey"],
                        channel.remote_address, e)
            return request.make_response(UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(e))
        log.info("acl config of %s updated by %s", account["accessKey"], channel.remote_address)
        return request.make_response(ResponseCode.SUCCESS)

    def delete_access_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return self._disabled(request, DELETE_ACL_CONFIG_FAILED)
        ak = request.ext("accessKey") or ""
        log.info("DeleteAccessConfig called by %s", channel.remote_address)
        try:
            deleted = manager.delete_account(ak)
        except OSError as e:
            return request.make_response(DELETE_ACL_CONFIG_FAILED, str(e))
        if not deleted:
            return request.make_response(
                DELETE_ACL_CONFIG_FAILED,
                f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed.")
        return request.make_response(ResponseCode.SUCCESS)

    def update_global_white_addrs(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return self._disabled(request, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)
        path = request.ext("aclFileFullPath")
        # A path from the wire names no file but ours (DESIGN: no path is set over the wire).
        if path and Path(path).expanduser().absolute() != manager.path.absolute():
            return request.make_response(UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                         f"{path} is not this broker's ACL file")
        addrs = _split(request.ext("globalWhiteAddrs")) or []
        try:
            manager.update_global_white_addrs(addrs)
        except (AclError, OSError) as e:
            return request.make_response(UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(e))
        return request.make_response(ResponseCode.SUCCESS)

    def get_broker_cluster_acl_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The broker does not enable acl")
        version = manager.data_version()
        ctl = self._ctl
        return request.make_response(ResponseCode.SUCCESS, ext_fields={
            "version": orjson.dumps(version).decode(),
            "allAclFileVersion": orjson.dumps({str(manager.path): version}).decode(),
            "brokerName": ctl.broker_name,
            "brokerAddr": ctl.address,
            "clusterName": ctl.cluster_name,
        })

    def get_broker_cluster_acl_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        manager = self._manager()
        if manager is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The broker does not enable acl")
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(manager.all_config()))
