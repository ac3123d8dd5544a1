"""Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus, topicClusterList,
updateTopicPerm, updateOrderConf."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import RenderableType

from rocketq.cli.admin._common import Adder, Result, bool_arg, cell, format_ts, mq_dict, positive, table
from rocketq.cli.errors import UsageError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


PERM_HELP = "permission: 2 (W), 4 (R) or 6 (RW)"


def _perm(text: str) -> int:
    if text not in ("0", "2", "4", "6"):
        raise argparse.ArgumentTypeError(f"'{text}' is not a permission: use 2 (W), 4 (R) or 6 (RW)")
    return int(text)


def _target(p: argparse.ArgumentParser, what: str) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", metavar="ADDR", help=f"{what} on this broker")
    g.add_argument(
        "-c", "--clusterName", dest="cluster", metavar="NAME", help=f"{what} on every master of the cluster"
    )


def register(add: Adder) -> None:
    p = add("updateTopic", update_topic, "Update or create a topic")
    _target(p, "create the topic")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument(
        "-r", "--readQueueNums", dest="read", type=positive, default=8, help="read queues (default 8)"
    )
    p.add_argument(
        "-w", "--writeQueueNums", dest="write", type=positive, default=8, help="write queues (default 8)"
    )
    p.add_argument("-p", "--perm", type=_perm, default=6, help=PERM_HELP + " (default 6)")
    p.add_argument("-o", "--order", type=bool_arg, default=False, metavar="true|false", help="ordered topic")
    p.add_argument("-a", "--attributes", metavar="+k=v,-k", help="attribute patch, e.g. +a=b,+c=d,-e")
    p.add_argument("-u", "--unit", type=bool_arg, default=False, metavar="true|false", help=argparse.SUPPRESS)
    p.add_argument(
        "-s", "--hasUnitSub", type=bool_arg, default=False, metavar="true|false", help=argparse.SUPPRESS
    )

    p = add("deleteTopic", delete_topic, "Delete a topic from a cluster's brokers and the name servers")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="cluster to delete it from")

    p = add("topicList", topic_list, "List the topics the name servers know")
    p.add_argument(
        "-c",
        "--clusterModel",
        dest="cluster_model",
        action="store_true",
        help="also show each topic's cluster and consumer groups",
    )

    p = add("topicRoute", topic_route, "Show a topic's route (queues per broker, broker addresses)")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-l", "--list", dest="as_list", action="store_true", help="one row per broker")

    p = add("topicStatus", topic_status, "Show a topic's queues: min/max offsets and last update")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--cluster", help=argparse.SUPPRESS)

    p = add("topicClusterList", topic_cluster_list, "Show the clusters a topic is on")
    p.add_argument("-t", "--topic", required=True, help="topic name")

    p = add("updateTopicPerm", update_topic_perm, "Change a topic's permission")
    _target(p, "change it")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--perm", type=_perm, required=True, help=PERM_HELP)

    p = add("updateOrderConf", update_order_conf, "Get, put or delete an ordered topic's name-server conf")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-m", "--method", required=True, choices=("get", "put", "delete"), help="what to do")
    p.add_argument("-v", "--orderConf", dest="order_conf", help="with put: brokerName1:num;brokerName2:num")


async def update_topic(admin: AdminClient, args: argparse.Namespace) -> Result:
    if not args.broker_addr and not args.cluster:
        raise UsageError("updateTopic: one of -b/--brokerAddr or -c/--clusterName is required")
    addrs = await admin.create_topic(
        args.topic,
        cluster=args.cluster,
        broker_addr=args.broker_addr,
        read_queue_nums=args.read,
        write_queue_nums=args.write,
        perm=args.perm,
        order=args.order,
        attributes=args.attributes,
    )
    data = {
        "topic": args.topic,
        "brokers": addrs,
        "readQueueNums": args.read,
        "writeQueueNums": args.write,
        "perm": args.perm,
        "order": args.order,
    }
    views = [cell(f"create topic to {a} success.") for a in addrs]
    views.append(
        cell(
            f"TopicConfig [topicName={args.topic}, readQueueNums={args.read}, "
            f"writeQueueNums={args.write}, perm={args.perm}, order={str(args.order).lower()}]"
        )
    )
    return Result(data, views)


async def delete_topic(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await admin.delete_topic(args.topic, args.cluster)
    views = [cell(f"delete topic [{args.topic}] from cluster [{args.cluster}] success.")]
    views += [cell(f"delete topic [{args.topic}] from broker {a} success.") for a in addrs]
    return Result({"topic": args.topic, "cluster": args.cluster, "brokers": addrs}, views)


async def topic_list(admin: AdminClient, args: argparse.Namespace) -> Result:
    topics = await admin.fetch_all_topic_list()
    if not args.cluster_model:
        return Result(topics, [table(("Topic",), [(t,) for t in topics])])
    info = await admin.examine_broker_cluster_info()
    broker_cluster = {name: c for c, names in info.cluster_addr_table.items() for name in names}
    rows = []
    for t in topics:
        try:
            route = await admin.examine_topic_route_info(t)
            clusters = sorted({broker_cluster.get(b.broker_name, b.cluster) for b in route.broker_datas})
            groups = await admin.query_topic_consume_by_who(t)
        except Exception:  # a topic that vanished between the two calls
            clusters, groups = [], []
        rows.append({"topic": t, "clusters": clusters, "consumerGroups": groups})
    return Result(
        rows,
        [
            table(
                ("Cluster Name", "Topic", "Consumer Groups"),
                [(",".join(r["clusters"]), r["topic"], ",".join(r["consumerGroups"])) for r in rows],
            )
        ],
    )


async def topic_route(admin: AdminClient, args: argparse.Namespace) -> Result:
    route = await admin.examine_topic_route_info(args.topic)
    data = route.to_obj()
    queues = {q.broker_name: q for q in route.queue_datas}
    if args.as_list:
        rows = []
        for b in sorted(route.broker_datas, key=lambda b: b.broker_name):
            q = queues.get(b.broker_name)
            rows.append(
                (
                    b.cluster,
                    b.broker_name,
                    b.master_addr or "",
                    q.read_queue_nums if q else 0,
                    q.write_queue_nums if q else 0,
                    q.perm if q else 0,
                )
            )
        return Result(
            data,
            [
                table(
                    ("Cluster", "Broker Name", "Broker Addr", "Read Queues", "Write Queues", "Perm"),
                    rows,
                    f"route of {args.topic}",
                )
            ],
        )
    qrows = [
        (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
        for q in sorted(route.queue_datas)
    ]
    brows = [
        (b.cluster, b.broker_name, ", ".join(f"{i}={a}" for i, a in sorted(b.broker_addrs.items())))
        for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
    ]
    views: list[RenderableType] = [
        table(("Broker Name", "Read Queues", "Write Queues", "Perm", "Topic Sys Flag"), qrows, "queueDatas"),
        table(("Cluster", "Broker Name", "Broker Addrs (id=addr)"), brows, "brokerDatas"),
    ]
    if route.order_topic_conf:
        views.append(cell(f"orderTopicConf: {route.order_topic_conf}"))
    return Result(data, views)


async def topic_status(admin: AdminClient, args: argparse.Namespace) -> Result:
    stats = await admin.examine_topic_stats(args.topic)
    rows = [
        {
            **mq_dict(mq),
            "minOffset": o.min_offset,
            "maxOffset": o.max_offset,
            "lastUpdateTimestamp": o.last_update_timestamp,
        }
        for mq, o in stats.offset_table.items()
    ]
    return Result(
        rows,
        [
            table(
                ("Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"),
                [
                    (
                        r["brokerName"],
                        r["queueId"],
                        r["minOffset"],
                        r["maxOffset"],
                        format_ts(r["lastUpdateTimestamp"]),
                    )
                    for r in rows
                ],
                f"status of {args.topic}",
            )
        ],
    )


async def topic_cluster_list(admin: AdminClient, args: argparse.Namespace) -> Result:
    clusters = await admin.get_topic_cluster_list(args.topic)
    return Result(clusters, [cell(c) for c in clusters])


async def update_topic_perm(admin: AdminClient, args: argparse.Namespace) -> Result:
    changed = await admin.update_topic_perm(
        args.topic, args.perm, cluster=args.cluster, broker_addr=args.broker_addr
    )
    rows = [{"broker": a, "oldPerm": old, "newPerm": new} for a, (old, new) in changed.items()]
    views = [
        cell(f"update topic perm from {r['oldPerm']} to {r['newPerm']} in {r['broker']} success.")
        for r in rows
    ]
    return Result({"topic": args.topic, "brokers": rows}, views)


async def update_order_conf(admin: AdminClient, args: argparse.Namespace) -> Result:
    """The name servers' ORDER_TOPIC_CONFIG entry of a topic (which brokers and how many queues an
    ordered topic has); put and delete reach every name server."""
    from rocketq.admin.topics import ORDER_TOPIC_CONFIG

    topic = args.topic
    if args.method == "get":
        conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, topic)
        return Result({"topic": topic, "orderConf": conf},
                      [cell(f"get orderConf success. topic=[{topic}], orderConf=[{conf or ''}]")])
    if args.method == "delete":
        await admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)
        return Result({"topic": topic, "deleted": True}, [cell(f"delete orderConf success. topic=[{topic}]")])
    conf = (args.order_conf or "").strip()
    if not conf:
        raise UsageError("updateOrderConf: put needs the conf with -v (brokerName:num;brokerName:num)")
    for part in conf.split(";"):
        name, sep, num = part.partition(":")
        if not (name.strip() and sep and num.strip().isdigit()):
            raise UsageError(f"updateOrderConf: '{part}' is not brokerName:num")
    await admin.create_and_update_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
    return Result({"topic": topic, "orderConf": conf},
                  [cell(f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")])
