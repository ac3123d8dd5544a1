"""The dashboard server: aiohttp on the same asyncio loop as the one AdminClient it reads through.

Every page is read-only except the ``POST`` routes (send, reset, broker config, topic and group
changes, dead-letter resend and consume-directly). Those refuse a request whose
Origin is not the dashboard itself (a page elsewhere posting a form to 127.0.0.1), and every
request must name this server in its Host header (unless it binds a wildcard address), which keeps
DNS-rebinding pages out.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from rocketq.acl.signature import SessionCredentials
from rocketq.admin import AdminClient
from rocketq.dashboard import broker, dlq, manage, pages, producers, trace
from rocketq.dashboard.acl_users import BrokerUsers
from rocketq.dashboard.auth import SESSIONS_KEY, DashboardUser, Sessions, Verifier, auth_middleware
from rocketq.dashboard.render import CHART_JS, CHART_PATH, TPS_CHART_PATH, TPS_JS, page
from rocketq.errors import (
    InvalidArgument,
    QueryNotFound,
    RemotingError,
    RocketQError,
    SubscriptionGroupNotExist,
    TopicNotExist,
)

__all__ = ["DashboardServer", "build_app", "start_dashboard"]

log = logging.getLogger("rocketq.dashboard")

ADMIN_KEY: web.AppKey[AdminClient] = web.AppKey("admin", AdminClient)
HOSTS_KEY: web.AppKey[set[str]] = web.AppKey("hosts", set)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_HTML = "text/html"
# where a not-found page points the user to: the list the missing name should have come from
_BACK = {"/topic": ("/topics", "all topics"), "/group": ("/groups", "all consumer groups"),
         "/producer": ("/producers", "all producer groups"), "/broker": ("/", "the cluster"),
         "/dlq": ("/groups", "all consumer groups")}


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type=_HTML, charset="utf-8")


def _status(exc: Exception) -> int:
    if isinstance(exc, TopicNotExist | SubscriptionGroupNotExist | QueryNotFound):
        return 404
    if isinstance(exc, InvalidArgument):
        return 400
    if isinstance(exc, RemotingError):
        return 502
    return 500


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    hosts = request.app[HOSTS_KEY]
    if hosts and request.host not in hosts:
        return web.Response(text="unexpected Host header", status=421)
    if request.method == "POST":
        origin = request.headers.get("Origin")
        # same-origin only: the form must come from a page this server served under this Host
        if origin is not None and origin.split("://", 1)[-1] != request.host:
            return web.Response(text="cross-site request refused", status=403)
    response: web.StreamResponse = await handler(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    # Only our own script file runs: an inline script, had one slipped through escaping, would not.
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'",
    )
    return response


def _page(title: str, render: Callable[[web.Request, AdminClient], Awaitable[str]]) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        admin = request.app[ADMIN_KEY]
        try:
            return _html(await render(request, admin))
        except (RocketQError, TimeoutError) as exc:
            status = _status(exc)
            if status == 404:  # a mistyped name or a stale link: the user's error, not the cluster's
                return _html(page("Not found", "", error=str(exc), back=_BACK.get(request.path)), status)
            log.warning("dashboard %s %s failed: %s", request.method, request.path_qs, exc)
            return _html(page(title, "", error=f"{type(exc).__name__}: {exc}"), status)

    return handle


async def _form(request: web.Request) -> dict[str, str]:
    data = await request.post()
    return {k: v for k, v in data.items() if isinstance(v, str)}


def _api(fetch: Callable[[AdminClient, str], Awaitable[dict[str, Any]]]) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return web.json_response(await fetch(request.app[ADMIN_KEY], request.query.get("name", "")))
        except (RocketQError, TimeoutError) as exc:
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=_status(exc))

    return handle


async def _cluster_json(admin: AdminClient, _: str) -> dict[str, Any]:
    return await pages.cluster_json(admin)


def _script(text: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type="text/javascript", charset="utf-8")

    return handle


async def _cluster(request: web.Request, admin: AdminClient) -> str:
    return await pages.cluster_page(admin)


async def _topics(request: web.Request, admin: AdminClient) -> str:
    return await pages.topics_page(admin, bool(request.query.get("system")))


async def _topic(request: web.Request, admin: AdminClient) -> str:
    return await pages.topic_page(admin, request.query.get("name", ""))


async def _groups(request: web.Request, admin: AdminClient) -> str:
    return await pages.groups_page(admin)


async def _group(request: web.Request, admin: AdminClient) -> str:
    return await pages.group_page(admin, request.query.get("name", ""))


async def _producers(request: web.Request, admin: AdminClient) -> str:
    return await producers.producers_page(admin)


async def _producer(request: web.Request, admin: AdminClient) -> str:
    return await producers.producer_page(admin, request.query.get("name", ""))


async def _broker(request: web.Request, admin: AdminClient) -> str:
    return await broker.broker_page(admin, request.query.get("addr", ""))


async def _broker_config(request: web.Request, admin: AdminClient) -> str:
    return await broker.update_broker_config(admin, await _form(request))


async def _topic_update(request: web.Request, admin: AdminClient) -> str:
    topic, notice = await manage.update_topic(admin, await _form(request))
    return await pages.topic_page(admin, topic, notice)


async def _topic_delete(request: web.Request, admin: AdminClient) -> str:
    return await pages.topics_page(admin, notice=await manage.delete_topic(admin, await _form(request)))


async def _group_update(request: web.Request, admin: AdminClient) -> str:
    group, notice = await manage.update_group(admin, await _form(request))
    return await pages.group_page(admin, group, notice)


async def _group_delete(request: web.Request, admin: AdminClient) -> str:
    return await pages.groups_page(admin, notice=await manage.delete_group(admin, await _form(request)))


async def _dlq(request: web.Request, admin: AdminClient) -> str:
    return await dlq.dlq_page(admin, request.query.get("group", ""))


async def _dlq_resend(request: web.Request, admin: AdminClient) -> str:
    group, notice = await dlq.resend(admin, await _form(request))
    return await dlq.dlq_page(admin, group, notice)


async def _dlq_consume(request: web.Request, admin: AdminClient) -> str:
    group, notice = await dlq.consume_directly(admin, await _form(request))
    return await dlq.dlq_page(admin, group, notice)


async def _messages_consume(request: web.Request, admin: AdminClient) -> str:
    form = await _form(request)
    _, notice = await dlq.consume_directly(admin, form)
    query = {"id": form.get("msgId", ""), "topic": form.get("topic", "")}
    return await pages.messages_page(admin, query, notice)


async def _messages(request: web.Request, admin: AdminClient) -> str:
    return await pages.messages_page(admin, dict(request.query))


async def _trace(request: web.Request, admin: AdminClient) -> str:
    return await trace.trace_page(admin, dict(request.query))


async def _send(request: web.Request, admin: AdminClient) -> str:
    return await pages.send_message(admin, await _form(request))


async def _reset(request: web.Request, admin: AdminClient) -> str:
    return await pages.reset_offset(admin, await _form(request))


def build_app(admin: AdminClient, allowed_hosts: set[str] | None = None,
              users: dict[str, DashboardUser] | None = None,
              verify: Verifier | None = None) -> web.Application:
    """The aiohttp application over a started ``admin``; ``allowed_hosts`` are the accepted
    ``host:port`` Host headers (empty: any); ``users`` or ``verify``: sign-in required
    (dashboard/auth.py)."""
    middlewares: list[Any] = [_guard]
    signs_in = bool(users) or verify is not None
    if signs_in:
        middlewares.append(auth_middleware)
    app = web.Application(middlewares=middlewares, client_max_size=4 * 1024 * 1024)
    if signs_in:
        app[SESSIONS_KEY] = Sessions(users or {}, verify=verify)
        app.router.add_get("/login", _unreachable)  # answered by auth_middleware
        app.router.add_post("/login", _unreachable)
        app.router.add_post("/logout", _unreachable)
    app[ADMIN_KEY] = admin
    app[HOSTS_KEY] = allowed_hosts or set()
    app.router.add_get("/", _page("Cluster", _cluster))
    app.router.add_get("/topics", _page("Topics", _topics))
    app.router.add_get("/topic", _page("Topic", _topic))
    app.router.add_get("/groups", _page("Consumer groups", _groups))
    app.router.add_get("/group", _page("Consumer group", _group))
    app.router.add_get("/producers", _page("Producers", _producers))
    app.router.add_get("/producer", _page("Producer group", _producer))
    app.router.add_get("/broker", _page("Broker", _broker))
    app.router.add_post("/broker/config", _page("Broker config", _broker_config))
    app.router.add_post("/topic/update", _page("Topic", _topic_update))
    app.router.add_post("/topic/delete", _page("Topics", _topic_delete))
    app.router.add_post("/group/update", _page("Consumer group", _group_update))
    app.router.add_post("/group/delete", _page("Consumer groups", _group_delete))
    app.router.add_get("/dlq", _page("Dead letters", _dlq))
    app.router.add_post("/dlq/resend", _page("Dead letters", _dlq_resend))
    app.router.add_post("/dlq/consume", _page("Dead letters", _dlq_consume))
    app.router.add_post("/messages/consume", _page("Messages", _messages_consume))
    app.router.add_get("/messages", _page("Messages", _messages))
    app.router.add_get("/trace", _page("Message trace", _trace))
    app.router.add_post("/send", _page("Send a message", _send))
    app.router.add_post("/reset", _page("Reset offset", _reset))
    app.router.add_get("/api/group", _api(pages.group_json))
    app.router.add_get("/api/cluster", _api(_cluster_json))
    app.router.add_get("/api/topic", _api(pages.topic_json))
    app.router.add_get(CHART_PATH, _script(CHART_JS))
    app.router.add_get(TPS_CHART_PATH, _script(TPS_JS))
    return app


async def _unreachable(request: web.Request) -> web.StreamResponse:
    raise web.HTTPNotFound()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


@dataclass(frozen=True, slots=True)
class DashboardServer:
    """A serving dashboard: ``url`` to open, ``close()`` to stop it and its admin client."""

    host: str
    port: int
    runner: web.AppRunner
    admin: AdminClient

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def close(self) -> None:
        await self.runner.cleanup()
        await self.admin.shutdown()


async def start_dashboard(
    namesrv_addr: str | None, host: str = "127.0.0.1", port: int = 0, *, timeout: float = 5.0,
    users: dict[str, DashboardUser] | None = None, credentials: SessionCredentials | None = None,
    acl_users: bool = False,
) -> DashboardServer:
    """Serve the dashboard on ``host:port`` (0: a free port) over the name servers ``namesrv_addr``;
    ``users``: a sign-in is required; ``acl_users``: a sign-in with the brokers' ACL 2.0 users
    (dashboard/acl_users.py); ``credentials``: the ACL account the dashboard acts as."""
    if users and acl_users:
        raise InvalidArgument("sign in with a users file or with the ACL 2.0 users, not both")
    admin = AdminClient(namesrv_addr, timeout=timeout, credentials=credentials)
    await admin.start()
    try:
        # Our own socket, so the port is known before serving (port 0) and the bind error is ours.
        sock = socket.create_server((host, port), family=_family(host))
    except BaseException:
        await admin.shutdown()
        raise
    bound_port = int(sock.getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    hosts = {f"{shown}:{bound_port}"}
    if host in ("127.0.0.1", "::1"):
        hosts.add(f"localhost:{bound_port}")
    elif host in ("0.0.0.0", "::", ""):
        hosts = set()  # reachable under any of the machine's names: no Host check to make
    verify = BrokerUsers(admin).verify if acl_users else None
    runner = web.AppRunner(build_app(admin, hosts, users, verify), access_log=None, handle_signals=False)
    try:
        await runner.setup()
        await web.SockSite(runner, sock).start()
    except BaseException:
        await runner.cleanup()
        sock.close()
        await admin.shutdown()
        raise
    log.info("dashboard serving on %s:%d, name server %s", host, bound_port, ";".join(admin.namesrv_addrs))
    return DashboardServer(host, bound_port, runner, admin)
