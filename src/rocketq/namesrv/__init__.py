"""The name server: a stateless route registry (RouteInfoManager), its KV store and its processor."""

from rocketq.namesrv.kv_config import KVConfigManager
from rocketq.namesrv.route_info import RouteInfoManager
from rocketq.namesrv.server import NamesrvController

__all__ = ["KVConfigManager", "NamesrvController", "RouteInfoManager"]
