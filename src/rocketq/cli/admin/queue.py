"""Queue and message-id tools: printMsgByQueue, queryCq, allocateMQ, decodeMessageId."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType

from rocketq.cli.admin._common import (
    Adder,
    Result,
    bool_arg,
    cell,
    format_ts,
    mq_dict,
    non_negative,
    positive,
    table,
    timestamp_arg,
)
from rocketq.cli.admin.message import DEFAULT_PRINT_LIMIT, messages_result, queue_range, recode
from rocketq.cli.errors import UsageError
from rocketq.client.message import MessageQueue
from rocketq.errors import ProtocolError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def register(add: Adder) -> None:
    p = add("printMsgByQueue", print_msg_by_queue, "Read one queue's messages; count them by tag")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, required=True, help="queue id")
    p.add_argument("-c", "--charsetName", dest="charset", default="utf-8", help="body charset (UTF-8)")
    p.add_argument("-s", "--subExpression", dest="expression", default="*", help="tag filter (default *)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=timestamp_arg, help="from this time")
    p.add_argument("-e", "--endTimestamp", dest="end", type=timestamp_arg, help="to this time")
    for letter, name, dest, what in (("-p", "--printMsg", "print_msg", "print the messages"),
                                     ("-d", "--printBody", "print_body", "print bodies"),
                                     ("-f", "--calculate", "calculate", "count messages by tag")):
        p.add_argument(letter, name, dest=dest, type=bool_arg, default=False, metavar="true|false",
                       help=f"{what} (default false)")
    p.add_argument("--limit", type=positive, default=DEFAULT_PRINT_LIMIT,
                   help=f"stop after this many messages (default {DEFAULT_PRINT_LIMIT})")

    p = add("queryCq", query_cq, "Show raw consume-queue entries of one queue")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-q", "--queue", dest="queue_id", type=non_negative, required=True, help="queue id")
    p.add_argument("-i", "--index", type=non_negative, required=True, help="first queue index (offset)")
    p.add_argument("-c", "--count", type=positive, default=10, help="how many entries (default 10)")
    p.add_argument("-b", "--broker", dest="broker_addr", help="broker address (default: the topic's first)")
    p.add_argument("-g", "--consumer", dest="group", help="evaluate each entry against this group's filter")

    p = add("allocateMQ", allocate_mq, "Show how the default strategy spreads a topic's queues over clients")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="client ids, comma separated")

    help_text = "Decode a unique message id (client msgId): the producer's IP and when it was made"
    for name in ("decodeMessageId", "DecodeMessageId"):  # mqadmin spells it with a capital D
        p = add(name, decode_message_id, help_text)
        p.add_argument("-i", "--messageId", dest="msg_id", required=True, help="unique message id")


async def print_msg_by_queue(admin: AdminClient, args: argparse.Namespace) -> Result:
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    lo, hi = await queue_range(admin, mq, args.begin, args.end)
    msgs = [m async for m in admin.read_queue(mq, lo, hi, args.expression, limit=args.limit)]
    if args.charset.lower().replace("-", "") != "utf8":
        msgs = [recode(m, args.charset) for m in msgs]
    tags = Counter(m.tags or "" for m in msgs)
    data: dict[str, Any] = {"count": len(msgs)}
    views: list[Any] = []
    if args.print_msg:
        shown = messages_result(msgs, f"messages of {args.topic}:{args.broker_name}:{args.queue_id}",
                                args.print_body)
        data["messages"] = shown.data
        views += shown.views
    if args.calculate:
        data["tags"] = dict(tags.most_common())
        views.append(table(("Tag", "Count"), tags.most_common(), "messages by tag"))
    if not views:
        views.append(cell(f"{len(msgs)} message(s) in {args.topic}:{args.broker_name}:{args.queue_id}"))
    return Result(data, views)


async def query_cq(admin: AdminClient, args: argparse.Namespace) -> Result:
    addr = args.broker_addr
    if not addr:
        route = await admin.examine_topic_route_info(args.topic)
        addrs = [a for bd in route.broker_datas for _, a in sorted(bd.broker_addrs.items())]
        if not addrs:
            raise UsageError(f"queryCq: no route for topic {args.topic}")
        addr = addrs[0]
    res = await admin.query_consume_queue(addr, args.topic, args.queue_id, args.index, args.count, args.group)
    entries = [{"index": args.index + n, **e.to_obj()} for n, e in enumerate(res.queue_data)]
    data = {"broker": addr, "maxQueueIndex": res.max_queue_index, "minQueueIndex": res.min_queue_index,
            "filterData": res.filter_data, "entries": entries}
    members = ("index", "physicOffset", "physicSize", "tagsCode", "eval", "msg")
    rows = [tuple(e.get(m) for m in members) for e in entries]
    header = (f"Queue data of {args.topic}:{args.queue_id} on {addr}: "
              f"max {res.max_queue_index}, min {res.min_queue_index}")
    columns = ("Idx", "Physic Offset", "Physic Size", "Tags Code", "Eval", "Msg")
    views: list[RenderableType] = [cell(header), table(columns, rows)]
    return Result(data, views)


async def allocate_mq(admin: AdminClient, args: argparse.Namespace) -> Result:
    from rocketq.client.rebalance.allocate import AllocateMessageQueueAveragely

    ips = [i.strip() for i in args.ip_list.split(",") if i.strip()]
    if not ips:
        raise UsageError("allocateMQ: -i needs at least one client id")
    mqs = sorted(await admin.fetch_subscribe_queues(args.topic),
                 key=lambda q: (q.topic, q.broker_name, q.queue_id))
    strategy = AllocateMessageQueueAveragely()
    result = {ip: [mq_dict(q) for q in strategy.allocate("aa", ip, mqs, ips)] for ip in ips}
    rows = [(ip, ", ".join(f"{q['brokerName']}:{q['queueId']}" for q in qs)) for ip, qs in result.items()]
    return Result({"result": result}, [table(("Client", "Queues"), rows, f"allocation of {args.topic}")])


async def decode_message_id(admin: AdminClient, args: argparse.Namespace) -> Result:
    from rocketq.codec.message import decode_uniq_id

    try:
        ip, pid, when = decode_uniq_id(args.msg_id.strip())
    except ProtocolError as exc:
        raise UsageError(f"decodeMessageId: {exc}") from None
    data = {"ip": ip, "pid": pid, "timestamp": when, "date": format_ts(when)}
    return Result(data, [cell(f"ip={ip}"), cell(f"pid={pid}"), cell(f"date={format_ts(when)}")])
