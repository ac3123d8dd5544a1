"""Message commands: queryMsgById, resendMessage, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
printMsg, sendMessage, consumeMessage, checkMsgSendRT."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rocketq.cli.admin._common import (
    MAX_TIMESTAMP,
    Adder,
    Result,
    body_text,
    bool_arg,
    cell,
    format_ts,
    message_obj,
    message_view,
    non_negative,
    parse_timestamp,
    positive,
    table,
)
from rocketq.cli.errors import UsageError
from rocketq.client.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from rocketq.admin import AdminClient

# printMsg / consumeMessage stop after this many messages unless told otherwise.
DEFAULT_PRINT_LIMIT = 10_000


def _timestamp(text: str) -> int:
    return parse_timestamp(text)


def register(add: Adder) -> None:
    p = add("queryMsgById", query_msg_by_id, "Show a message by its id (offset msgId or unique key)")
    p.add_argument("-t", "--topic", help="topic (needed when the id is a unique key)")
    p.add_argument("-i", "--msgId", dest="msg_ids", required=True, help="message id(s), comma separated")
    p.add_argument("-g", "--consumerGroup", dest="group", help="with -d: let this group's client consume it")
    p.add_argument("-d", "--clientId", dest="client_id", help="with -g: the client that consumes it directly")
    p.add_argument("-s", "--sendMessage", dest="resend", type=bool_arg, default=False, metavar="true|false",
                   help="send the message(s) again (as resendMessage)")
    p.add_argument("-u", "--unitName", help=argparse.SUPPRESS)
    p.add_argument("-f", "--bodyFormat", help=argparse.SUPPRESS)
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("resendMessage", resend_message, "Send stored messages again (mqadmin: queryMsgById -s true)")
    p.add_argument("-t", "--topic", help="topic (needed when the id is a unique key)")
    p.add_argument("-i", "--msgId", dest="msg_ids", required=True, help="message id(s), comma separated")

    p = add("queryMsgByKey", query_msg_by_key, "Find messages by key")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-k", "--msgKey", dest="key", required=True, help="message key")
    p.add_argument(
        "-b", "--beginTimestamp", dest="begin", type=_timestamp, default=0, help="from (default 0)"
    )
    p.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        type=_timestamp,
        default=MAX_TIMESTAMP,
        help="to (default: no limit)",
    )
    p.add_argument("-m", "--maxNum", dest="max_num", type=positive, default=64, help="at most (default 64)")
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("queryMsgByUniqueKey", query_msg_by_unique_key, "Find a message by its unique key (client msgId)")
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="unique key")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-g", "--consumerGroup", dest="group", help="with -d: let this group's client consume it")
    p.add_argument("-d", "--clientId", dest="client_id", help="with -g: the client that consumes it directly")
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="every stored copy (max 32)")
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("queryMsgByOffset", query_msg_by_offset, "Show the message at a queue offset")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=non_negative, required=True, help="queue offset")
    p.add_argument("-f", "--bodyFormat", help=argparse.SUPPRESS)

    p = add("printMsg", print_msg, "Print the messages of a topic (optionally in a time range)")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument(
        "-c", "--charsetName", dest="charset", default="utf-8", help="body charset (default UTF-8)"
    )
    p.add_argument("-s", "--subExpression", dest="expression", default="*", help="tag filter (default *)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=_timestamp, help="from this time")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp, help="to this time")
    p.add_argument(
        "-d",
        "--printBody",
        dest="print_body",
        default="true",
        choices=("true", "false"),
        help="print bodies (default true)",
    )
    p.add_argument("-l", "--lmqParentTopic", help=argparse.SUPPRESS)
    p.add_argument(
        "--limit",
        type=positive,
        default=DEFAULT_PRINT_LIMIT,
        help=f"stop after this many messages (default {DEFAULT_PRINT_LIMIT})",
    )

    p = add("sendMessage", send_message, "Send a message")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-p", "--body", required=True, help="body (UTF-8 text)")
    p.add_argument("-k", "--key", help="keys (space separated)")
    p.add_argument("-c", "--tags", help="tag")
    p.add_argument("-b", "--broker", dest="broker_name", help="to this broker name")
    p.add_argument("-i", "--qid", dest="queue_id", type=non_negative, help="to this queue id")
    p.add_argument("-m", "--msgTraceEnable", help=argparse.SUPPRESS)

    p = add("consumeMessage", consume_message, "Read messages from a topic's queues (without committing)")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-b", "--brokerName", dest="broker_name", help="only this broker")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, help="only this queue (needs -b)")
    p.add_argument("-o", "--offset", type=non_negative, help="start at this offset (needs -i)")
    p.add_argument("-g", "--consumerGroup", dest="group", help=argparse.SUPPRESS)
    p.add_argument("-s", "--beginTimestamp", dest="begin", type=_timestamp, help="from this time")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp, help="to this time")
    p.add_argument(
        "-c",
        "--MessageNumber",
        dest="count",
        type=positive,
        default=128,
        help="how many messages (default 128)",
    )

    p = add("checkMsgSendRT", check_msg_send_rt, "Measure send round-trip times to a topic")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-a", "--amount", type=positive, default=100, help="messages to send (default 100)")
    p.add_argument("-s", "--size", type=positive, default=128, help="body bytes (default 128)")


def messages_result(msgs: list[MessageExt], title: str, print_body: bool = True) -> Result:
    rows = [
        (
            m.msg_id,
            m.queue_id,
            m.queue_offset,
            m.tags,
            m.keys,
            format_ts(m.store_timestamp),
            body_text(m.body) if print_body else len(m.body),
        )
        for m in msgs
    ]
    t = table(
        ("Message ID", "QID", "Offset", "Tags", "Keys", "Store Time", "Body" if print_body else "Body Size"),
        rows,
        title,
    )
    return Result([message_obj(m, with_body=print_body) for m in msgs], [t, cell(f"{len(msgs)} message(s)")])


async def _with_track(admin: AdminClient, msg: MessageExt) -> tuple[dict[str, Any], list[Any]]:
    tracks = await admin.message_track_detail(msg)
    obj = message_obj(msg)
    obj["tracks"] = tracks
    views: list[Any] = [message_view(msg)]
    if tracks:
        views.append(
            table(
                ("Consumer Group", "Track Type", "Detail"),
                [(t["consumerGroup"], t["trackType"], t.get("exceptionDesc", "")) for t in tracks],
                "message track",
            )
        )
    return obj, views


async def _consume_directly(
    admin: AdminClient,
    args: argparse.Namespace,
    topic: str,
    msg_id: str,
) -> tuple[dict[str, Any], list[Any]]:
    result = await admin.consume_message_directly(args.group, args.client_id, topic, msg_id)
    return result, [
        table(
            ("Field", "Value"),
            sorted((str(k), str(v)) for k, v in result.items()),
            f"consume directly by {args.client_id}",
        )
    ]


def _ids(text: str) -> list[str]:
    return [i.strip() for i in text.split(",") if i.strip()]


async def resend_message(admin: AdminClient, args: argparse.Namespace) -> Result:
    data, rows = [], []
    for msg_id in _ids(args.msg_ids):
        stored, r = await admin.resend_message(args.topic, msg_id)
        data.append({"originalMsgId": msg_id, "topic": stored.topic, "sendStatus": r.status.name,
                     "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
                     "brokerName": r.message_queue.broker_name, "queueId": r.message_queue.queue_id})
        rows.append((msg_id, stored.topic, r.status.name, r.msg_id))
    t = table(("Original MsgId", "Topic", "Send Status", "New MsgId"), rows, "resent")
    return Result(data[0] if len(data) == 1 else data, [t])


async def query_msg_by_id(admin: AdminClient, args: argparse.Namespace) -> Result:
    if bool(args.group) != bool(args.client_id):
        raise UsageError("queryMsgById: -g and -d go together")
    if args.resend and not args.group:
        return await resend_message(admin, args)
    ids = _ids(args.msg_ids)
    data, views = [], []
    for msg_id in ids:
        msg = await admin.view_message(args.topic, msg_id)
        obj, vs = await _with_track(admin, msg)
        if args.group:
            obj["consumeResult"], extra = await _consume_directly(admin, args, msg.topic, msg.offset_msg_id)
            vs += extra
        data.append(obj)
        views += vs
    return Result(data[0] if len(data) == 1 else data, views)


async def query_msg_by_key(admin: AdminClient, args: argparse.Namespace) -> Result:
    msgs = await admin.query_message(args.topic, args.key, args.max_num, args.begin, args.end)
    return messages_result(msgs, f"messages of {args.topic} with key {args.key}")


async def query_msg_by_unique_key(admin: AdminClient, args: argparse.Namespace) -> Result:
    if bool(args.group) != bool(args.client_id):
        raise UsageError("queryMsgByUniqueKey: -g and -d go together")
    msgs = await admin.query_message_by_unique_key(args.topic, args.msg_id)
    if not msgs:
        from rocketq.errors import QueryNotFound

        raise QueryNotFound(f"no message with unique key {args.msg_id} in topic {args.topic}")
    shown = msgs if args.show_all else msgs[:1]
    data, views = [], []
    for msg in shown:
        obj, vs = await _with_track(admin, msg)
        data.append(obj)
        views += vs
    if args.group:
        result, extra = await _consume_directly(admin, args, args.topic, shown[0].offset_msg_id)
        data[0]["consumeResult"] = result
        views += extra
    return Result(data if args.show_all else data[0], views)


async def query_msg_by_offset(admin: AdminClient, args: argparse.Namespace) -> Result:
    msg = await admin.query_message_by_offset(args.topic, args.broker_name, args.queue_id, args.offset)
    return Result(message_obj(msg), [message_view(msg)])


async def queue_range(
    admin: AdminClient, mq: MessageQueue, begin: int | None, end: int | None
) -> tuple[int, int]:

    lo = await admin.min_offset(mq) if begin is None else await admin.search_offset(mq, begin)
    hi = await admin.max_offset(mq) if end is None else await admin.search_offset(mq, end)
    return lo, hi


async def print_msg(admin: AdminClient, args: argparse.Namespace) -> Result:
    print_body = args.print_body == "true"
    msgs: list[MessageExt] = []
    for mq in await admin.fetch_subscribe_queues(args.topic):
        lo, hi = await queue_range(admin, mq, args.begin, args.end)
        async for msg in admin.read_queue(mq, lo, hi, args.expression, limit=args.limit - len(msgs)):
            msgs.append(msg)
        if len(msgs) >= args.limit:
            break
    if args.charset.lower().replace("-", "") not in ("utf8",):
        msgs = [recode(m, args.charset) for m in msgs]
    return messages_result(msgs, f"messages of {args.topic}", print_body)


def recode(msg: MessageExt, charset: str) -> MessageExt:
    import dataclasses

    try:
        text = msg.body.decode(charset, "replace")
    except LookupError:
        raise UsageError(f"unknown charset {charset!r}") from None
    return dataclasses.replace(msg, body=text.encode("utf-8"))


async def send_message(admin: AdminClient, args: argparse.Namespace) -> Result:
    r = await admin.send_message(
        args.topic,
        args.body.encode("utf-8"),
        keys=args.key,
        tags=args.tags,
        broker_name=args.broker_name,
        queue_id=args.queue_id,
    )
    data = {
        "brokerName": r.message_queue.broker_name,
        "queueId": r.message_queue.queue_id,
        "sendStatus": r.status.name,
        "msgId": r.msg_id,
        "offsetMsgId": r.offset_msg_id,
        "queueOffset": r.queue_offset,
    }
    t = table(
        ("Broker Name", "Queue Id", "Send Status", "MsgId"),
        [(data["brokerName"], data["queueId"], data["sendStatus"], data["msgId"])],
    )
    return Result(data, [t])


async def consume_message(admin: AdminClient, args: argparse.Namespace) -> Result:
    if args.queue_id is not None and not args.broker_name:
        raise UsageError("consumeMessage: -i/--queueId needs -b/--brokerName")
    if args.offset is not None and args.queue_id is None:
        raise UsageError("consumeMessage: -o/--offset needs -i/--queueId")
    queues = [
        mq
        for mq in await admin.fetch_subscribe_queues(args.topic)
        if (args.broker_name is None or mq.broker_name == args.broker_name)
        and (args.queue_id is None or mq.queue_id == args.queue_id)
    ]
    if not queues:
        raise UsageError(f"consumeMessage: {args.topic} has no such queue")
    msgs: list[MessageExt] = []
    for mq in queues:
        lo, hi = await queue_range(admin, mq, args.begin, args.end)
        if args.offset is not None:
            lo = max(lo, args.offset)
        async for msg in admin.read_queue(mq, lo, hi, limit=args.count - len(msgs)):
            msgs.append(msg)
        if len(msgs) >= args.count:
            break
    return messages_result(msgs, f"consumed from {args.topic}")


async def check_msg_send_rt(admin: AdminClient, args: argparse.Namespace) -> Result:
    results = await admin.check_msg_send_rt(args.topic, args.amount, args.size)
    all_rts = [rt for r in results for rt in r.rts]
    avg = sum(all_rts) / len(all_rts) if all_rts else 0.0
    data = {
        "topic": args.topic,
        "amount": args.amount,
        "size": args.size,
        "avgRT": round(avg, 3),
        "brokers": [r.to_obj() for r in results],
    }
    t = table(
        ("Broker Name", "Sent", "Failed", "Avg RT (ms)", "Max RT (ms)"),
        [(r.broker_name, r.sent, r.failed, f"{r.avg:.3f}", f"{r.max:.3f}") for r in results],
        f"send RT to {args.topic}",
    )
    return Result(data, [t, cell(f"Avg RT: {avg:.3f} ms")])
