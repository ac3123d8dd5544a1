"""ACL 1.0 administration (mqadmin's updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion): each request goes to one broker, which rewrites its plain_acl.yml."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from rocketq.admin._base import AdminBase
from rocketq.codec.codes import RequestCode

__all__ = ["AclAdmin", "AuthAdmin"]


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


class AclAdmin(AdminBase):
    async def create_and_update_plain_access_config(self, addr: str, config: Mapping[str, Any]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: ``config`` holds PlainAccessConfig's members (accessKey,
        secretKey, whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm, topicPerms,
        groupPerms); lists are sent comma-joined, as mqadmin sends them."""
        ext = {k: _text(v) for k, v in config.items() if v is not None}
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext)

    async def delete_plain_access_config(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG."""
        await self._call(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    async def update_global_white_addr_config(self, addr: str, addrs: Iterable[str]) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace the global white list."""
        await self._call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                         {"globalWhiteAddrs": ",".join(addrs)})

    async def examine_broker_cluster_acl_version_info(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_INFO: the broker's ACL file version (counter, timestamp)."""
        response = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        ext = response.fields() or {}
        out: dict[str, Any] = {k: ext.get(k) for k in ("brokerName", "brokerAddr", "clusterName")}
        out["version"] = orjson.loads(ext["version"]) if ext.get("version") else None
        return out

    async def get_broker_cluster_acl_config(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_CONFIG (admin only: the answer holds the secrets)."""
        response = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        data: dict[str, Any] = orjson.loads(response.body_bytes() or b"{}")
        return data


class AuthAdmin(AdminBase):
    """ACL 2.0 (RocketMQ 5.3): users and their ACLs on one broker (codes 3001-3010)."""

    async def _auth(self, addr: str, code: int, ext: dict[str, str], body: object = None) -> Any:
        payload = b"" if body is None else orjson.dumps(body)
        response = await self._call(addr, code, {k: v for k, v in ext.items() if v}, payload)
        raw = response.body_bytes()
        return orjson.loads(raw) if raw else None

    async def create_user(self, addr: str, username: str, password: str, user_type: str = "Normal") -> None:
        """AUTH_CREATE_USER: UserInfo {username, password, userType (Super/Normal)}."""
        await self._auth(addr, RequestCode.AUTH_CREATE_USER, {"username": username},
                         {"username": username, "password": password, "userType": user_type})

    async def update_user(self, addr: str, username: str, *, password: str | None = None,
                          user_type: str | None = None, user_status: str | None = None) -> None:
        """AUTH_UPDATE_USER: the members given change, the others stay."""
        await self._auth(addr, RequestCode.AUTH_UPDATE_USER, {"username": username},
                         {"username": username, "password": password, "userType": user_type,
                          "userStatus": user_status})

    async def delete_user(self, addr: str, username: str) -> None:
        await self._auth(addr, RequestCode.AUTH_DELETE_USER, {"username": username})

    async def get_user(self, addr: str, username: str) -> dict[str, Any]:
        """AUTH_GET_USER: username, userType, userStatus (never the password)."""
        result: dict[str, Any] = await self._auth(addr, RequestCode.AUTH_GET_USER, {"username": username})
        return result

    async def list_user(self, addr: str, filter: str = "") -> list[dict[str, Any]]:
        return list(await self._auth(addr, RequestCode.AUTH_LIST_USER, {"filter": filter}) or [])

    async def create_acl(self, addr: str, subject: str, resources: Iterable[str], actions: Iterable[str],
                         decision: str = "Allow", source_ips: Iterable[str] = (), *,
                         update: bool = False) -> None:
        """AUTH_CREATE_ACL (or AUTH_UPDATE_ACL): one CUSTOM entry per resource, all with
        ``actions``, ``decision`` and ``source_ips`` (mqadmin's createAcl -r a,b -a Pub,Sub)."""
        entries = [{"resource": r, "actions": list(actions), "sourceIps": list(source_ips),
                    "decision": decision} for r in resources]
        info = {"subject": subject, "policies": [{"policyType": "CUSTOM", "entries": entries}]}
        code = RequestCode.AUTH_UPDATE_ACL if update else RequestCode.AUTH_CREATE_ACL
        await self._auth(addr, code, {"subject": subject}, info)

    async def delete_acl(self, addr: str, subject: str, resource: str | None = None) -> None:
        """AUTH_DELETE_ACL: the entries of ``resource``, or the subject's whole ACL."""
        await self._auth(addr, RequestCode.AUTH_DELETE_ACL, {"subject": subject, "resource": resource or ""})

    async def get_acl(self, addr: str, subject: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._auth(addr, RequestCode.AUTH_GET_ACL, {"subject": subject})
        return result

    async def list_acl(self, addr: str, subject_filter: str = "", resource_filter: str = "") -> list[Any]:
        return list(await self._auth(addr, RequestCode.AUTH_LIST_ACL, {
            "subjectFilter": subject_filter, "resourceFilter": resource_filter}) or [])
