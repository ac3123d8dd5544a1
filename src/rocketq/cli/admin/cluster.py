"""Cluster and broker commands: clusterList, clusterRT, brokerStatus, brokerConsumeStats,
getBrokerConfig, updateBrokerConfig, cleanExpiredCQ, statsAll."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from rocketq.broker.config import BrokerConfig
from rocketq.cli.admin._common import (
    Adder,
    Result,
    bool_arg,
    cell,
    format_ts,
    kv_table,
    mq_dict,
    positive,
    table,
)
from rocketq.cli.errors import UsageError
from rocketq.config import check_updatable
from rocketq.errors import ConfigError, RemotingError, RocketQError, ServerError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient
    from rocketq.admin.models import ClusterBroker


def broker_config_classes() -> tuple[type, ...]:
    """What UPDATE_BROKER_CONFIG may carry: keys of the broker's three configs (never a path or command)."""
    from rocketq.broker.java_config import JavaOnlyConfig
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig

    return (BrokerConfig, MessageStoreConfig, RemotingServerConfig, JavaOnlyConfig)


def _target(p: argparse.ArgumentParser, cluster_help: str = "every broker of the cluster") -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", metavar="ADDR",
                   help="this broker: host:port, or a broker name")
    g.add_argument("-c", "--clusterName", dest="cluster", metavar="NAME", help=cluster_help)


def register(add: Adder) -> None:
    p = add("clusterList", cluster_list, "List the brokers of every cluster with their load")
    p.add_argument("-m", "--moreStats", dest="more", action="store_true", help="more statistics")
    p.add_argument("-i", "--interval", type=positive, help="repeat every N seconds (Ctrl-C stops)")
    p.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")

    p = add("clusterRT", cluster_rt, "Measure send round trips to every broker of the clusters")
    p.add_argument("-a", "--amount", type=positive, default=100, help="messages per broker (default 100)")
    p.add_argument("-s", "--size", type=positive, default=128, help="body bytes (default 128)")
    p.add_argument("-c", "--cluster", help="only this cluster")
    p.add_argument(
        "-p", "--print-log", dest="print_log", type=bool_arg, default=False, help=argparse.SUPPRESS
    )
    p.add_argument("-m", "--machine-room", dest="machine_room", default="noname", help=argparse.SUPPRESS)
    p.add_argument("-i", "--interval", type=positive, help=argparse.SUPPRESS)

    p = add("brokerStatus", broker_status, "Show a broker's runtime statistics")
    _target(p)

    p = add("brokerConsumeStats", broker_consume_stats, "Show every group's lag on one broker")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="broker address")
    p.add_argument("-t", "--timeoutMillis", dest="timeout_millis", type=positive, help=argparse.SUPPRESS)
    p.add_argument("-l", "--level", type=int, default=0, help="only queues with a diff above this")
    p.add_argument(
        "-o", "--order", type=bool_arg, default=False, metavar="true|false", help="ordered topics only"
    )

    p = add("getBrokerConfig", get_broker_config, "Show brokers' configuration")
    _target(p, "every master of the cluster")

    p = add("updateBrokerConfig", update_broker_config, "Change one broker config key at runtime")
    _target(p, "every master of the cluster")
    p.add_argument("-k", "--key", required=True, help="config key (RocketMQ name)")
    p.add_argument("-v", "--value", required=True, help="config value")
    p.add_argument(
        "-a",
        "--updateAllBroker",
        dest="all_brokers",
        type=bool_arg,
        default=False,
        metavar="true|false",
        help="with -c: slaves too",
    )

    p = add("cleanExpiredCQ", clean_expired_cq, "Delete consume-queue files whose messages are gone")
    _target(p, "every master of the cluster")

    p = add("haStatus", ha_status, "Show master/slave replication: each slave's acked offset and lag")
    _target(p, "every broker group of the cluster")
    p.add_argument("-i", "--interval", type=positive, help="repeat every N seconds (Ctrl-C stops)")

    p = add("statsAll", stats_all, "Topic and group throughput over the last minute and day")
    p.add_argument("-a", "--activeTopic", dest="active", action="store_true", help="only topics with traffic")
    p.add_argument("-t", "--topic", help="only this topic")


async def _brokers(admin: AdminClient, args: argparse.Namespace, masters_only: bool = True) -> list[str]:
    if args.broker_addr and ":" in args.broker_addr:
        return [args.broker_addr]
    if args.broker_addr:  # a broker name: its master (and with masters_only=False, its slaves too)
        info = await admin.examine_broker_cluster_info()
        data = info.broker_addr_table.get(args.broker_addr)
        if data is None or not data.broker_addrs:
            raise UsageError(f"broker [{args.broker_addr}] not found (give host:port or a broker name)")
        ids = sorted(data.broker_addrs) if not masters_only else [i for i in data.broker_addrs if i == 0]
        if not ids:
            raise UsageError(f"broker [{args.broker_addr}] has no master online")
        return [data.broker_addrs[i] for i in ids]
    if masters_only:
        return list((await admin.master_addrs(args.cluster)).values())
    info = await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(args.cluster) if args.cluster else tuple(info.broker_addr_table)
    if names is None:
        raise UsageError(f"cluster [{args.cluster}] not found")
    return [a for n in sorted(names) for _, a in sorted(info.broker_addr_table[n].broker_addrs.items())]


# -- clusterList -----------------------------------------------------------------------------------------


def _tps(runtime: dict[str, str], key: str) -> str:
    """The 10 s rate out of RocketMQ's "10s 1min 10min" triple."""
    return (runtime.get(key) or "0").split(" ")[0]


def _cluster_row(b: ClusterBroker) -> dict[str, Any]:
    rt = b.runtime
    return {
        "clusterName": b.cluster,
        "brokerName": b.broker_name,
        "brokerId": b.broker_id,
        "addr": b.addr,
        "version": rt.get("brokerVersionDesc", ""),
        "inTps": _tps(rt, "putTps"),
        "outTps": _tps(rt, "getTransferredTps")
        if "getTransferredTps" in rt
        else _tps(rt, "getTransferedTps"),
        "inTotalToday": int(rt.get("msgPutTotalTodayNow", 0) or 0)
        - int(rt.get("msgPutTotalTodayMorning", 0) or 0),
        "outTotalToday": int(rt.get("msgGetTotalTodayNow", 0) or 0)
        - int(rt.get("msgGetTotalTodayMorning", 0) or 0),
        "diskRatio": rt.get("commitLogDiskRatio", ""),
        "role": b.role,
        "replicationLagBytes": b.replication_lag_bytes,
        "error": b.error,
        "runtime": rt,
    }


async def cluster_list(admin: AdminClient, args: argparse.Namespace) -> Result:
    while True:
        rows = [_cluster_row(b) for b in await admin.cluster_list(args.cluster)]
        columns = [
            "Cluster Name",
            "Broker Name",
            "BID",
            "Addr",
            "Version",
            "InTPS",
            "OutTPS",
            "InTotalToday",
            "OutTotalToday",
            "Role",
            "Lag(B)",
        ]
        if args.more:
            columns += ["Disk Ratio", "Status"]
        out = []
        for r in rows:
            row = [
                r["clusterName"],
                r["brokerName"],
                r["brokerId"],
                r["addr"],
                r["version"],
                r["inTps"],
                r["outTps"],
                r["inTotalToday"],
                r["outTotalToday"],
                r["role"],
                r["replicationLagBytes"],
            ]
            if args.more:
                row += [r["diskRatio"], r["error"] or "OK"]
            out.append(row)
        result = Result(rows, [table(columns, out)])
        if not args.interval:
            return result
        from rocketq.cli.admin import emit

        emit(result, as_json=args.json)
        await asyncio.sleep(args.interval)


# -- haStatus (mqadmin 5.x's HAStatusSubCommand, over GET_BROKER_HA_STATUS) ------------------------------


async def ha_status(admin: AdminClient, args: argparse.Namespace) -> Result:
    while True:
        rows, blocks = [], []
        for addr in await _brokers(admin, args, masters_only=False):
            try:
                info = await admin.get_broker_ha_status(addr)
            except (ServerError, RemotingError) as exc:
                rows.append({"addr": addr, "error": str(exc)})
                blocks.append(kv_table({"#Broker": addr, "#Error": str(exc)}))
                continue
            rows.append({"addr": addr, **info})
            if info.get("master"):
                blocks.append(kv_table({
                    "#MasterAddr": addr, "#MasterCommitLogMaxOffset": info["masterCommitLogMaxOffset"],
                    "#SlaveNum": len(info["haConnectionInfo"]), "#InSyncSlaveNum": info["inSyncSlaveNums"]}))
                blocks.append(table(
                    ["#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                     "#TransferFromWhere"],
                    [[c["addr"], c["slaveAckOffset"], c["diff"], f"{c['transferredByteInSecond'] / 1024:.2f}",
                      "OK" if c["inSync"] else "Fall Behind", c["transferFromWhere"]]
                     for c in info["haConnectionInfo"]]))
            else:
                c = info["haClientRuntimeInfo"]
                blocks.append(kv_table({
                    "#SlaveAddr": addr, "#MasterAddr": c["masterAddr"], "#Connected": c["isActivated"],
                    "#MaxOffset": c["maxOffset"], "#MasterOffsetSeen": c["masterFlushOffset"],
                    "#TransferSpeed(KB/s)": f"{c['transferredByteInSecond'] / 1024:.2f}",
                    "#LastReadTime": format_ts(c["lastReadTimestamp"]),
                    "#LastWriteTime": format_ts(c["lastWriteTimestamp"])}))
        result = Result(rows, blocks)
        if not args.interval:
            return result
        from rocketq.cli.admin import emit

        emit(result, as_json=args.json)
        await asyncio.sleep(args.interval)


async def cluster_rt(admin: AdminClient, args: argparse.Namespace) -> Result:
    info = await admin.examine_broker_cluster_info()
    rows = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        if args.cluster and cluster != args.cluster:
            continue
        for name in sorted(names):
            try:
                results = await admin.check_msg_send_rt(name, args.amount, args.size, broker_names=[name])
            except (ServerError, RemotingError) as exc:
                rows.append({"cluster": cluster, "brokerName": name, "error": str(exc)})
                continue
            for r in results:
                rows.append({"cluster": cluster, **r.to_obj()})
    t = table(
        ("Cluster", "Broker Name", "Sent", "Failed", "Avg RT (ms)", "Max RT (ms)"),
        [
            (
                r["cluster"],
                r["brokerName"],
                r.get("sent", ""),
                r.get("failed", r.get("error", "")),
                r.get("avgRT", ""),
                r.get("maxRT", ""),
            )
            for r in rows
        ],
        "cluster send RT",
    )
    return Result(rows, [t])


async def broker_status(admin: AdminClient, args: argparse.Namespace) -> Result:
    if not args.broker_addr and not args.cluster:
        raise UsageError("brokerStatus: one of -b/--brokerAddr or -c/--clusterName is required")
    data, views = {}, []
    for addr in await _brokers(admin, args, masters_only=False):
        stats = await admin.fetch_broker_runtime_stats(addr)
        data[addr] = stats
        views.append(kv_table(stats, f"broker {addr}"))
    return Result(data, views)


async def broker_consume_stats(admin: AdminClient, args: argparse.Namespace) -> Result:
    stats = await admin.fetch_consume_stats_in_broker(args.broker_addr, args.order)
    rows = []
    for group, per_topic in sorted(stats.groups.items()):
        for cs in per_topic:
            for mq, w in cs.offset_table.items():
                diff = w.broker_offset - w.consumer_offset
                if diff < args.level:
                    continue
                rows.append(
                    {
                        "group": group,
                        **mq_dict(mq),
                        "brokerOffset": w.broker_offset,
                        "consumerOffset": w.consumer_offset,
                        "diff": diff,
                        "lastTimestamp": w.last_timestamp,
                    }
                )
    data = {"brokerAddr": stats.broker_addr, "totalDiff": stats.total_diff, "queues": rows}
    t = table(
        ("Topic", "Group", "Broker Name", "QID", "BrokerOffset", "ConsumerOffset", "Diff", "LastTime"),
        [
            (
                r["topic"],
                r["group"],
                r["brokerName"],
                r["queueId"],
                r["brokerOffset"],
                r["consumerOffset"],
                r["diff"],
                format_ts(r["lastTimestamp"]),
            )
            for r in rows
        ],
        f"consume stats of {stats.broker_addr}",
    )
    return Result(data, [t, cell(f"Diff Total: {stats.total_diff}")])


async def get_broker_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    if not args.broker_addr and not args.cluster:
        raise UsageError("getBrokerConfig: one of -b/--brokerAddr or -c/--clusterName is required")
    data, views = {}, []
    for addr in await _brokers(admin, args):
        config = await admin.get_broker_config(addr)
        data[addr] = config
        views.append(kv_table(config, f"config of {addr}"))
    return Result(data, views)


async def update_broker_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    if not args.broker_addr and not args.cluster:
        raise UsageError("updateBrokerConfig: one of -b/--brokerAddr or -c/--clusterName is required")
    try:  # the safe-key rule: refuse here what every broker refuses anyway (CVE-2023-33246)
        check_updatable(args.key, broker_config_classes())
    except ConfigError as exc:
        raise UsageError(f"updateBrokerConfig: {exc}") from None
    addrs = await _brokers(admin, args, masters_only=not args.all_brokers)
    for addr in addrs:
        await admin.update_broker_config(addr, {args.key: args.value})
    views = [cell(f"update broker config success, {addr}") for addr in addrs]
    return Result({"key": args.key, "value": args.value, "brokers": addrs}, views)


async def clean_expired_cq(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await _brokers(admin, args)
    for addr in addrs:
        await admin.clean_expired_consume_queue(addr)
    return Result(
        {"brokers": addrs, "success": True},
        [cell(f"clean expired consume queue success, {a}") for a in addrs],
    )


async def stats_all(admin: AdminClient, args: argparse.Namespace) -> Result:
    """mqadmin statsAll: every topic but %RETRY%/%DLQ% ones (system topics included), one row per
    group that consumes it (or one NO_CONSUMER row); ``-a`` keeps the rows with traffic today."""
    topics = [args.topic] if args.topic else await admin.fetch_all_topic_list()
    rows: list[dict[str, Any]] = []
    for topic in topics:
        if topic.startswith(("%RETRY%", "%DLQ%")):
            continue
        try:
            rows += await _topic_stats(admin, topic, args.active)
        except RocketQError:
            continue  # a topic that vanished or whose broker is down: left out, as mqadmin does
    t = table(
        ("Topic", "Consumer Group", "Accumulation", "InTPS", "OutTPS", "InMsg24Hour", "OutMsg24Hour"),
        [
            (
                r["topic"],
                r["consumerGroup"],
                r["accumulation"],
                f"{r['inTps']:.2f}",
                "" if r["noConsumer"] else f"{r['outTps']:.2f}",
                r["inMsg24Hour"],
                "NO_CONSUMER" if r["noConsumer"] else r["outMsg24Hour"],
            )
            for r in rows
        ],
    )
    return Result(rows, [t])


async def _stats_sum(admin: AdminClient, addrs: list[str], name: str, key: str) -> tuple[float, int]:
    """(TPS over the last minute, messages in 24 hours) summed over the brokers; a broker without
    the item (RocketMQ: nothing counted yet) adds nothing."""
    tps, day = 0.0, 0
    for addr in addrs:
        try:
            s = await admin.view_broker_stats_data(addr, name, key)
        except RocketQError:
            continue
        tps += s.stats_minute.tps
        day += s.compute_24hour_sum()
    return tps, day


async def _topic_stats(admin: AdminClient, topic: str, active: bool) -> list[dict[str, Any]]:
    route = await admin.examine_topic_route_info(topic)
    addrs = [b.master_addr for b in route.broker_datas if b.master_addr]
    in_tps, in_day = await _stats_sum(admin, addrs, "TOPIC_PUT_NUMS", topic)
    groups = await admin.query_topic_consume_by_who(topic)
    if not groups:
        if active and not in_day:
            return []
        return [_stats_row(topic, "", 0, in_tps, None, in_day, None)]
    rows = []
    for group in groups:
        out_tps, out_day = await _stats_sum(admin, addrs, "GROUP_GET_NUMS", f"{topic}@{group}")
        try:
            diff = max(0, (await admin.examine_consume_stats(group, topic)).total_diff)
        except RocketQError:
            diff = 0
        if active and not in_day and not out_day:
            continue
        rows.append(_stats_row(topic, group, diff, in_tps, out_tps, in_day, out_day))
    return rows


def _stats_row(
    topic: str, group: str, diff: int, in_tps: float, out_tps: float | None, in_day: int, out_day: int | None
) -> dict[str, Any]:
    """One row; ``out_*`` None for a topic nobody consumes (mqadmin's NO_CONSUMER row)."""
    return {
        "topic": topic,
        "consumerGroup": group,
        "accumulation": diff,
        "inTps": in_tps,
        "outTps": out_tps,
        "inMsg24Hour": in_day,
        "outMsg24Hour": out_day,
        "noConsumer": out_day is None,
    }
