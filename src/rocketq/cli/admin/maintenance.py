"""Broker maintenance and export commands: cleanUnusedTopic, deleteExpiredCommitLog, sendMsgStatus,
exportConfigs, exportMetadata, exportMetrics.

The export commands write the JSON file mqadmin writes (``-f`` directory, default
/tmp/rocketmq/export) and print ``export <path> success``; ``--json`` prints the exported document.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.cli.admin._common import Adder, Result, cell, positive, table
from rocketq.cli.admin.cluster import _brokers, _target
from rocketq.cli.errors import CliError, UsageError
from rocketq.errors import RemotingError, ServerError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient
    from rocketq.admin.models import BrokerStatsData

DEFAULT_EXPORT_DIR = "/tmp/rocketmq/export"
SEND_STATUS_GROUP = "PID_SMSC"  # mqadmin's producer group for sendMsgStatus
# The broker keys mqadmin's exportConfigs copies (ExportConfigsCommand.needBrokerProprties).
EXPORT_CONFIG_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
    "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)


def register(add: Adder) -> None:
    p = add("cleanUnusedTopic", clean_unused_topic, "Drop consume queues of topics a broker no longer has")
    _target(p, "every master of the cluster")

    p = add("deleteExpiredCommitLog", delete_expired_commit_log,
            "Delete commit-log files older than fileReservedTime now")
    _target(p, "every master of the cluster")

    p = add("sendMsgStatus", send_msg_status, "Send to a broker's own topic and show each round trip")
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name (its topic)")
    p.add_argument("-s", "--messageSize", dest="size", type=positive, default=128, help="body bytes (128)")
    p.add_argument("-c", "--count", type=positive, default=50, help="messages to send (default 50)")

    p = add("exportConfigs", export_configs, "Export the masters' key configs and the cluster's scale")
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="the cluster to export")
    _file_option(p)

    p = add("exportMetadata", export_metadata, "Export the user topics and subscription groups")
    _target(p, "every master of the cluster (queue counts summed)")
    _file_option(p)
    only = p.add_mutually_exclusive_group()
    only.add_argument("-t", "--topic", dest="only_topics", action="store_true",
                      help="only topic metadata (topic.json)")
    only.add_argument("-g", "--subscriptionGroup", dest="only_groups", action="store_true",
                      help="only subscription groups (subscriptionGroup.json)")
    p.add_argument("-s", "--specialTopic", dest="special", action="store_true",
                   help="keep retry and DLQ topics")

    p = add("exportMetrics", export_metrics, "Export each master's load, sizes and clients (metrics.json)")
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="the cluster to export")
    _file_option(p)


def _file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--filePath", dest="file_path", default=DEFAULT_EXPORT_DIR,
                   help=f"directory to write to (default {DEFAULT_EXPORT_DIR})")


def _require_target(args: argparse.Namespace, command: str) -> None:
    if not args.broker_addr and not args.cluster:
        raise UsageError(f"{command}: one of -b/--brokerAddr or -c/--clusterName is required")


async def _each_broker(
    admin: AdminClient, args: argparse.Namespace, command: str, what: str,
    call: Callable[[str], Awaitable[None]],
) -> Result:
    _require_target(args, command)
    addrs = await _brokers(admin, args)
    for addr in addrs:
        await call(addr)
    return Result({"brokers": addrs, "success": True}, [cell(f"{what} success, {a}") for a in addrs])


async def clean_unused_topic(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each_broker(admin, args, "cleanUnusedTopic", "clean unused topic",
                              admin.clean_unused_topic)


async def delete_expired_commit_log(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each_broker(admin, args, "deleteExpiredCommitLog", "delete expired commit log",
                              admin.delete_expired_commit_log)


async def send_msg_status(admin: AdminClient, args: argparse.Namespace) -> Result:
    """Every broker serves a topic named after itself (brokerTopicEnable): sending there measures
    that one broker. A first small send warms the route and connection up, as mqadmin does."""
    from rocketq.client.message import Message

    rows = []
    async with admin.producer(SEND_STATUS_GROUP) as producer:
        await producer.send(Message(args.broker_name, b"x" * 16))
        for _ in range(args.count):
            started = time.perf_counter()
            r = await producer.send(Message(args.broker_name, b"x" * args.size))
            rt = round((time.perf_counter() - started) * 1000.0, 3)
            rows.append({"rt": rt, "sendStatus": r.status.name, "msgId": r.msg_id,
                         "queueId": r.message_queue.queue_id, "queueOffset": r.queue_offset})
    t = table(("RT (ms)", "Send Status", "MsgId", "Queue Id", "Queue Offset"),
              [tuple(r.values()) for r in rows], f"send status of {args.broker_name}")
    return Result(rows, [t])


def _write(directory: str, name: str, document: dict[str, Any]) -> Result:
    path = Path(directory).expanduser() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    return Result(document, [cell(f"export {path} success")])


async def export_configs(admin: AdminClient, args: argparse.Namespace) -> Result:
    info = await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(args.cluster)
    if names is None:
        raise UsageError(f"exportConfigs: cluster [{args.cluster}] not found")
    configs: dict[str, dict[str, str]] = {}
    masters = slaves = 0
    for name in sorted(names):
        data = info.broker_addr_table.get(name)
        if data is None or data.master_addr is None:
            continue
        masters += 1
        slaves += len(data.broker_addrs) - 1
        props = await admin.get_broker_config(data.master_addr)
        configs[props.get("brokerName", name)] = {k: props[k] for k in EXPORT_CONFIG_KEYS if k in props}
    document = {
        "brokerConfigs": configs,
        "clusterScale": {"namesrvSize": len(admin.namesrv_addrs), "masterBrokerSize": masters,
                         "slaveBrokerSize": slaves},
    }
    return _write(args.file_path, "configs.json", document)


def _summed(tables: list[dict[str, Any]], *members: str) -> dict[str, Any]:
    """One entry per name; the queue-count members are summed over brokers, as mqadmin does."""
    out: dict[str, Any] = {}
    for per_broker in tables:
        for name, cfg in per_broker.items():
            old = out.get(name)
            if old is not None:
                cfg = dataclasses.replace(cfg, **{m: getattr(old, m) + getattr(cfg, m) for m in members})
            out[name] = cfg
    return {name: cfg.to_obj() for name, cfg in sorted(out.items())}


async def export_metadata(admin: AdminClient, args: argparse.Namespace) -> Result:
    _require_target(args, "exportMetadata")
    addrs = await _brokers(admin, args)
    topics = [await admin.get_user_topic_config(a, args.special) for a in addrs]
    groups = [await admin.get_user_subscription_group(a) for a in addrs]
    document: dict[str, Any] = {}
    if not args.only_groups:
        document["topicConfigTable"] = _summed(topics, "read_queue_nums", "write_queue_nums")
    if not args.only_topics:
        document["subscriptionGroupTable"] = _summed(groups, "retry_queue_nums")
    document["exportTime"] = int(time.time() * 1000)
    name = "metadata.json"
    if args.only_topics or args.only_groups:
        name = "topic.json" if args.only_topics else "subscriptionGroup.json"
    return _write(args.file_path, name, document)


def _day_sum(stats: BrokerStatsData | None) -> int:
    """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
    if stats is None:
        return 0
    return stats.stats_day.sum or stats.stats_hour.sum or stats.stats_minute.sum


def _first_tps(text: str | None) -> float:
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


async def _topic_stats(admin: AdminClient, addr: str, topic: str) -> BrokerStatsData | None:
    try:
        return await admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
    except ServerError:  # nothing was ever put there
        return None


async def export_metrics(admin: AdminClient, args: argparse.Namespace) -> Result:
    """ExportMetricsCommand's metrics.json: per master its environment, load (TPS now, messages in
    the last day), sizes and the client versions of its groups; and the totals over the cluster."""
    info = await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(args.cluster)
    if names is None:
        raise UsageError(f"exportMetrics: cluster [{args.cluster}] not found")
    tps_total = dict.fromkeys(("totalNormalInTps", "totalNormalOutTps", "totalTransInTps",
                               "totalScheduleInTps"), 0.0)
    day_total = dict.fromkeys(("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum",
                               "scheduleOneDayInNum"), 0)
    report: dict[str, Any] = {}
    for name in sorted(names):
        data = info.broker_addr_table.get(name)
        addr = data.master_addr if data is not None else None
        if addr is None:
            continue
        kv = await admin.fetch_broker_runtime_stats(addr)
        props = await admin.get_broker_config(addr)
        groups = await admin.get_user_subscription_group(addr)
        topics = await admin.get_user_topic_config(addr)
        trans = await _topic_stats(admin, addr, "RMQ_SYS_TRANS_HALF_TOPIC")
        schedule = await _topic_stats(admin, addr, "SCHEDULE_TOPIC_XXXX")
        tps = {"normalInTps": _first_tps(kv.get("putTps")),
               "normalOutTps": _first_tps(kv.get("getTransferredTps")),
               "transInTps": trans.stats_minute.tps if trans else 0.0,
               "scheduleInTps": schedule.stats_minute.tps if schedule else 0.0}
        day = {"normalOneDayInNum": int(kv.get("msgPutTotalTodayMorning", 0))
               - int(kv.get("msgPutTotalYesterdayMorning", 0)),
               "normalOneDayOutNum": int(kv.get("msgGetTotalTodayMorning", 0))
               - int(kv.get("msgGetTotalYesterdayMorning", 0)),
               "transOneDayInNum": _day_sum(trans), "scheduleOneDayInNum": _day_sum(schedule)}
        for key, value in tps.items():
            tps_total["total" + key[0].upper() + key[1:]] += value
        for key, count in day.items():
            day_total[key] += count
        clients: set[str] = set()
        for group in groups:
            try:
                conn = await admin.examine_consumer_connection_info(group)
            except (ServerError, RemotingError):  # offline groups have no connections
                continue
            # language%version; the version as its MQVersion ordinal (mqadmin prints the enum name)
            clients.update(f"{c.language}%{c.version}" for c in conn.connection_set)
        report[name] = {
            # cpuNum is Java's clientCallbackExecutorThreads, a key rocketq's broker has no use for.
            "runtimeEnv": {"cpuNum": props.get("clientCallbackExecutorThreads"),
                           "totalMemKBytes": kv.get("totalMemKBytes")},
            "runtimeQuota": {
                "diskRatio": {"commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                              "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio")},
                "tps": tps, "oneDayNum": day, "messageAverageSize": kv.get("putMessageAverageSize"),
                "topicSize": len(topics), "groupSize": len(groups),
            },
            "runtimeVersion": {"rocketmqVersion": kv.get("brokerVersionDesc"), "clientInfo": sorted(clients)},
        }
    document = {"evaluateReport": report, "totalData": {"totalTps": tps_total, "totalOneDayNum": day_total}}
    return _write(args.file_path, "metrics.json", document)
