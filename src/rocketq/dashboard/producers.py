"""The producer pages: producer groups and their connections, from every master's GET_ALL_PRODUCER_INFO.

rocketmq-dashboard asks for a topic and a group (GET_PRODUCER_CONNECTION_LIST on the topic's
brokers); asking every master for all of its producers finds a group without knowing a topic.
"""

from __future__ import annotations

import asyncio

from rocketq.admin import AdminClient
from rocketq.dashboard.render import Raw, esc, fmt_ms, link, page, table
from rocketq.errors import QueryNotFound, RocketQError

__all__ = ["producer_page", "producers_page"]

Conn = dict[str, object]


async def _all_producers(admin: AdminClient) -> tuple[dict[str, list[tuple[str, Conn]]], list[str]]:
    """group -> [(broker name, connection)], and one line per master that could not be read."""
    masters = await admin.master_addrs()

    async def one(name: str, addr: str) -> tuple[str, dict[str, list[Conn]] | str]:
        try:
            return name, await admin.get_all_producer_info(addr)
        except RocketQError as exc:  # one broker down must not hide the others' producers
            return name, f"{name} ({addr}): {exc}"

    groups: dict[str, list[tuple[str, Conn]]] = {}
    errors = []
    for name, info in await asyncio.gather(*(one(n, a) for n, a in sorted(masters.items()))):
        if isinstance(info, str):
            errors.append(info)
            continue
        for group, conns in info.items():
            groups.setdefault(group, []).extend((name, c) for c in conns)
    return groups, errors


def _errors_html(errors: list[str]) -> str:
    return "".join(f'<p class="error">could not read {esc(e)}</p>' for e in errors)


async def producers_page(admin: AdminClient) -> str:
    groups, errors = await _all_producers(admin)
    rows = [
        [Raw(link(g, "/producer", name=g)), len({str(c.get("clientId")) for _, c in conns})]
        for g, conns in sorted(groups.items())
    ]
    body = (
        _errors_html(errors)
        + "<p>Producer groups with a client connected now (a producer that stopped is gone after its "
        + "channel closes or its heartbeat expires).</p>"
        + table(["producer group", "clients"], rows, table_id="producers")
    )
    return page("Producers", body)


async def producer_page(admin: AdminClient, group: str) -> str:
    groups, errors = await _all_producers(admin)
    conns = groups.get(group)
    if not conns:
        raise QueryNotFound(f"No producer of group {group!r} is connected to any broker")
    rows = [
        [c.get("clientId", ""), c.get("remoteIP", ""), c.get("language", ""), c.get("version", ""), broker,
         fmt_ms(c.get("lastUpdateTimestamp"), millis=False)]
        for broker, c in sorted(conns, key=lambda bc: (str(bc[1].get("clientId")), bc[0]))
    ]
    body = (
        _errors_html(errors)
        + f'<p>Producer group <code id="producer-name">{esc(group)}</code></p>'
        + table(["client id", "address", "language", "version", "broker", "last heartbeat"], rows,
                table_id="producer-clients")
    )
    return page(f"Producer group {group}", body)
