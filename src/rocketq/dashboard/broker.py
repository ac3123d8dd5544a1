"""The broker page: its configuration (GET_BROKER_CONFIG) and an update form (UPDATE_BROKER_CONFIG).

Which keys may change at runtime is the broker's decision: it refuses a restart-required key, or one
that names a path or command, with a remark, and the page shows that remark as it came.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from rocketq.admin import AdminClient
from rocketq.dashboard.render import esc, fmt_ms, page, table
from rocketq.errors import InvalidArgument, QueryNotFound, RemotingError, ServerError

__all__ = ["broker_page", "update_broker_config"]


async def _known_broker(admin: AdminClient, addr: str) -> str:
    """The broker's name; the address must be one the name servers list, so the dashboard never
    connects to an address a form or link made up."""
    for b in await admin.cluster_list():
        if b.addr == addr:
            return b.broker_name
    raise QueryNotFound(f"No broker at {addr!r} in this cluster")


async def broker_page(admin: AdminClient, addr: str, notice: str = "", error: str | None = None) -> str:
    name = await _known_broker(admin, addr)
    config = await admin.get_broker_config(addr)
    rows = sorted(config.items())
    keys = "".join(f'<option value="{esc(k)}"></option>' for k, _ in rows)
    body = (
        notice
        + f'<p>Broker <code id="broker-name">{esc(name)}</code> at <code>{esc(addr)}</code>: '
        + f"{len(rows)} config keys</p>"
        + "<h2>Update a key</h2>"
        + "<p>Only runtime-updatable keys change; the broker refuses a restart-required key and says why.</p>"
        + '<form method="post" action="/broker/config" id="config-form">'
        + f'<input type="hidden" name="addr" value="{esc(addr)}">'
        + '<label>key <input name="key" list="config-keys" size="32"></label>'
        + f'<datalist id="config-keys">{keys}</datalist>'
        + '<label>value <input name="value" size="24"></label>'
        + '<button type="submit">Update</button></form>'
        + await _timer_section(admin, addr)
        + "<h2>Configuration</h2>"
        + table(["key", "value"], rows, table_id="broker-config")
    )
    return page(f"Broker {name}", body, error=error)


async def _timer_section(admin: AdminClient, addr: str) -> str:
    """Timer messages (RocketMQ 5): where the wheel stands and what is pending per topic; nothing
    for a broker without them (timerWheelEnable off, or a 4.x broker)."""
    try:
        cp = await admin.get_timer_check_point(addr)
        pending = await admin.get_timer_metrics(addr)
    except (ServerError, RemotingError):
        return ""
    lag = max(0, int(time.time() * 1000) - cp.last_read_time_ms)
    return (
        "<h2>Timer messages</h2>"
        + f'<p id="timer-state">delivered up to <code>{esc(fmt_ms(cp.last_read_time_ms))}</code> '
        + f"(behind the clock by {lag} ms, one slot is normal); "
        + f"{cp.last_timer_queue_offset} filed from <code>rmq_sys_wheel_timer</code></p>"
        + table(["topic", "pending"], sorted(pending.items()), table_id="timer-pending")
    )


async def update_broker_config(admin: AdminClient, form: Mapping[str, str]) -> str:
    addr, key, value = form.get("addr", ""), form.get("key", "").strip(), form.get("value", "")
    if not key:
        raise InvalidArgument("no config key given")
    await _known_broker(admin, addr)
    try:
        await admin.update_broker_config(addr, {key: value})
    except ServerError as exc:  # the broker's refusal (restart-required, unknown key, bad value)
        return await broker_page(admin, addr, error=f"Not updated: {exc.remark}")
    now = (await admin.get_broker_config(addr)).get(key, "(not reported)")
    notice = f'<p class="ok" id="config-done">Updated {esc(key)}: the broker now reports {esc(now)}</p>'
    return await broker_page(admin, addr, notice)
