"""DefaultRequestProcessor: every request code the name server answers (PROTOCOL.md §2.2).

Handlers are plain methods registered by code in :meth:`DefaultRequestProcessor.register`. Route
queries and registrations answer synchronously (no Task per request); only the handlers that
write files (KV config, UPDATE_NAMESRV_CONFIG) are coroutines, and they do the writing in a
worker thread. A handler reports a bad request by raising a ``RocketQError`` whose code and text
the transport turns into the response; nothing a peer sends can stop the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketq.codec.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    CommandHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
    header,
)
from rocketq.config import check_updatable, dump_properties, parse_properties
from rocketq.configfile import write_atomically
from rocketq.errors import (
    ConfigError,
    InvalidParameter,
    NoPermission,
    ProtocolError,
    QueryNotFound,
    RestartRequired,
    SystemError_,
    TopicNotExist,
)
from rocketq.namesrv.config import NamesrvConfig
from rocketq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG

if TYPE_CHECKING:
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting import Channel, RemotingServer

log = logging.getLogger(__name__)

# MQVersion ordinals that change the wire format of REGISTER_BROKER.
V3_0_11 = 37

# Unit-topic list codes (RequestCode.java) that codes.py does not name.
GET_UNIT_TOPIC_LIST = 311
GET_HAS_UNIT_SUB_TOPIC_LIST = 312
GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313

# RocketMQ's own blacklist (NamesrvConfig.configBlackList): refused with NO_PERMISSION, as there.
_CONFIG_BLACKLIST = frozenset({"configblacklist", "configstorepath", "kvconfigpath"})
# NamesrvConfig keys with case and separators removed: a known key that check_updatable refuses
# names a path, which is a permission matter rather than a typo.
_NAMESRV_KEYS = frozenset(name.replace("_", "") for name in NamesrvConfig.__dataclass_fields__)


@header
class RegisterTopicRequestHeader(CommandHeader):
    topic: str


@header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int


def _body(request: RemotingCommand) -> bytes:
    return request.body_bytes()


def _decode_error(what: str, exc: ProtocolError) -> InvalidParameter:
    return InvalidParameter(f"bad {what} body: {exc}")


class DefaultRequestProcessor:
    """RocketMQ's DefaultRequestProcessor + ClientRequestProcessor, over the controller's state."""

    def __init__(self, controller: NamesrvController) -> None:
        self._ctl = controller
        self._route = controller.route_info_manager
        self._kv = controller.kv_config_manager
        self._config_lock = asyncio.Lock()
        # topic -> encoded route, valid while neither the tables nor the KV store changed.
        self._route_cache: dict[str, bytes] = {}
        self._route_cache_key: tuple[int, int, bool] = (-1, -1, False)
        self._kv_epoch = 0

    def register(self, server: RemotingServer) -> None:
        handlers: dict[int, Callable[[RemotingCommand, Channel], Any]] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.QUERY_DATA_VERSION: self.query_broker_topic_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list_from_nameserver,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_to_namesrv,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list_from_ns,
            GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_un_unit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
        }
        for code, handler in handlers.items():
            server.register_processor(code, handler)

    # -- brokers -----------------------------------------------------------------------------------

    def register_broker(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
        body = _body(request)
        if hdr.body_crc32 != 0 and (zlib.crc32(body) & 0x7FFFFFFF) != hdr.body_crc32:
            log.warning("receive registerBroker request,crc32 not match,from %s", channel.remote_address)
            raise SystemError_("crc32 not match")

        wrapper: TopicConfigSerializeWrapper
        filter_servers: tuple[str, ...] = ()
        if not body:
            # RocketMQ zeroes the version so the next register with topics always counts as a change.
            wrapper = TopicConfigSerializeWrapper(data_version=DataVersion(0, 0, 0))
        else:
            try:
                if request.version >= V3_0_11:
                    decoded = RegisterBrokerBody.decode(body, hdr.compressed, request.version)
                    wrapper = decoded.topic_config_serialize_wrapper
                    filter_servers = decoded.filter_server_list
                else:
                    wrapper = TopicConfigSerializeWrapper.from_json(body)
            except ProtocolError as e:
                raise _decode_error("register broker", e) from None

        result = self._route.register_broker(
            hdr.cluster_name,
            hdr.broker_addr,
            hdr.broker_name,
            hdr.broker_id,
            hdr.ha_server_addr,
            wrapper,
            filter_servers,
            channel,
            timeout_millis=hdr.heartbeat_timeout_millis,
            enable_acting_master=hdr.enable_acting_master,
        )
        ext = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr).to_ext()
        order_conf = self._kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        out = KVTable(order_conf).to_json() if order_conf is not None else b""
        return request.make_response(ext_fields=ext, body=out)

    def unregister_broker(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = UnRegisterBrokerRequestHeader.from_ext(request.ext_fields)
        self._route.unregister_broker(hdr.cluster_name, hdr.broker_addr, hdr.broker_name, hdr.broker_id)
        return request.make_response()

    def query_broker_topic_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = QueryDataVersionRequestHeader.from_ext(request.ext_fields)
        try:
            data_version = DataVersion.from_json(_body(request))
        except ProtocolError as e:
            raise _decode_error("data version", e) from None
        changed = self._route.is_broker_topic_config_changed(hdr.cluster_name, hdr.broker_addr, data_version)
        if not changed:
            # An unchanged broker skips REGISTER_BROKER, so this query is its heartbeat.
            self._route.update_broker_info_update_timestamp(hdr.cluster_name, hdr.broker_addr)
        ours = self._route.query_broker_topic_config(hdr.cluster_name, hdr.broker_addr)
        return request.make_response(
            ext_fields=QueryDataVersionResponseHeader(changed).to_ext(),
            body=ours.to_json() if ours is not None else b"",
        )

    def wipe_write_perm_of_broker(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = WipeWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self._route.operate_write_perm_of_broker(hdr.broker_name, wipe=True)
        log.info(
            "wipe write perm of broker[%s], client: %s, %s", hdr.broker_name, channel.remote_address, count
        )
        return request.make_response(ext_fields=WipeWritePermOfBrokerResponseHeader(count).to_ext())

    def add_write_perm_of_broker(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = AddWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self._route.operate_write_perm_of_broker(hdr.broker_name, wipe=False)
        log.info(
            "add write perm of broker[%s], client: %s, %s", hdr.broker_name, channel.remote_address, count
        )
        return request.make_response(ext_fields=AddWritePermOfBrokerResponseHeader(count).to_ext())

    def get_broker_cluster_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return request.make_response(body=self._route.get_all_cluster_info().to_json())

    # -- routes and topics ---------------------------------------------------------------------------

    def get_route_info_by_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
        config = self._ctl.namesrv_config
        if config.need_wait_for_service and not self._ctl.ready_for_service:
            log.warning("name remoting_server not ready. request code %s", request.code)
            raise SystemError_("name remoting_server not ready")
        key = (self._route.epoch, self._kv_epoch, config.order_message_enable)
        if key != self._route_cache_key:
            self._route_cache.clear()
            self._route_cache_key = key
        content = self._route_cache.get(hdr.topic)
        if content is None:
            route = self._route.pickup_topic_route_data(hdr.topic)
            if route is None:
                raise TopicNotExist(f"No topic route info in name server for the topic: {hdr.topic}")
            if config.order_message_enable:
                conf = self._kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, hdr.topic)
                if conf is not None:
                    route = TopicRouteData(
                        route.queue_datas,
                        route.broker_datas,
                        route.filter_server_table,
                        conf,
                        route.topic_queue_mapping_by_broker,
                    )
            # Always standard JSON (quoted map keys), whatever the client's version: every client
            # reads it, and the Go client needs it compact.
            content = route.to_json()
            if len(self._route_cache) > 65536:
                self._route_cache.clear()
            self._route_cache[hdr.topic] = content
        return request.make_response(body=content)

    def get_all_topic_list_from_nameserver(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        if not self._ctl.namesrv_config.enable_all_topic_list:
            log.warning("getAllTopicListFromNameserver is disabled")
            raise SystemError_("disable")
        return request.make_response(body=self._route.get_all_topic_list().to_json())

    def delete_topic_in_namesrv(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = DeleteTopicFromNamesrvRequestHeader.from_ext(request.ext_fields)
        self._route.delete_topic(hdr.topic, hdr.cluster_name)
        return request.make_response()

    def register_topic_to_namesrv(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = RegisterTopicRequestHeader.from_ext(request.ext_fields)
        body = _body(request)
        if body:
            try:
                route = TopicRouteData.from_json(body)
            except ProtocolError as e:
                raise _decode_error("topic route", e) from None
            unknown = self._route.register_topic(hdr.topic, route.queue_datas)
            if unknown:
                raise InvalidParameter(f"Register topic contains illegal broker: {', '.join(unknown)}")
        return request.make_response()

    def get_topics_by_cluster(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        if not self._ctl.namesrv_config.enable_topic_list:
            raise SystemError_("disable")
        hdr = GetTopicsByClusterRequestHeader.from_ext(request.ext_fields)
        return request.make_response(body=self._route.get_topics_by_cluster(hdr.cluster).to_json())

    def get_system_topic_list_from_ns(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return request.make_response(body=self._route.get_system_topic_list().to_json())

    def get_unit_topic_list(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return self._topic_list(request, self._route.get_unit_topics)

    def get_has_unit_sub_topic_list(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return self._topic_list(request, self._route.get_has_unit_sub_topic_list)

    def get_has_unit_sub_un_unit_topic_list(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        return self._topic_list(request, self._route.get_has_unit_sub_un_unit_topic_list)

    def _topic_list(self, request: RemotingCommand, query: Callable[[], Any]) -> RemotingCommand:
        if not self._ctl.namesrv_config.enable_topic_list:
            raise SystemError_("disable")
        return request.make_response(body=query().to_json())

    # -- KV config --------------------------------------------------------------------------------------

    async def put_kv_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = PutKVConfigRequestHeader.from_ext(request.ext_fields)
        self._kv.put_kv_config(hdr.namespace, hdr.key, hdr.value)
        self._kv_epoch += 1
        await self._persist_kv()
        return request.make_response()

    def get_kv_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = GetKVConfigRequestHeader.from_ext(request.ext_fields)
        value = self._kv.get_kv_config(hdr.namespace, hdr.key)
        if value is None:
            raise QueryNotFound(f"No config item, Namespace: {hdr.namespace} Key: {hdr.key}")
        return request.make_response(ext_fields=GetKVConfigResponseHeader(value).to_ext())

    async def delete_kv_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = DeleteKVConfigRequestHeader.from_ext(request.ext_fields)
        if self._kv.delete_kv_config(hdr.namespace, hdr.key):
            self._kv_epoch += 1
            await self._persist_kv()
        return request.make_response()

    def get_kv_list_by_namespace(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        hdr = GetKVListByNamespaceRequestHeader.from_ext(request.ext_fields)
        table = self._kv.get_kv_list_by_namespace(hdr.namespace)
        if table is None:
            raise QueryNotFound(f"No config item, Namespace: {hdr.namespace}")
        return request.make_response(body=KVTable(table).to_json())

    async def _persist_kv(self) -> None:
        """Answer once the table is on disk (its writer coalesces concurrent changes)."""
        self._kv.writer.request()
        await self._kv.writer.settled()

    # -- name server config ------------------------------------------------------------------------------

    def get_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        text = dump_properties([self._ctl.namesrv_config, self._ctl.server_config])
        return request.make_response(body=text.encode())

    async def update_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        log.info("updateConfig called by %s", channel.remote_address)
        body = _body(request)
        if not body:
            return request.make_response()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidParameter("config body is not UTF-8 properties text") from None
        try:
            settings = parse_properties(text, "UPDATE_NAMESRV_CONFIG")
        except ConfigError as e:
            raise InvalidParameter(f"string2Properties error: {e}") from None
        updates = {s.key: str(s.value) for s in settings}
        for key in updates:
            _check_key(key)
        async with self._config_lock:
            try:
                change = self._ctl.runtime_config.update(updates, origin="UPDATE_NAMESRV_CONFIG")
            except ConfigError as e:
                raise InvalidParameter(str(e)) from None
            log.info("update namesrv config: %s", updates)
            await self._persist_config(change.new(NamesrvConfig))
        return request.make_response()

    async def _persist_config(self, config: NamesrvConfig) -> None:
        path = config.config_store_path
        if not path:
            return
        text = dump_properties([config]).encode()
        try:
            # one writer: update_config holds _config_lock across this write
            await asyncio.to_thread(write_atomically, Path(os.path.expanduser(path)), text)
        except OSError as e:
            log.error("persist namesrv config to %s failed: %s", path, e)


def _check_key(key: str) -> None:
    """CVE-2023-37582: a key that names a path or command never changes over the wire."""
    try:
        check_updatable(key, (NamesrvConfig,))
    except RestartRequired as e:
        log.warning("updateConfig refused %s: %s", key, e)
        raise NoPermission(f"Can not update config: {e}") from None
    except ConfigError as e:
        compact = "".join(ch for ch in key.rpartition(".")[2].lower() if ch.isalnum())
        known_field = compact in _NAMESRV_KEYS
        if compact in _CONFIG_BLACKLIST or known_field:
            log.warning("updateConfig refused a key in the black list: %s", key)
            raise NoPermission(f"Can not update config in black list: {key}") from None
        raise InvalidParameter(f"Can not update config {key}: {e}") from None

