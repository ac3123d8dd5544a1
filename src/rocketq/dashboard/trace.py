"""The message trace page (/trace): a message's life from its trace records, as RocketMQ
Dashboard's message-trace view shows it: sent (by which producer group and host, how long the send
took, where it was stored), then for every consumer group each delivery (retry count, how long the
listener took, whether it succeeded)."""

from __future__ import annotations

from collections.abc import Mapping

from rocketq.admin import AdminClient
from rocketq.admin.trace import TraceView
from rocketq.client.trace import RMQ_SYS_TRACE_TOPIC
from rocketq.dashboard.render import esc, fmt_ms, page, table

__all__ = ["trace_page"]


def _form(msg_id: str, trace_topic: str) -> str:
    return (
        '<form method="get" action="/trace" id="trace-form">'
        f'<label>msgId <input name="id" value="{esc(msg_id)}" size="34"></label>'
        f'<label>trace topic <input name="traceTopic" value="{esc(trace_topic)}" size="24"'
        f' placeholder="{RMQ_SYS_TRACE_TOPIC}"></label>'
        '<button type="submit">Show trace</button></form>'
    )


def _sent(views: list[TraceView]) -> str:
    rows = [[v.group_name, v.client_host, fmt_ms(v.timestamp), f"{v.cost_time} ms", v.status, v.topic or "",
             v.tags or "", v.keys or "", v.store_host, v.offset_msg_id or ""]
            for v in views if v.msg_type == "Pub"]
    if not rows:
        return '<p id="no-send">No send recorded (the producer did not trace).</p>'
    head = ["producer group", "client host", "sent", "cost", "status", "topic", "tags", "keys", "stored on",
            "offsetMsgId"]
    return table(head, rows, table_id="trace-send")


def _transactions(views: list[TraceView]) -> str:
    rows = [[v.group_name, v.client_host, fmt_ms(v.timestamp), v.transaction_state or ""]
            for v in views if v.msg_type == "EndTransaction"]
    if not rows:
        return ""
    return "<h2>Transaction</h2>" + table(["producer group", "client host", "ended", "state"], rows,
                                          table_id="trace-transaction")


def _consumed(views: list[TraceView]) -> str:
    """One row per delivery: its SubBefore (when, retry count) joined to its SubAfter by requestId."""
    afters = {v.request_id: v for v in views if v.msg_type == "SubAfter"}
    befores = [v for v in views if v.msg_type == "SubBefore"]
    rows = []
    for b in befores:
        a = afters.pop(b.request_id, None)
        rows.append([b.group_name, b.client_host, fmt_ms(b.timestamp), str(b.retry_times),
                     f"{a.cost_time} ms" if a else "", a.status if a else "in progress"])
    rows.extend([a.group_name, a.client_host, fmt_ms(a.timestamp), "", f"{a.cost_time} ms", a.status]
                for a in afters.values())
    if not rows:
        return '<p id="no-consume">Not consumed by a traced consumer yet.</p>'
    rows.sort(key=lambda r: (r[0], r[2]))
    return table(["consumer group", "client host", "delivered", "retries", "cost", "status"], rows,
                 table_id="trace-consume")


async def trace_page(admin: AdminClient, query: Mapping[str, str]) -> str:
    msg_id = query.get("id", "").strip()
    trace_topic = query.get("traceTopic", "").strip()
    form = _form(msg_id, trace_topic)
    if not msg_id:
        return page("Message trace", form)
    views = await admin.query_msg_trace_by_id(msg_id, trace_topic or None)
    if not views:
        return page("Message trace", form + f'<p id="trace-count">No trace of {esc(msg_id)} in '
                    f'{esc(trace_topic or RMQ_SYS_TRACE_TOPIC)}.</p>')
    body = (form + f'<p id="trace-count">{len(views)} trace record(s) of {esc(msg_id)}</p>'
            + "<h2>Sent</h2>" + _sent(views) + _transactions(views)
            + "<h2>Consumed</h2>" + _consumed(views))
    return page("Message trace", body)
