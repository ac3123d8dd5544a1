"""A consumer group's dead letters (``%DLQ%group``): list them, send one back to the topic it first
went to, or have an online consumer of the group consume it now (CONSUME_MESSAGE_DIRECTLY).

rocketmq-dashboard's DLQ "resend" is the consume-directly call; a resend here is a new message on
the original topic (the ``RETRY_TOPIC`` property the broker set when it moved the message), which
every subscribed group gets again. Both are offered.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketq.admin import AdminClient
from rocketq.client.message import MessageExt
from rocketq.dashboard.render import Raw, esc, fmt_ms, link, page, table
from rocketq.errors import InvalidArgument, RocketQError, TopicNotExist

__all__ = ["consume_directly", "dlq_page", "resend"]

DLQ_PREFIX = "%DLQ%"
MAX_SHOWN = 64
PREVIEW = 60


def _origin(msg: MessageExt) -> str:
    return msg.properties.get("RETRY_TOPIC") or ""


async def _dead_letters(admin: AdminClient, group: str) -> list[MessageExt]:
    topic = DLQ_PREFIX + group
    try:
        queues = await admin.message_queues(topic)
    except TopicNotExist:
        raise TopicNotExist(
            f"No dead-letter queue for group {group!r}: none of its messages has run out of retries"
        ) from None
    out: list[MessageExt] = []
    for mq in queues:
        start, stop = await admin.min_offset(mq), await admin.max_offset(mq)
        out.extend([m async for m in admin.read_queue(mq, start, stop, limit=MAX_SHOWN)])
    out.sort(key=lambda m: m.store_timestamp, reverse=True)
    return out[:MAX_SHOWN]


def _row_forms(group: str, msg: MessageExt, clients: list[str]) -> Raw:
    hidden = (f'<input type="hidden" name="group" value="{esc(group)}">'
              f'<input type="hidden" name="msgId" value="{esc(msg.msg_id)}">')
    resend = (f'<form method="post" action="/dlq/resend" class="resend">{hidden}'
              f'<button type="submit">Resend to {esc(_origin(msg) or "?")}</button></form>')
    if not clients:
        return Raw(resend + "<small>no consumer online to consume directly</small>")
    options = "".join(f'<option value="{esc(c)}">{esc(c)}</option>' for c in clients)
    # the offset msgId names exactly this stored copy (its unique key is shared with the original
    # message and its retries)
    direct = (f'<form method="post" action="/dlq/consume" class="consume">'
              f'<input type="hidden" name="group" value="{esc(group)}">'
              f'<input type="hidden" name="msgId" value="{esc(msg.offset_msg_id)}">'
              f'<select name="clientId">{options}</select>'
              '<button type="submit">Consume directly</button></form>')
    return Raw(resend + direct)


async def dlq_page(admin: AdminClient, group: str, notice: str = "") -> str:
    if not group:
        raise InvalidArgument("no group given")
    found = await _dead_letters(admin, group)
    try:
        conn = await admin.examine_consumer_connection_info(group)
        clients = [c.client_id for c in conn.connection_set]
    except RocketQError:  # no consumer online: only the resend is offered
        clients = []
    rows = [
        [Raw(link(m.msg_id, "/messages", id=m.msg_id, topic=m.topic)), _origin(m), m.tags or "", m.keys or "",
         m.reconsume_times, fmt_ms(m.store_timestamp, millis=False),
         m.body[: PREVIEW + 4].decode("utf-8", "replace")[:PREVIEW], _row_forms(group, m, clients)]
        for m in found
    ]
    body = (
        notice
        + f'<p>Dead letters of group <code id="dlq-group">{esc(group)}</code> '
        + f"({esc(DLQ_PREFIX + group)}, newest first, up to {MAX_SHOWN}): "
        + f'<b id="dlq-count">{len(found)}</b> · {link("the group", "/group", name=group)}</p>'
        + table(["msgId", "original topic", "tags", "keys", "reconsumed", "stored", "body", ""], rows,
                table_id="dlq")
    )
    return page(f"Dead letters of {group}", body)


async def resend(admin: AdminClient, form: Mapping[str, str]) -> tuple[str, str]:
    group, msg_id = form.get("group", ""), form.get("msgId", "")
    if not group or not msg_id:
        raise InvalidArgument("group and msgId are both needed")
    stored = await admin.view_message(DLQ_PREFIX + group, msg_id)
    target = _origin(stored)
    if not target:
        raise InvalidArgument(f"message {msg_id} has no RETRY_TOPIC property: its original topic is unknown")
    _, result = await admin.resend_message(DLQ_PREFIX + group, msg_id, to_topic=target)
    notice = (f'<p class="ok" id="dlq-done">Resent {esc(msg_id)} to {esc(target)}: '
              f"{esc(result.status.name)}, new msgId <code>{esc(result.msg_id)}</code></p>")
    return group, notice


async def consume_directly(admin: AdminClient, form: Mapping[str, str]) -> tuple[str, str]:
    """CONSUME_MESSAGE_DIRECTLY of ``msgId`` (an offset msgId) in ``topic`` (default: the group's
    DLQ) by the group's client ``clientId``: (group, notice)."""
    group, msg_id, client = form.get("group", ""), form.get("msgId", ""), form.get("clientId", "")
    if not group or not msg_id or not client:
        raise InvalidArgument("group, msgId and clientId are all needed")
    topic = form.get("topic") or DLQ_PREFIX + group
    result = await admin.consume_message_directly(group, client, topic, msg_id)
    outcome = result.get("consumeResult", "?")
    remark = result.get("remark") or ""
    notice = (f'<p class="ok" id="consume-done">{esc(client)} consumed {esc(msg_id)}: {esc(outcome)}'
              f"{' (' + esc(remark) + ')' if remark else ''}</p>")
    return group, notice
