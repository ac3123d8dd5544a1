"""``rocketq dashboard --acl-users``: sign in with the brokers' ACL 2.0 users (RocketMQ 5.3).

A broker authenticates a user by the HMAC-SHA1 signature its password makes over a request
(5.3's DefaultAuthenticationHandler), so the dashboard checks a typed password the same way: it
signs one AUTH_GET_USER request for the user's own name with that name and password and lets
the broker judge it. The password never leaves the dashboard, not even to the broker (only the
signature does), and the dashboard keeps no secret of the user's. The other way, reading the
user with GET_USER under the dashboard's own account and comparing passwords, needs an answer
that carries the password (5.3's UserConverter puts it there; rocketq's broker leaves it out),
which would move every user's secret over the wire.

The answer decides the role: the user's own record (only a Super user may read it) is a Super
user, so ``admin``; a signature accepted but a refusal for not being a super user is a Normal
user, so ``read-only``; anything else (unknown user, disabled, wrong password, a broker without
ACL 2.0) refuses the sign-in. Users are kept per broker; the dashboard asks the first master of
the cluster (sorted by broker name), so keep users the same on every broker (`-c` does).
"""

from __future__ import annotations

import logging
from typing import Final

import orjson

from rocketq.acl.signature import SessionCredentials
from rocketq.admin import AdminClient
from rocketq.client.security import configure_transport
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.dashboard.auth import DashboardUser, Role
from rocketq.errors import RocketQError
from rocketq.remoting import RemotingClient

__all__ = ["BrokerUsers"]

log = logging.getLogger("rocketq.dashboard")

_NOT_SUPER: Final = "is not a super user"


class BrokerUsers:
    """Verifies a sign-in against the ACL 2.0 users of the cluster's first master."""

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin

    async def _broker(self) -> str | None:
        info = await self._admin.examine_broker_cluster_info()
        for name in sorted(info.broker_addr_table):
            addr = info.broker_addr_table[name].broker_addrs.get(0)
            if addr:
                return addr
        return None

    async def verify(self, username: str, password: str) -> DashboardUser | None:
        if not username or not password:
            return None
        try:
            addr = await self._broker()
            if addr is None:
                log.warning("dashboard sign-in of %s: no master broker to ask", username)
                return None
            response = await self._probe(addr, SessionCredentials(username, password))
        except (RocketQError, OSError) as e:
            log.warning("dashboard sign-in of %s: the broker could not be asked: %s", username, e)
            return None
        role = _role(username, response)
        if role is None:
            log.info("dashboard sign-in of %s refused by %s: %s", username, addr, response.remark)
            return None
        return DashboardUser(username, "", role)

    async def _probe(self, addr: str, creds: SessionCredentials) -> RemotingCommand:
        admin = self._admin
        remoting = RemotingClient(connect_timeout=min(admin.timeout, 3.0), idle_timeout=None)
        # The admin client's TLS settings, this user's signature.
        configure_transport(remoting, admin.security.replace(credentials=creds))
        try:
            request = RemotingCommand.request(RequestCode.AUTH_GET_USER, {"username": creds.access_key})
            return await remoting.invoke(addr, request, admin.timeout)
        finally:
            await remoting.close()


def _role(username: str, response: RemotingCommand) -> Role | None:
    if response.code == ResponseCode.SUCCESS:
        try:
            info = orjson.loads(response.body_bytes() or b"{}")
        except orjson.JSONDecodeError:
            return None
        if not isinstance(info, dict) or info.get("username") != username:
            return None
        return "admin" if str(info.get("userType", "")).lower() == "super" else "read-only"
    if response.code == ResponseCode.NO_PERMISSION and _NOT_SUPER in (response.remark or ""):
        return "read-only"
    return None
