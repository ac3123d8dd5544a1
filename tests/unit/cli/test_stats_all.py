"""`rocketq admin statsAll` row rules, as mqadmin's StatsAllSubCommand, against a stand-in admin
client: the 24-hour column falls back to the hour and then the minute (brokers fill the day window
hourly), ``-a`` keeps a row with traffic in or out, only %RETRY%/%DLQ% topics are skipped, and a
topic nobody consumes is one NO_CONSUMER row."""

from __future__ import annotations

import argparse
import io
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from rocketq.admin.models import BrokerStatsData, BrokerStatsItem
from rocketq.cli.admin.cluster import stats_all
from rocketq.errors import SystemError_

ADDR = "127.0.0.1:10911"


def _stats(day: int = 0, hour: int = 0, minute: int = 0) -> BrokerStatsData:
    return BrokerStatsData(
        stats_minute=BrokerStatsItem(sum=minute, tps=round(minute / 60, 2)),
        stats_hour=BrokerStatsItem(sum=hour),
        stats_day=BrokerStatsItem(sum=day),
    )


@dataclass
class _Broker:
    master_addr: str | None = ADDR


@dataclass
class _Route:
    broker_datas: list[_Broker] = field(default_factory=lambda: [_Broker()])


@dataclass
class _ConsumeStats:
    total_diff: int


class _Admin:
    """Stats per (name, key); groups per topic; accumulation per group."""

    def __init__(
        self,
        stats: dict[tuple[str, str], BrokerStatsData],
        groups: dict[str, list[str]],
        diff: dict[str, int],
    ) -> None:
        self.stats, self.groups, self.diff = stats, groups, diff

    async def fetch_all_topic_list(self) -> list[str]:
        return sorted(self.groups)

    async def examine_topic_route_info(self, topic: str) -> _Route:
        return _Route()

    async def view_broker_stats_data(self, addr: str, name: str, key: str) -> BrokerStatsData:
        if (name, key) not in self.stats:
            raise SystemError_(f"The stats <{name}> <{key}> not exist")
        return self.stats[name, key]

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        return self.groups[topic]

    async def examine_consume_stats(self, group: str, topic: str) -> _ConsumeStats:
        return _ConsumeStats(self.diff.get(group, 0))


ADMIN = _Admin(
    {
        ("TOPIC_PUT_NUMS", "Young"): _stats(minute=5),  # a broker up for minutes: day and hour still 0
        ("GROUP_GET_NUMS", "Young@g1"): _stats(hour=3, minute=3),
        ("TOPIC_PUT_NUMS", "Old"): _stats(day=40, hour=2),
        ("TOPIC_PUT_NUMS", "Drained"): _stats(),
        ("GROUP_GET_NUMS", "Drained@late"): _stats(minute=2),  # got today what was put yesterday
        ("TOPIC_PUT_NUMS", "BenchmarkTest"): _stats(minute=7),
        ("TOPIC_PUT_NUMS", "TBW102"): _stats(),
    },
    {
        "Young": ["g1", "g2"],
        "Old": ["behind"],
        "Drained": ["late", "quiet"],
        "BenchmarkTest": [],
        "TBW102": [],
        "%RETRY%g1": ["g1"],
        "%DLQ%g1": [],
    },
    {"g1": 1, "behind": -3},
)


async def _run(*argv: str) -> tuple[list[dict[str, Any]], str]:
    args = argparse.Namespace(topic=None, active=False)
    if "-a" in argv:
        args.active = True
    if "-t" in argv:
        args.topic = argv[argv.index("-t") + 1]
    result = await stats_all(ADMIN, args)  # type: ignore[arg-type]
    console = Console(file=io.StringIO(), width=200)
    for view in result.views:
        console.print(view)
    return result.data, console.file.getvalue()  # type: ignore[attr-defined]


def _key(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {
        (r["topic"], r["consumerGroup"]): tuple(
            r[k] for k in ("accumulation", "inMsg24Hour", "outMsg24Hour", "noConsumer")
        )
        for r in rows
    }


async def test_every_topic_but_retry_and_dlq_with_24_hour_fallbacks() -> None:
    rows, text = await _run()
    assert _key(rows) == {
        ("Young", "g1"): (1, 5, 3, False),
        ("Young", "g2"): (0, 5, 0, False),  # no GROUP_GET_NUMS item yet: nothing got
        ("Old", "behind"): (0, 40, 0, False),  # accumulation never below 0
        ("Drained", "late"): (0, 0, 2, False),
        ("Drained", "quiet"): (0, 0, 0, False),
        ("BenchmarkTest", ""): (0, 7, None, True),
        ("TBW102", ""): (0, 0, None, True),
    }
    assert "NO_CONSUMER" in text and "%RETRY%" not in text


async def test_active_keeps_rows_with_traffic_in_or_out() -> None:
    rows, _ = await _run("-a")
    assert set(_key(rows)) == {
        ("Young", "g1"),
        ("Young", "g2"),
        ("Old", "behind"),
        ("Drained", "late"),
        ("BenchmarkTest", ""),
    }


async def test_one_topic() -> None:
    rows, _ = await _run("-t", "BenchmarkTest")
    assert [(r["topic"], r["inTps"], r["outTps"]) for r in rows] == [("BenchmarkTest", 0.12, None)]
