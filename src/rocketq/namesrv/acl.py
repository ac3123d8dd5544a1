"""The name server's ACL (rocketq's, RocketMQ 4.9 has none): what changes routes or settings needs
an admin signature, and a broker name stays with the account that registered it.

Without it anyone who reaches the port can REGISTER_BROKER a topic's route to an address of their
choosing (a topic ``HijackT`` routed to 127.0.0.1:1). Reads (routes, cluster info, KV reads)
stay open, so clients that sign nothing can still find brokers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from rocketq.acl import PlainPermissionManager, parse_request
from rocketq.acl.errors import AclError
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import Channel

if TYPE_CHECKING:
    from rocketq.namesrv.route_info import RouteInfoManager

__all__ = ["PROTECTED_CODES", "NamesrvAcl"]

log = logging.getLogger("rocketq.namesrv.acl")

PROTECTED_CODES: Final = frozenset({
    RequestCode.REGISTER_BROKER,
    RequestCode.UNREGISTER_BROKER,
    RequestCode.PUT_KV_CONFIG,
    RequestCode.DELETE_KV_CONFIG,
    RequestCode.UPDATE_NAMESRV_CONFIG,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV,
})
_OWNED: Final = (RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER)


class NamesrvAcl:
    def __init__(self, manager: PlainPermissionManager, routes: RouteInfoManager) -> None:
        self.manager = manager
        self._routes = routes
        # broker name -> who registered it: an access key, or "white:<ip>" for a white-listed peer
        self._owners: dict[str, str] = {}

    def validate(self, request: RemotingCommand, channel: Channel) -> None:
        code = request.code
        if code not in PROTECTED_CODES:
            return
        # Protected requests are rare (a registration every 30 s): a stat each keeps the file fresh.
        self.manager.reload_if_changed()
        req = parse_request(request, channel.remote_address)
        owned = self.manager.rules.authenticate(req)
        if owned is not None and not owned.admin:
            raise AclError(f"Need admin permission for request code={code}, "
                           f"but accessKey={owned.access_key} is not")
        if code in _OWNED:
            name = request.ext("brokerName")
            if name:
                who = owned.access_key if owned is not None else f"white:{req.remote_ip}"
                self._claim(name, who, code)

    def _claim(self, broker_name: str, who: str, code: int) -> None:
        owner = self._owners.get(broker_name)
        if owner is not None and not self._routes.knows_broker(broker_name):
            owner = None  # unregistered or expired: the name is free again
        if owner is not None and owner != who:
            log.warning("request %s for broker %s refused: it was registered by another identity",
                        code, broker_name)
            raise AclError(f"broker {broker_name} is registered by another identity; only that identity "
                           "may register or unregister it")
        self._owners[broker_name] = who
