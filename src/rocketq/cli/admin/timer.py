"""Timer-message commands (RocketMQ 5): getTimerCheckPoint, getTimerMetrics."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, format_ts, kv_table

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def _broker(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, metavar="ADDR",
                   help="broker address")


def register(add: Adder) -> None:
    p = add("getTimerCheckPoint", get_timer_check_point, "Show where a broker's timer wheel stands")
    _broker(p)
    p = add("getTimerMetrics", get_timer_metrics, "Show a broker's pending timer messages per topic")
    _broker(p)


async def get_timer_check_point(admin: AdminClient, args: argparse.Namespace) -> Result:
    cp = await admin.get_timer_check_point(args.broker_addr)
    data = cp.to_dict()
    shown = {k: v for k, v in data.items() if k != "dataVersion"}
    shown["lastReadTime"] = format_ts(cp.last_read_time_ms)
    shown["dataVersion.counter"] = cp.counter
    return Result(data, [kv_table(shown, f"timer checkpoint of {args.broker_addr}")])


async def get_timer_metrics(admin: AdminClient, args: argparse.Namespace) -> Result:
    counts = await admin.get_timer_metrics(args.broker_addr)
    title = f"pending timer messages of {args.broker_addr}"
    return Result(counts, [kv_table(counts, title, "Topic", "Count")])
