"""The dashboard's pages: each one asks the AdminClient what it shows and renders it with ``render``.

Handlers return HTML text; the app (``app.py``) turns admin errors into an error box, so a broker
that does not answer costs one message on the page, not the page.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rocketq.admin import AdminClient
from rocketq.client.message import MessageExt
from rocketq.codec.bodies import BrokerData, MessageQueue
from rocketq.dashboard import manage
from rocketq.dashboard.controllers import controller_section
from rocketq.dashboard.render import (
    CHART_PATH,
    TPS_CHART_PATH,
    Raw,
    esc,
    fmt_ms,
    link,
    page,
    parse_tps,
    table,
    tps_cell,
    tps_chart,
    url,
)
from rocketq.errors import InvalidArgument, RocketQError, SubscriptionGroupNotExist, TopicNotExist

__all__ = [
    "cluster_json",
    "cluster_page",
    "group_json",
    "group_page",
    "groups_page",
    "messages_page",
    "parse_time",
    "reset_offset",
    "send_message",
    "topic_json",
    "topic_page",
    "topics_page",
]

SYSTEM_PREFIXES = (
    "%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC_", "TRANS_", "OFFSET_MOVED_EVENT",
    "TBW102", "SELF_TEST_TOPIC",
)
MAX_RESULTS = 64
DETAILED_RESULTS = 3  # more results than this are listed, one line each
PREVIEW_BYTES = 80
_RUNTIME_KEYS = (
    ("version", "brokerVersionDesc"),
    ("produce TPS (10 s; 1 min, 10 min)", "putTps"),
    ("consume TPS (10 s; 1 min, 10 min)", "getTransferredTps"),
    ("put today", "msgPutTotalTodayNow"),
    ("get today", "msgGetTotalTodayNow"),
    ("disk ratio", "commitLogDiskRatio"),
)
_TPS_KEYS = ("putTps", "getTransferredTps")


def parse_time(text: str) -> int:
    """``now``, epoch milliseconds, or ISO 8601 (a browser's datetime-local; local time) -> epoch ms."""
    text = text.strip()
    if not text or text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"bad time {text!r}: use now, epoch ms or yyyy-MM-ddTHH:mm[:ss]") from None
    return int(when.timestamp() * 1000)


def _user_topics(topics: list[str]) -> list[str]:
    return sorted(t for t in topics if not t.startswith(SYSTEM_PREFIXES))


# -- cluster ----------------------------------------------------------------------------------------------


async def cluster_page(admin: AdminClient) -> str:
    brokers = await admin.cluster_list()
    rows = []
    for b in brokers:
        rt = b.runtime
        status = f"DOWN: {b.error}" if b.error else "UP"
        rows.append([b.cluster, b.broker_name, b.broker_id, Raw(link(b.addr, "/broker", addr=b.addr)), status,
                     b.role or "-", b.replication_lag_bytes if b.runtime else "-",
                     *(tps_cell(rt[key]) if key in _TPS_KEYS and key in rt else rt.get(key, "-")
                       for _, key in _RUNTIME_KEYS)])
    headers = ["cluster", "broker", "id", "address", "status", "role", "lag (B)",
               *(label for label, _ in _RUNTIME_KEYS)]
    controllers = await controller_section(admin, brokers)  # empty unless in controller mode
    body = (
        f"<p>Name servers: {esc(';'.join(admin.namesrv_addrs))}</p>"
        f"<h2>Brokers</h2>{table(headers, rows, table_id='brokers')}{controllers}"
        "<h2>TPS (10 s window)</h2>"
        + tps_chart("/api/cluster", [f"{b.broker_name} {k}" for b in brokers for k in ("put", "get")])
    )
    return page("Cluster", body, script=TPS_CHART_PATH)


async def cluster_json(admin: AdminClient) -> dict[str, Any]:
    """What the cluster page's chart polls: each broker's 10-second put and get TPS."""
    tps: dict[str, float] = {}
    for b in await admin.cluster_list():
        for name, key in (("put", "putTps"), ("get", "getTransferredTps")):
            values = parse_tps(b.runtime.get(key, ""))
            if values is not None:
                tps[f"{b.broker_name} {name}"] = values[0]
    return {"time": int(time.time() * 1000), "tps": tps}


async def topic_json(admin: AdminClient, topic: str) -> dict[str, Any]:
    """What the topic page's chart polls: messages stored in total; the page takes the rate."""
    stats = await admin.examine_topic_stats(topic)
    return {"time": int(time.time() * 1000),
            "counters": {"put": sum(o.max_offset for o in stats.offset_table.values())}}


# -- topics -----------------------------------------------------------------------------------------------


async def _clusters(admin: AdminClient) -> list[str]:
    return sorted((await admin.examine_broker_cluster_info()).cluster_addr_table)


async def topics_page(admin: AdminClient, show_system: bool = False, notice: str = "") -> str:
    topics = await admin.fetch_all_topic_list()
    if show_system:
        shown = sorted(topics)
    else:
        # the name servers list the cluster's and brokers' own topics (TBW102, broker names) too
        system = set(await admin.fetch_system_topic_list())
        shown = _user_topics([t for t in topics if t not in system])
    rows = [[Raw(link(t, "/topic", name=t))] for t in shown]
    toggle = link("hide system topics", "/topics") if show_system else link(
        "show system topics", "/topics", system=1
    )
    body = (
        notice + manage.new_topic_form(await _clusters(admin))
        + f"<h2>Topics</h2><p>{len(shown)} topics ({toggle})</p>{table(['topic'], rows, table_id='topics')}"
    )
    return page("Topics", body)


async def topic_page(admin: AdminClient, topic: str, notice: str = "") -> str:
    try:
        route, stats, groups = await asyncio.gather(
            admin.examine_topic_route_info(topic),
            admin.examine_topic_stats(topic),
            admin.query_topic_consume_by_who(topic),
        )
    except TopicNotExist:
        raise TopicNotExist(f"No topic {topic!r} in this cluster (the name servers have no route for it)",
                            topic=None) from None
    addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
    route_rows = [
        [q.broker_name, ", ".join(f"{i}={a}" for i, a in sorted(addrs.get(q.broker_name, {}).items())),
         q.read_queue_nums, q.write_queue_nums, q.perm]
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
    ]
    queue_rows = [
        [mq.broker_name, mq.queue_id, o.min_offset, o.max_offset, o.max_offset - o.min_offset,
         fmt_ms(o.last_update_timestamp)]
        for mq, o in stats.offset_table.items()
    ]
    total = sum(o.max_offset - o.min_offset for o in stats.offset_table.values())
    group_rows = [[Raw(link(g, "/group", name=g))] for g in groups]
    traffic_rows = await _topic_traffic(admin, topic, route.broker_datas)
    first = route.queue_datas[0] if route.queue_datas else None
    forms = manage.topic_forms(
        topic, await _clusters(admin), first.read_queue_nums if first else 8,
        first.write_queue_nums if first else 8, first.perm if first else 6,
    )
    body = (
        notice
        + f'<p>Topic <code id="topic-name">{esc(topic)}</code>: {total} messages stored</p>'
        + "<h2>Route</h2>"
        + table(["broker", "addresses", "read queues", "write queues", "perm"], route_rows, table_id="route")
        + "<h2>Queues</h2>"
        + table(["broker", "queue", "min offset", "max offset", "messages", "last stored"], queue_rows,
                table_id="queues")
        + "<h2>Produce TPS</h2>"
        + tps_chart(url("/api/topic", name=topic), ["put"])
        + table(["broker", "TPS (1 min)", "TPS (1 hour)", "messages put (24 h)"], traffic_rows,
                table_id="topic-tps")
        + "<h2>Consumer groups</h2>"
        + table(["group"], group_rows, table_id="topic-groups")
        + "<h2>Send a test message</h2>"
        + '<form method="post" action="/send" id="send-form">'
        + f'<input type="hidden" name="topic" value="{esc(topic)}">'
        + '<label>tag <input name="tags" size="10"></label>'
        + '<label>keys <input name="keys" size="20"></label><br>'
        + '<textarea name="body" rows="3" cols="60" placeholder="body"></textarea><br>'
        + '<button type="submit">Send</button></form>'
        + forms
    )
    return page(f"Topic {topic}", body, script=TPS_CHART_PATH)


async def _topic_traffic(
    admin: AdminClient, topic: str, brokers: Iterable[BrokerData]
) -> list[list[object]]:
    """Per broker: the topic's TOPIC_PUT_NUMS stats item (minute and hour averages, the day's sum)."""

    async def one(broker: BrokerData) -> list[object]:
        if not broker.master_addr:
            return [broker.broker_name, "-", "-", "-"]
        try:
            data = await admin.view_broker_stats_data(broker.master_addr, "TOPIC_PUT_NUMS", topic)
        except RocketQError:  # a broker with no item for the topic yet: nothing put there
            return [broker.broker_name, "0.0", "0.0", 0]
        return [broker.broker_name, f"{data.stats_minute.tps:.1f}", f"{data.stats_hour.tps:.1f}",
                data.compute_24hour_sum()]

    return list(await asyncio.gather(*(one(b) for b in sorted(brokers, key=lambda b: b.broker_name))))


async def send_message(admin: AdminClient, form: Mapping[str, str]) -> str:
    topic = form.get("topic", "")
    if not topic:
        raise InvalidArgument("no topic given")
    result = await admin.send_message(
        topic,
        form.get("body", "").encode("utf-8"),
        keys=form.get("keys") or None,
        tags=form.get("tags") or None,
    )
    mq = result.message_queue
    notice = (
        f'<p class="ok" id="sent">Sent: {esc(result.status.name)} msgId <code>{esc(result.msg_id)}</code> '
        f"to {esc(mq.broker_name)}/{mq.queue_id} at offset {result.queue_offset}</p>"
    )
    return await topic_page(admin, topic, notice)


# -- consumer groups --------------------------------------------------------------------------------------


async def groups_page(admin: AdminClient, notice: str = "") -> str:
    groups = await admin.consumer_groups()

    async def lag(group: str) -> tuple[str, int | str, float | str]:
        try:
            stats = await admin.examine_consume_stats(group)
        except Exception as exc:  # one group that cannot be read must not hide the rest
            return group, f"error: {exc}", "-"
        diff = sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
        return group, diff, round(stats.consume_tps, 1)

    rows = [
        [Raw(link(g, "/group", name=g)), d, t] for g, d, t in await asyncio.gather(*(lag(g) for g in groups))
    ]
    body = notice + manage.new_group_form() + "<h2>Groups</h2>" + table(
        ["group", "lag", "consume TPS"], rows, table_id="groups"
    )
    return page("Consumer groups", body)


async def group_json(admin: AdminClient, group: str) -> dict[str, Any]:
    """What the live chart polls: total lag, and the consumed total that TPS is derived from."""
    stats = await admin.examine_consume_stats(group)
    if not stats.offset_table:
        await _known_group(admin, group)
    queues: list[dict[str, Any]] = [
        {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
         "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
         "lag": w.broker_offset - w.consumer_offset}
        for mq, w in stats.offset_table.items()
    ]
    return {
        "group": group,
        "time": int(time.time() * 1000),
        "lag": sum(int(q["lag"]) for q in queues),
        "consumed": sum(max(0, int(q["consumerOffset"])) for q in queues),
        "consumeTps": stats.consume_tps,
        "queues": queues,
    }


async def _known_group(admin: AdminClient, group: str) -> None:
    """A group the brokers do not know would show as an empty page; say it does not exist instead.
    Asked only when the group has no offsets (one with offsets exists): it reads every master."""
    if group not in await admin.consumer_groups():
        raise SubscriptionGroupNotExist(
            f"No consumer group {group!r} in this cluster (no broker has its subscription config "
            "and there is no retry topic for it)"
        )


async def group_page(admin: AdminClient, group: str, notice: str = "") -> str:
    stats = await admin.examine_consume_stats(group)
    if not stats.offset_table:
        await _known_group(admin, group)
    rows = [
        [mq.topic, mq.broker_name, mq.queue_id, w.broker_offset, w.consumer_offset,
         w.broker_offset - w.consumer_offset, max(0, w.pull_offset - w.consumer_offset), w.revive_backlog,
         fmt_ms(w.last_timestamp)]
        for mq, w in stats.offset_table.items()
    ]
    topics = sorted({mq.topic for mq in stats.offset_table if not mq.topic.startswith("%RETRY%")})
    # a datalist, not a select: a group that has no offsets yet can still be given a topic to start on
    options = "".join(f'<option value="{esc(t)}"></option>' for t in topics)
    try:
        conn = await admin.examine_consumer_connection_info(group)
        clients = [[c.client_id, c.client_addr, c.language, c.version] for c in conn.connection_set]
    except Exception:  # an offline group has no connections: not an error worth a red box
        clients = []
    total = sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
    # pop groups (consumerProgress' #Inflight and #ToRevive): popped and not acked, and of those the
    # ones past their invisible time that the revive service has not put back yet
    inflight = sum(max(0, w.pull_offset - w.consumer_offset) for w in stats.offset_table.values())
    to_revive = sum(w.revive_backlog for w in stats.offset_table.values())
    src = esc(url("/api/group", name=group))
    body = (
        notice
        + f'<p>Group <code id="group-name">{esc(group)}</code>: total lag <b id="total-lag">{total}</b> · '
        + f'{link("dead letters", "/dlq", group=group)}</p>'
        + f'<p>Pop: in flight <b id="pop-inflight">{inflight}</b>, '
        + f'to revive <b id="pop-revive">{to_revive}</b></p>'
        + '<h2>Live</h2><p id="live">lag <b id="live-lag">-</b>, consume TPS <b id="live-tps">-</b> '
        + '(polls: <span id="live-polls">0</span>, every 2 s)</p>'
        + f'<canvas id="chart" width="640" height="200" data-src="{src}" data-interval="2000"></canvas>'
        + "<h2>Lag per queue</h2>"
        + table(["topic", "broker", "queue", "broker offset", "consumer offset", "lag", "in flight",
                 "to revive", "last consumed"],
                rows, table_id="progress")
        + "<h2>Online clients</h2>"
        + table(["client id", "address", "language", "version"], clients, table_id="clients")
        + "<h2>Reset offset</h2>"
        + '<form method="post" action="/reset" id="reset-form">'
        + f'<input type="hidden" name="group" value="{esc(group)}">'
        + f'<label>topic <input name="topic" list="group-topics" value="{esc(topics[0] if topics else "")}">'
        + f'<datalist id="group-topics">{options}</datalist></label>'
        + '<label>time <input name="time" value="now" size="24" '
        + 'title="now, epoch ms or yyyy-MM-ddTHH:mm:ss"></label>'
        + '<button type="submit">Reset</button></form>'
        + manage.group_forms(group, await manage.group_config(admin, group))
    )
    return page(f"Consumer group {group}", body, script=CHART_PATH)


async def reset_offset(admin: AdminClient, form: Mapping[str, str]) -> str:
    group, topic = form.get("group", ""), form.get("topic", "")
    if not group or not topic:
        raise InvalidArgument("group and topic are both needed")
    when = parse_time(form.get("time", "now"))
    offsets = await admin.reset_offset_by_timestamp(topic, group, when, True)
    rows = "".join(
        f"<li>{esc(mq.broker_name)}/{mq.queue_id}: {off}</li>" for mq, off in offsets.items()
    )
    notice = (
        f'<div class="ok" id="reset-done">Reset {esc(group)} on {esc(topic)} to {esc(fmt_ms(when))}:'
        f"<ul>{rows}</ul></div>"
    )
    return await group_page(admin, group, notice)


# -- messages ---------------------------------------------------------------------------------------------


async def messages_page(admin: AdminClient, query: Mapping[str, str], notice: str = "") -> str:
    topic = query.get("topic", "").strip()
    msg_id, key = query.get("id", "").strip(), query.get("key", "").strip()
    begin, end = query.get("begin", "").strip(), query.get("end", "").strip()
    forms = _search_forms(topic, msg_id, key, begin, end)
    if msg_id:
        found = [await admin.view_message(topic or None, msg_id)]
    elif key:
        if not topic:
            raise InvalidArgument("searching by key needs the topic")
        found = await admin.query_message(topic, key, MAX_RESULTS)
    elif query.get("by") == "time" or begin or end:
        try:
            first, last = _time_range(topic, begin, end)
        except InvalidArgument as exc:  # shown above the forms, so the user can correct the search
            return page("Messages", forms, error=str(exc))
        found = await _by_time(admin, topic, first, last)
    else:
        return page("Messages", forms)
    parts = [f'<p id="result-count">{len(found)} message(s)</p>']
    if len(found) > DETAILED_RESULTS:
        # a list: each row links to the message's own page, where its consume status is looked up
        parts.append(_summary_table(found))
    else:
        tracks = await asyncio.gather(*(admin.message_track_detail(m) for m in found))
        online = {str(t.get("consumerGroup")) for ts in tracks for t in ts if t.get("online")}
        clients = dict(zip(online, await asyncio.gather(*(_clients(admin, g) for g in online)), strict=True))
        parts.extend(_message_html(m, t, clients) for m, t in zip(found, tracks, strict=True))
    return page("Messages", notice + forms + "".join(parts))


async def _clients(admin: AdminClient, group: str) -> list[str]:
    try:
        return [c.client_id for c in (await admin.examine_consumer_connection_info(group)).connection_set]
    except RocketQError:  # went offline since the track was read
        return []


def _time_range(topic: str, begin: str, end: str) -> tuple[int, int]:
    if not topic:
        raise InvalidArgument("searching by time needs the topic")
    if not begin and not end:
        raise InvalidArgument(
            "a time search needs a range: give begin and/or end (0 = the start, now, epoch ms or "
            "yyyy-MM-ddTHH:mm:ss); an empty begin means the start, an empty end means now"
        )
    first, last = parse_time(begin or "0"), parse_time(end or "now")
    if first > last:
        raise InvalidArgument(f"the time range is empty: begin {begin!r} is after end {end!r}")
    return first, last


def _summary_table(found: list[MessageExt]) -> str:
    rows = [
        [Raw(link(m.msg_id, "/messages", id=m.msg_id, topic=m.topic)),
         m.tags or "", m.keys or "", f"{m.queue_id} @ {m.queue_offset}", fmt_ms(m.store_timestamp),
         _preview(m.body)]
        for m in found
    ]
    return table(["msgId", "tags", "keys", "queue", "stored", "body"], rows, table_id="results")


def _preview(body: bytes) -> str:
    text = body[: PREVIEW_BYTES + 4].decode("utf-8", "replace")
    return text[:PREVIEW_BYTES] + ("..." if len(body) > PREVIEW_BYTES else "")


async def _by_time(admin: AdminClient, topic: str, begin: int, end: int) -> list[MessageExt]:
    out: list[MessageExt] = []
    queues: list[MessageQueue] = await admin.message_queues(topic)
    for mq in queues:
        start = await admin.search_offset(mq, begin)
        stop = await admin.max_offset(mq)
        async for msg in admin.read_queue(mq, start, stop, limit=MAX_RESULTS):
            if msg.store_timestamp > end:
                break
            if msg.store_timestamp >= begin:
                out.append(msg)
    out.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
    return out[:MAX_RESULTS]


def _search_forms(topic: str, msg_id: str, key: str, begin: str, end: str) -> str:
    def field(name: str, value: str, label: str, size: int = 24) -> str:
        return f'<label>{esc(label)} <input name="{name}" value="{esc(value)}" size="{size}"></label>'

    return (
        '<form method="get" action="/messages" id="by-id"><b>By id</b> '
        + field("id", msg_id, "msgId", 34) + field("topic", topic, "topic (for a unique key)")
        + '<button type="submit">Search</button></form>'
        + '<form method="get" action="/messages" id="by-key"><b>By key</b> '
        + field("topic", topic, "topic") + field("key", key, "key")
        + '<button type="submit">Search</button></form>'
        + '<form method="get" action="/messages" id="by-time"><b>By time</b> '
        + '<input type="hidden" name="by" value="time">'
        + field("topic", topic, "topic") + field("begin", begin, "begin", 20) + field("end", end, "end", 20)
        + '<button type="submit">Search</button></form>'
    )


def _consume_forms(msg: MessageExt, clients: Mapping[str, list[str]]) -> str:
    """One "consume directly" form per online group: CONSUME_MESSAGE_DIRECTLY to the chosen client."""
    forms = []
    for group, ids in sorted(clients.items()):
        if not ids:
            continue
        options = "".join(f'<option value="{esc(c)}">{esc(c)}</option>' for c in ids)
        forms.append(
            '<form method="post" action="/messages/consume" class="consume">'
            f'<input type="hidden" name="topic" value="{esc(msg.topic)}">'
            f'<input type="hidden" name="msgId" value="{esc(msg.offset_msg_id)}">'
            f'<input type="hidden" name="group" value="{esc(group)}">'
            f'<b>{esc(group)}</b> <select name="clientId">{options}</select>'
            '<button type="submit">Consume directly</button></form>'
        )
    if not forms:
        return ""
    return "<h3>Consume directly</h3>" + "".join(forms)


def _message_html(msg: MessageExt, tracks: list[dict[str, Any]], clients: Mapping[str, list[str]]) -> str:
    body = msg.body.decode("utf-8", "replace")
    props = table(["property", "value"], sorted(msg.properties.items()))
    track_rows = [
        [t.get("consumerGroup", ""), t.get("trackType", ""), "yes" if t.get("online") else "no",
         t.get("exceptionDesc", "")]
        for t in tracks
    ]
    info = [
        ["msgId", msg.msg_id], ["offsetMsgId", msg.offset_msg_id], ["topic", msg.topic],
        ["tags", msg.tags or ""], ["keys", msg.keys or ""], ["queue", f"{msg.queue_id} @ {msg.queue_offset}"],
        ["born", fmt_ms(msg.born_timestamp)], ["stored", fmt_ms(msg.store_timestamp)],
        ["store host", f"{msg.store_host[0]}:{msg.store_host[1]}"],
    ]
    return (
        '<section class="message"><h2>Message</h2>'
        + table(["field", "value"], info)
        + f'<h3>Body ({len(msg.body)} bytes)</h3><pre class="body">{esc(body)}</pre>'
        + f"<h3>Properties</h3>{props}"
        + "<h3>Consume status</h3>"
        + table(["group", "status", "online", "error"], track_rows)
        + _consume_forms(msg, clients)
        + f'<p class="trace-link">{link("Message trace", "/trace", id=msg.msg_id)}</p>'
        + "</section>"
    )
