"""Broker and name-server administration: runtime stats, configs, write permission, store
maintenance, KV config (mqadmin's cluster, broker and namesrv commands)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from rocketq.admin._base import AdminBase
from rocketq.admin.models import BrokerStatsData, ClusterBroker
from rocketq.codec.bodies import KVTable
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.timer import CheckpointValues
from rocketq.config import parse_properties
from rocketq.errors import ConfigError, InvalidArgument, ProtocolError, RemotingError, ServerError

__all__ = ["BrokerAdmin", "properties_dict", "properties_text"]

log = logging.getLogger("rocketq.admin")


def properties_dict(text: str, origin: str) -> dict[str, str]:
    """A RocketMQ properties body (``key=value`` lines) as a dict, in file order."""
    try:
        return {s.key: str(s.value) for s in parse_properties(text, origin)}
    except ConfigError as exc:
        raise ProtocolError(f"{origin}: {exc}") from None


def properties_text(props: Mapping[str, str]) -> str:
    for key, value in props.items():
        if not key or any(c in key for c in "=:\n\r") or "\n" in value or "\r" in value:
            raise InvalidArgument(f"bad config entry {key!r}={value!r}")
    return "".join(f"{k}={v}\n" for k, v in props.items())


class BrokerAdmin(AdminBase):
    # -- brokers ----------------------------------------------------------------------------------------

    async def fetch_broker_runtime_stats(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the KVTable ``brokerStatus`` / ``clusterList`` print."""
        response = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(sorted(KVTable.from_json(self._json(response, "GET_BROKER_RUNTIME_INFO")).table.items()))

    async def get_broker_ha_status(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS (RocketMQ 5's HARuntimeInfo): a master's slaves with their acked
        offsets and lag, or a slave's view of its master (docs/ha.md)."""
        response = await self._call(addr, RequestCode.GET_BROKER_HA_STATUS)
        info: dict[str, Any] = orjson.loads(self._json(response, "GET_BROKER_HA_STATUS"))
        return info

    async def cluster_list(self, cluster: str | None = None) -> list[ClusterBroker]:
        """``clusterList``: every broker of every (or one) cluster with its runtime stats.

        A broker that does not answer is still listed, with ``error`` set, so one dead broker does
        not hide the others.
        """
        info = await self.examine_broker_cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise InvalidArgument(f"cluster [{cluster}] not found")
        out = []
        for name, names in sorted(info.cluster_addr_table.items()):
            if cluster is not None and name != cluster:
                continue
            for broker_name in sorted(names):
                data = info.broker_addr_table.get(broker_name)
                if data is None:
                    continue
                for broker_id, addr in sorted(data.broker_addrs.items()):
                    try:
                        runtime, error = await self.fetch_broker_runtime_stats(addr), None
                    except (RemotingError, ServerError) as exc:
                        runtime, error = {}, str(exc)
                    out.append(ClusterBroker(name, broker_name, broker_id, addr, runtime, error))
        return out

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's effective configuration, RocketMQ key names."""
        response = await self._call(addr, RequestCode.GET_BROKER_CONFIG)
        return properties_dict(response.body_bytes().decode("utf-8", "replace"), "GET_BROKER_CONFIG")

    async def get_timer_check_point(self, addr: str) -> CheckpointValues:
        """GET_TIMER_CHECK_POINT (RocketMQ 5): where the broker's timer wheel stands."""
        response = await self._call(addr, RequestCode.GET_TIMER_CHECK_POINT)
        return CheckpointValues.decode(response.body_bytes())

    async def get_timer_metrics(self, addr: str) -> dict[str, int]:
        """GET_TIMER_METRICS (RocketMQ 5): pending timer messages per real topic."""
        response = await self._call(addr, RequestCode.GET_TIMER_METRICS)
        try:
            timing = orjson.loads(self._json(response, "GET_TIMER_METRICS")).get("timingCount") or {}
            return {str(t): int(m.get("count", 0)) for t, m in sorted(timing.items())}
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
            raise ProtocolError(f"GET_TIMER_METRICS: {exc}") from None

    async def update_broker_config(self, addr: str, props: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG. The broker refuses (NO_PERMISSION) any key naming a path or command."""
        await self._call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, properties_text(props).encode())

    async def clean_expired_consume_queue(self, addr: str) -> None:
        await self._call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)

    async def clean_unused_topic(self, addr: str) -> None:
        """CLEAN_UNUSED_TOPIC: the broker drops consume queues of topics it no longer has."""
        await self._call(addr, RequestCode.CLEAN_UNUSED_TOPIC)

    async def delete_expired_commit_log(self, addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG: commit-log files past fileReservedTime are deleted now."""
        await self._call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    async def get_all_producer_info(self, addr: str) -> dict[str, list[dict[str, object]]]:
        """GET_ALL_PRODUCER_INFO: producer group -> its connections (clientId, remoteIP, language, ...)."""
        response = await self._call(addr, RequestCode.GET_ALL_PRODUCER_INFO)
        data = orjson.loads(self._json(response, "GET_ALL_PRODUCER_INFO")).get("data") or {}
        return {str(g): list(conns) for g, conns in data.items()}

    async def view_broker_stats_data(self, addr: str, stats_name: str, stats_key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA, e.g. (``TOPIC_PUT_NUMS``, topic) or (``GROUP_GET_NUMS``, topic@group)."""
        response = await self._call(
            addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": stats_key}
        )
        return BrokerStatsData.from_json(self._json(response, "VIEW_BROKER_STATS_DATA"))

    # -- name servers -------------------------------------------------------------------------------------

    async def wipe_write_perm_of_broker(self, broker_name: str) -> dict[str, int]:
        """WIPE_WRITE_PERM_OF_BROKER on every name server: name server -> topics changed."""
        return await self._write_perm(RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount")

    async def add_write_perm_of_broker(self, broker_name: str) -> dict[str, int]:
        """ADD_WRITE_PERM_OF_BROKER on every name server: name server -> topics changed."""
        return await self._write_perm(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")

    async def _write_perm(self, code: int, broker_name: str, count_key: str) -> dict[str, int]:
        out = {}
        for addr, response in (await self._each_namesrv(code, {"brokerName": broker_name})).items():
            try:
                out[addr] = int((response.ext_fields or {}).get(count_key, "0"))
            except ValueError:
                raise ProtocolError(f"{addr}: bad {count_key}") from None
        return out

    async def get_namesrv_config(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG of every name server."""
        out = {}
        for addr in self.namesrv_addrs:
            response = await self._call(addr, RequestCode.GET_NAMESRV_CONFIG)
            text = response.body_bytes().decode("utf-8", "replace")
            out[addr] = properties_dict(text, "GET_NAMESRV_CONFIG")
        return out

    async def update_namesrv_config(self, props: Mapping[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG on every name server (path keys are refused by the server)."""
        await self._each_namesrv(RequestCode.UPDATE_NAMESRV_CONFIG, None, properties_text(props).encode())

    async def create_and_update_kv_config(self, namespace: str, key: str, value: str) -> None:
        ext = {"namespace": namespace, "key": key, "value": value}
        await self._each_namesrv(RequestCode.PUT_KV_CONFIG, ext)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        await self._each_namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        response = await self._namesrv(
            RequestCode.GET_KV_CONFIG,
            {"namespace": namespace, "key": key},
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return (response.ext_fields or {}).get("value")

    async def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str]:
        response = await self._namesrv(
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            {"namespace": namespace},
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND or not response.body_bytes():
            return {}
        return dict(KVTable.from_json(response.body_bytes()).table)
