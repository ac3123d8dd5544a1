"""ACL 1.0 administration (mqadmin's updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion): each request goes to one broker, which rewrites its plain_acl.yml."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from rocketq.admin._base import AdminBase
from rocketq.codec.codes import RequestCode

__all__ = ["AclAdmin"]


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
