"""Queue and message-id tools: queryCq, allocateMQ, decodeMessageId."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, cell, format_ts, mq_dict, non_negative, positive, table
from rocketq.cli.errors import UsageError
from rocketq.errors import ProtocolError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def register(add: Adder) -> None:
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
    views = [cell(f"Queue data of {args.topic}:{args.queue_id} on {addr}: "
                  f"max {res.max_queue_index}, min {res.min_queue_index}"),
             table(("Idx", "Physic Offset", "Physic Size", "Tags Code", "Eval", "Msg"), rows)]
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
