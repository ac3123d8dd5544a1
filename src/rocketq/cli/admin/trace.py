"""queryMsgTraceById: a message's trace records, printed as mqadmin prints them."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, cell

if TYPE_CHECKING:
    from rocketq.admin import AdminClient
    from rocketq.admin.trace import TraceView


def register(add: Adder) -> None:
    p = add("queryMsgTraceById", query_msg_trace_by_id, "query a message trace")
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id")
    p.add_argument("-t", "--traceTopic", dest="trace_topic", default=None,
                   help="The name value of message trace topic (default RMQ_SYS_TRACE_TOPIC)")


def _row(*cols: str) -> str:
    """printf("%-10s %-20s %-20s %-20s %-10s %-10s%n") of mqadmin (trailing blanks kept)."""
    widths = (10, 20, 20, 20, 10, 10)
    return " ".join(f"{c:<{w}}" for c, w in zip(cols, widths, strict=True))


def ts_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") if ms > 0 else ""


def render(views: list[TraceView]) -> str:
    """QueryMsgTraceByIdSubCommand.printMessageTrace: each Pub with its header, then one block per
    consumer group of its SubAfter records."""
    lines: list[str] = []
    consumers: dict[str, list[TraceView]] = {}
    for v in views:
        if v.msg_type == "Pub":
            lines.append(_row("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"))
            lines.append(_row("Pub", v.group_name, v.client_host, ts_text(v.timestamp), f"{v.cost_time}ms",
                              v.status))
            lines.append("")
        elif v.msg_type == "SubAfter":
            consumers.setdefault(v.group_name, []).append(v)
    for group_views in consumers.values():
        lines.append(_row("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"))
        for v in group_views:
            lines.append(_row("Sub", v.group_name, v.client_host, ts_text(v.timestamp), f"{v.cost_time}ms",
                              v.status))
        lines.append("")
    return "\n".join(lines)


async def query_msg_trace_by_id(admin: AdminClient, args: argparse.Namespace) -> Result:
    msg_id = args.msg_id.strip()
    views = await admin.query_msg_trace_by_id(msg_id, args.trace_topic)
    return Result([dataclasses.asdict(v) for v in views], [cell(render(views))])
