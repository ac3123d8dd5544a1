"""Consumer/producer group commands: updateSubGroup, deleteSubGroup, setConsumeMode, consumerProgress,
consumerConnection, producerConnection, consumerStatus, resetOffsetByTime, skipAccumulatedMessage,
cloneGroupOffset, getConsumerConfig, producer."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType

from rocketq.cli.admin._common import (
    Adder,
    Result,
    bool_arg,
    cell,
    format_ts,
    kv_table,
    mq_dict,
    non_negative,
    parse_timestamp,
    table,
)
from rocketq.cli.errors import UsageError
from rocketq.codec.bodies import SubscriptionGroupConfig
from rocketq.errors import RemotingError, ServerError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def _timestamp(text: str) -> int:
    return parse_timestamp(text)


def _attributes(text: str) -> dict[str, str]:
    out = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.lstrip("+").partition("=")
        if not key or not sep:
            raise argparse.ArgumentTypeError(f"bad attribute {part!r}: expected +key=value")
        out[key] = value
    return out


def register(add: Adder) -> None:
    register_pop(add)
    p = add("updateSubGroup", update_sub_group, "Update or create a subscription (consumer) group")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", metavar="ADDR", help="on this broker")
    g.add_argument(
        "-c", "--clusterName", dest="cluster", metavar="NAME", help="on every master of the cluster"
    )
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    flags = (
        ("s", "consumeEnable", "consume_enable"),
        ("m", "consumeFromMinEnable", "consume_from_min_enable"),
        ("d", "consumeBroadcastEnable", "consume_broadcast_enable"),
        ("o", "consumeMessageOrderly", "consume_message_orderly"),
        ("a", "notifyConsumerIdsChanged", "notify_consumer_ids_changed_enable"),
    )
    for letter, name, dest in flags:
        p.add_argument(f"-{letter}", f"--{name}", dest=dest, type=bool_arg, metavar="true|false", help=name)
    nums = (
        ("q", "retryQueueNums", "retry_queue_nums"),
        ("r", "retryMaxTimes", "retry_max_times"),
        ("i", "brokerId", "broker_id"),
        ("w", "whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
    )
    for letter, name, dest in nums:
        p.add_argument(f"-{letter}", f"--{name}", dest=dest, type=non_negative, metavar="N", help=name)
    p.add_argument("-p", "--groupRetryPolicy", dest="group_retry_policy", help=argparse.SUPPRESS)
    p.add_argument("--attributes", type=_attributes, metavar="+k=v,...", help="group attributes")

    p = add("deleteSubGroup", delete_sub_group, "Delete a subscription group")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", metavar="ADDR", help="from this broker")
    g.add_argument(
        "-c", "--clusterName", dest="cluster", metavar="NAME", help="from every master of the cluster"
    )
    p.add_argument("-g", "--groupName", dest="group", required=True, help="subscription group name")
    p.add_argument(
        "-r",
        "--removeOffset",
        dest="remove_offset",
        type=bool_arg,
        default=False,
        metavar="true|false",
        help="also delete the group's offsets",
    )

    p = add(
        "consumerProgress",
        consumer_progress,
        "Show a group's offsets and lag per queue (all groups without -g)",
    )
    p.add_argument("-g", "--groupName", dest="group", help="consumer group name")
    p.add_argument("-t", "--topicName", dest="topic", help="only this topic")
    p.add_argument(
        "-s",
        "--showClientIP",
        dest="show_client_ip",
        type=bool_arg,
        default=False,
        metavar="true|false",
        help=argparse.SUPPRESS,
    )
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("consumerConnection", consumer_connection, "Show a consumer group's online clients")
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help=argparse.SUPPRESS)

    p = add("producerConnection", producer_connection, "Show a producer group's online clients")
    p.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group name")
    p.add_argument("-t", "--topic", required=True, help="a topic the group sends to")

    p = add("consumerStatus", consumer_status, "Show consumers' running info (one client with -i)")
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-i", "--clientId", dest="client_id", help="the consumer's client id")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help=argparse.SUPPRESS)
    p.add_argument("-s", "--jstack", action="store_true", help="ask for the consumer's thread dump")

    p = add("getConsumerStatus", get_consumer_status, "Show the offsets each consumer holds for a topic")
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-i", "--originClientId", dest="client_id", help="only this client")

    p = add("resetOffsetByTime", reset_offset_by_time, "Move a group's offsets of a topic to a point in time")
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument(
        "-s",
        "--timestamp",
        type=_timestamp,
        required=True,
        help="now | epoch milliseconds | yyyy-MM-dd#HH:mm:ss:SSS | ISO 8601",
    )
    p.add_argument(
        "-f",
        "--force",
        type=bool_arg,
        default=True,
        metavar="true|false",
        help="false: only move offsets backwards (default true)",
    )
    p.add_argument("-b", "--broker", dest="broker_addr", metavar="ADDR", help="only this broker")
    p.add_argument("-q", "--queue", dest="queue_id", type=non_negative, help="only this queue id (needs -b)")
    p.add_argument("-o", "--offset", type=non_negative, help="with -q: this exact offset")
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("skipAccumulatedMessage", skip_accumulated, "Move a group's offsets of a topic to the end")
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-f", "--force", type=bool_arg, default=True, metavar="true|false", help=argparse.SUPPRESS)
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("producer", producer_info, "Show every producer group's instances on one broker")
    p.add_argument("-b", "--broker", dest="broker_addr", required=True, help="broker address")

    p = add("getConsumerConfig", get_consumer_config, "Show a subscription group's config on every broker")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="subscription group name")

    p = add("cloneGroupOffset", clone_group_offset, "Copy one group's offsets to another group")
    p.add_argument("-s", "--srcGroup", dest="src", required=True, help="source consumer group")
    p.add_argument("-d", "--destGroup", dest="dest", required=True, help="destination consumer group")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument(
        "-o",
        "--offline",
        type=bool_arg,
        default=False,
        metavar="true|false",
        help="the source group is offline (clone every committed topic offset)",
    )


def register_pop(add: Adder) -> None:
    p = add("setConsumeMode", set_consume_mode, "Set how a group consumes a topic: PULL or POP (RocketMQ 5)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", metavar="ADDR", help="on this broker")
    g.add_argument("-c", "--clusterName", dest="cluster", metavar="NAME",
                   help="on every master of the cluster")
    p.add_argument("-t", "--topicName", dest="topic", required=True, help="topic name")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    p.add_argument("-m", "--mode", dest="mode", required=True, type=str.upper, choices=("PULL", "POP"),
                   help="consume mode: PULL or POP")
    p.add_argument("-q", "--popShareQueueNum", dest="pop_share_queue_num", type=non_negative, default=0,
                   help="num of queue which share in pop mode")


async def set_consume_mode(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await _targets(admin, args, "setConsumeMode")
    for addr in addrs:
        await admin.set_message_request_mode(addr, args.topic, args.group, args.mode,
                                             args.pop_share_queue_num)
    done = {"topic": args.topic, "group": args.group, "mode": args.mode,
            "popShareQueueNum": args.pop_share_queue_num}
    views: list[RenderableType] = [cell(f"set consume mode to {a} success.") for a in addrs]
    views.append(cell(f"topic[{args.topic}] group[{args.group}] consume mode[{args.mode}] "
                      f"popShareQueueNum[{args.pop_share_queue_num}]"))
    return Result({"brokers": addrs, **done}, views)


async def _targets(admin: AdminClient, args: argparse.Namespace, command: str) -> list[str]:
    if not args.broker_addr and not args.cluster:
        raise UsageError(f"{command}: one of -b/--brokerAddr or -c/--clusterName is required")
    return await admin.targets(args.cluster, args.broker_addr)


async def update_sub_group(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await _targets(admin, args, "updateSubGroup")
    fields: dict[str, Any] = {"group_name": args.group}
    for name in (
        "consume_enable",
        "consume_from_min_enable",
        "consume_broadcast_enable",
        "consume_message_orderly",
        "notify_consumer_ids_changed_enable",
        "retry_queue_nums",
        "retry_max_times",
        "broker_id",
        "which_broker_when_consume_slowly",
    ):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    if args.attributes:
        fields["attributes"] = args.attributes
    config = SubscriptionGroupConfig(**fields)
    for addr in addrs:
        await admin.create_and_update_subscription_group_config(addr, config)
    views: list[RenderableType] = [cell(f"create subscription group to {a} success.") for a in addrs]
    views.append(kv_table(config.to_obj(), "SubscriptionGroupConfig"))
    return Result({"brokers": addrs, "config": config.to_obj()}, views)


async def delete_sub_group(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await _targets(admin, args, "deleteSubGroup")
    for addr in addrs:
        await admin.delete_subscription_group(addr, args.group, args.remove_offset)
    views = [cell(f"delete subscription group [{args.group}] from broker [{a}] success.") for a in addrs]
    return Result({"group": args.group, "brokers": addrs, "removeOffset": args.remove_offset}, views)


async def consumer_progress(admin: AdminClient, args: argparse.Namespace) -> Result:
    if not args.group:
        return await _all_groups_progress(admin)
    stats = await admin.examine_consume_stats(args.group, args.topic)
    rows = []
    for mq, w in stats.offset_table.items():
        rows.append(
            {
                **mq_dict(mq),
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "diff": w.broker_offset - w.consumer_offset,
                # popped and not yet acked (pop groups; 5.x's #Inflight = pullOffset - consumerOffset)
                "inflight": max(0, w.pull_offset - w.consumer_offset),
                # of those, past their invisible time and waiting for the revive service (rocketq brokers)
                "toRevive": w.revive_backlog,
                "lastTimestamp": w.last_timestamp,
            }
        )
    total = sum(r["diff"] for r in rows)
    inflight = sum(r["inflight"] for r in rows)
    data = {"group": args.group, "consumeTps": stats.consume_tps, "diffTotal": total,
            "inflightTotal": inflight, "toReviveTotal": sum(r["toRevive"] for r in rows), "queues": rows}
    t = table(
        ("Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "#Inflight", "#ToRevive",
         "LastTime"),
        [
            (
                r["topic"],
                r["brokerName"],
                r["queueId"],
                r["brokerOffset"],
                r["consumerOffset"],
                r["diff"],
                r["inflight"],
                r["toRevive"],
                format_ts(r["lastTimestamp"]),
            )
            for r in rows
        ],
        f"consumer progress of {args.group}",
    )
    return Result(data, [t, cell(f"Consume TPS: {stats.consume_tps:.2f}"), cell(f"Diff Total: {total}")])


async def _all_groups_progress(admin: AdminClient) -> Result:
    rows = []
    for group in await admin.consumer_groups():
        try:
            stats = await admin.examine_consume_stats(group)
        except (ServerError, RemotingError):
            continue
        if not stats.offset_table:
            continue
        count, consume_type, model = 0, "", ""
        try:
            conn = await admin.examine_consumer_connection_info(group)
            count, consume_type, model = (
                len(conn.connection_set),
                conn.consume_type or "",
                conn.message_model or "",
            )
        except ServerError:
            pass  # offline: its offsets still show its lag
        rows.append(
            {
                "group": group,
                "count": count,
                "consumeType": consume_type,
                "messageModel": model,
                "consumeTps": stats.consume_tps,
                "diffTotal": stats.total_diff,
            }
        )
    t = table(
        ("Group", "Count", "Type", "Model", "TPS", "Diff Total"),
        [
            (
                r["group"],
                r["count"],
                r["consumeType"],
                r["messageModel"],
                f"{r['consumeTps']:.2f}",
                r["diffTotal"],
            )
            for r in rows
        ],
    )
    return Result(rows, [t])


async def consumer_connection(admin: AdminClient, args: argparse.Namespace) -> Result:
    cc = await admin.examine_consumer_connection_info(args.group)
    conns = table(
        ("#", "ClientId", "ClientAddr", "Language", "Version"),
        [(i, c.client_id, c.client_addr, c.language, c.version) for i, c in enumerate(cc.connection_set, 1)],
        f"connections of {args.group}",
    )
    subs = table(
        ("Topic", "SubExpression"),
        [(t, s.sub_string) for t, s in sorted(cc.subscription_table.items())],
        "subscriptions",
    )
    summary = cell(
        f"ConsumeType: {cc.consume_type}  MessageModel: {cc.message_model}  "
        f"ConsumeFromWhere: {cc.consume_from_where}"
    )
    return Result(cc.to_obj(), [conns, subs, summary])


async def producer_connection(admin: AdminClient, args: argparse.Namespace) -> Result:
    pc = await admin.examine_producer_connection_info(args.group, args.topic)
    t = table(
        ("#", "ClientId", "ClientAddr", "Language", "Version"),
        [(i, c.client_id, c.client_addr, c.language, c.version) for i, c in enumerate(pc.connection_set, 1)],
        f"connections of {args.group}",
    )
    return Result(pc.to_obj(), [t])


async def consumer_status(admin: AdminClient, args: argparse.Namespace) -> Result:
    if args.client_id:
        info = await admin.get_consumer_running_info(args.group, args.client_id, args.jstack)
        return Result(info, _running_info_views(args.client_id, info))
    cc = await admin.examine_consumer_connection_info(args.group)
    out: dict[str, Any] = {}
    rows = []
    for c in cc.connection_set:
        try:
            info = await admin.get_consumer_running_info(args.group, c.client_id, args.jstack)
        except (ServerError, RemotingError) as exc:
            out[c.client_id] = {"error": str(exc)}
            rows.append((c.client_id, c.client_addr, c.language, "", str(exc)))
            continue
        out[c.client_id] = info
        props = info.get("properties") or {}
        rows.append(
            (
                c.client_id,
                c.client_addr,
                c.language,
                props.get("PROP_CONSUME_TYPE", ""),
                f"{len(info.get('mqTable') or {})} queues",
            )
        )
    t = table(
        ("ClientId", "ClientAddr", "Language", "ConsumeType", "Status"), rows, f"consumers of {args.group}"
    )
    return Result(out, [t])


async def get_consumer_status(admin: AdminClient, args: argparse.Namespace) -> Result:
    status = await admin.get_consume_status(args.topic, args.group, args.client_id)
    data = {
        cid: [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off} for mq, off in t.items()]
        for cid, t in status.items()
    }
    rows = [(cid, q["brokerName"], q["queueId"], q["offset"]) for cid, qs in data.items() for q in qs]
    t = table(
        ("#clientId", "#brokerName", "#queueId", "#offset"), rows, f"consumer status of {args.group}"
    )
    return Result(data, [t])


def _running_info_views(client_id: str, info: dict[str, Any]) -> list[Any]:
    props = {str(k): v for k, v in (info.get("properties") or {}).items()}
    views: list[Any] = [kv_table(props, f"running info of {client_id}")]
    subs = info.get("subscriptionSet") or []
    views.append(
        table(
            ("Topic", "SubExpression"), [(s.get("topic"), s.get("subString")) for s in subs], "subscriptions"
        )
    )
    mq_table = info.get("mqTable") or {}
    if mq_table:
        views.append(
            table(
                ("MessageQueue", "Process Queue"),
                sorted((str(k), str(v)) for k, v in mq_table.items()),
                "queues",
            )
        )
    if info.get("jstack"):
        views.append(cell(info["jstack"]))
    return views


def _reset_rows(offsets: dict[Any, int]) -> tuple[list[dict[str, Any]], Any]:
    rows = [{**mq_dict(mq), "offset": off} for mq, off in offsets.items()]
    return rows, table(
        ("Topic", "Broker Name", "QID", "New Offset"),
        [(r["topic"], r["brokerName"], r["queueId"], r["offset"]) for r in rows],
    )


async def reset_offset_by_time(admin: AdminClient, args: argparse.Namespace) -> Result:
    if args.queue_id is not None and not args.broker_addr:
        raise UsageError("resetOffsetByTime: -q/--queue needs -b/--broker")
    if args.offset is not None and args.queue_id is None:
        raise UsageError("resetOffsetByTime: -o/--offset needs -q/--queue")
    offsets = await admin.reset_offset_by_timestamp(
        args.topic,
        args.group,
        args.timestamp,
        args.force,
        queue_id=args.queue_id,
        offset=args.offset,
        broker_addr=args.broker_addr,
    )
    rows, t = _reset_rows(offsets)
    data = {"group": args.group, "topic": args.topic, "timestamp": args.timestamp, "offsets": rows}
    return Result(
        data,
        [
            cell(
                f"reset consumer offset of {args.group} on {args.topic} to "
                f"{format_ts(args.timestamp) or args.timestamp}"
            ),
            t,
        ],
    )


async def skip_accumulated(admin: AdminClient, args: argparse.Namespace) -> Result:
    offsets = await admin.reset_offset_by_timestamp(args.topic, args.group, -1, args.force)
    rows, t = _reset_rows(offsets)
    return Result({"group": args.group, "topic": args.topic, "offsets": rows}, [t])


async def clone_group_offset(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await admin.clone_group_offset(args.src, args.dest, args.topic, args.offline)
    data = {"srcGroup": args.src, "destGroup": args.dest, "topic": args.topic, "brokers": addrs}
    return Result(
        data,
        [
            cell(
                f"clone group offset success. srcGroup[{args.src}], destGroup={args.dest}, "
                f"topic[{args.topic}]"
            )
        ],
    )


async def get_consumer_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    """The group's SubscriptionGroupConfig on each broker that has it (mqadmin asks every broker)."""
    from rocketq.errors import SubscriptionGroupNotExist

    info = await admin.examine_broker_cluster_info()
    cluster_of = {name: c for c, names in info.cluster_addr_table.items() for name in names}
    data, views = [], []
    for name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.master_addr or next(iter(sorted(bd.broker_addrs.items())), (0, None))[1]
        if addr is None:
            continue
        try:
            config = (await admin.examine_subscription_group_config(addr, args.group)).to_obj()
        except SubscriptionGroupNotExist:
            continue
        data.append({"clusterName": cluster_of.get(name), "brokerName": name, "config": config})
        views.append(kv_table(config, f"{cluster_of.get(name)}:{name}"))
    if not data:
        raise SubscriptionGroupNotExist(f"subscription group [{args.group}] is on no broker")
    return Result(data, views)


async def producer_info(admin: AdminClient, args: argparse.Namespace) -> Result:
    """GET_ALL_PRODUCER_INFO: each producer group's live connections on this broker."""
    table_ = await admin.get_all_producer_info(args.broker_addr)
    rows = [(group, p.get("clientId"), p.get("remoteIP"), p.get("language"), p.get("version"),
             format_ts(int(str(p.get("lastUpdateTimestamp") or 0))))
            for group, producers in sorted(table_.items()) for p in producers]
    t = table(("Producer Group", "Client Id", "Remote IP", "Language", "Version", "Last Update"), rows,
              f"producers on {args.broker_addr}")
    return Result(table_, [t])
