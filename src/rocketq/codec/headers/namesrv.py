"""Name server request/response headers: routes, broker registration, KV config, permissions."""

from __future__ import annotations

from rocketq.codec.headers._compiler import CommandHeader, Long, header

__all__ = [
    "DeleteKVConfigRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]


@header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str
    accept_standard_json_only: bool | None = None


@header
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    heartbeat_timeout_millis: Long | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: int = 0


@header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str


@header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int


@header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str
    cluster_name: str | None = None


@header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str
