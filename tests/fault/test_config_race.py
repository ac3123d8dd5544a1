"""Race topic, subscription-group and offset changes over the wire against a real broker, kill -9 it,
and prove its config files only ever hold acknowledged states (issue 9 item 2).

The original failure: deleting and re-creating topics made two writers of `topics.json` rename
each other's temp file (`FileNotFoundError: 'topics.json.tmp' -> 'topics.json'`), so an older
table could land last and a deleted topic came back after a restart.

The oracle, per topic and per group: every change is made by one worker at a time, so at the kill
at most one change of it is unanswered. Its state on disk (and after the restart) must be the one
its last acknowledged change made, or the one of the change still in flight. Offsets reach the
disk on a timer (as in RocketMQ), so an offset on disk must be one that was committed, never
anything else; the files must always parse.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from faultlib import kill9, stop, store_root, up
from tests.harness import Cluster
from tests.wire import create_topic, invoke

from rocketq.codec.bodies import (
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
)
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(240)

TOPIC_WORKERS = 6
TOPICS_PER_WORKER = 4
GROUP_WORKERS = 3
GROUPS_PER_WORKER = 3
OFFSET_WORKERS = 2
OFFSET_TOPIC = "RaceOffsetT"
OFFSET_QUEUES = 4
# Offsets are persisted on this timer; short, so the race overlaps many offset writes.
FAST_OFFSET_FLUSH = ("--set", "flushConsumerOffsetInterval=50")
MIN_ACKED = 20  # fewer acknowledged changes in a round would prove little


class _Nothing:
    def __repr__(self) -> str:
        return "nothing"


_UNSET = _Nothing()


@dataclass
class History:
    """What the clients know about one topic or group: None = absent, an int = its marker."""

    acked: int | None = None  # the state after the last acknowledged change
    in_flight: object = _UNSET  # the target of the change not answered yet, if any
    acked_changes: int = 0
    refused: list[str] = field(default_factory=list)

    def allowed(self) -> set[int | None]:
        if isinstance(self.in_flight, _Nothing):
            return {self.acked}
        return {self.acked, self.in_flight}  # type: ignore[arg-type]

    def settle(self, observed: int | None) -> None:
        """After a restart the disk decides what an unanswered change did."""
        self.acked, self.in_flight = observed, _UNSET


@dataclass
class Ledger:
    topics: dict[str, History]
    groups: dict[str, History]
    # (group, queue) -> every offset ever sent for it (answered or not)
    offsets_sent: dict[tuple[str, int], set[int]] = field(default_factory=dict)

    def acked_changes(self) -> int:
        return sum(h.acked_changes for h in (*self.topics.values(), *self.groups.values()))


async def _change(history: History, target: int | None, call: Awaitable[RemotingCommand]) -> bool:
    history.in_flight = target
    resp = await call
    if resp.code != ResponseCode.SUCCESS:
        history.refused.append(f"{resp.code}: {resp.remark}")
        return False  # the oracle no longer knows its state: the worker leaves it alone
    history.acked, history.in_flight = target, _UNSET
    history.acked_changes += 1
    return True


async def change_worker(histories: dict[str, History], names: list[str], rng: random.Random,
                        delete: Callable[[str], Awaitable[RemotingCommand]],
                        put: Callable[[str, int], Awaitable[RemotingCommand]], markers: int) -> None:
    """Create, update (a new marker) and delete its own topics or groups, one change at a time."""
    names = list(names)
    while names:
        name = rng.choice(names)
        history = histories[name]
        if history.acked is not None and rng.random() < 0.4:
            target, call = None, delete(name)
        else:
            target = rng.randint(1, markers)
            call = put(name, target)
        if not await _change(history, target, call):
            names.remove(name)


def topic_worker(client: RemotingClient, addr: str, ledger: Ledger, names: list[str],
                 rng: random.Random) -> Awaitable[None]:
    """Markers are queue counts."""
    return change_worker(
        ledger.topics, names, rng,
        lambda name: invoke(client, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": name}),
        lambda name, queues: create_topic(client, addr, name, read=queues, write=queues), 16)


def group_worker(client: RemotingClient, addr: str, ledger: Ledger, names: list[str],
                 rng: random.Random) -> Awaitable[None]:
    """Markers are retryMaxTimes values."""
    return change_worker(
        ledger.groups, names, rng,
        lambda name: invoke(client, addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                            {"groupName": name, "cleanOffset": False}),
        lambda name, retries: invoke(
            client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=SubscriptionGroupConfig(group_name=name, retry_max_times=retries).to_json()), 32)


async def offset_worker(client: RemotingClient, addr: str, ledger: Ledger, group: str,
                        rng: random.Random) -> None:
    offset = 0
    while True:
        offset += rng.randint(1, 50)
        queue_id = rng.randrange(OFFSET_QUEUES)
        ledger.offsets_sent.setdefault((group, queue_id), set()).add(offset)
        resp = await invoke(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": OFFSET_TOPIC, "queueId": queue_id, "commitOffset": offset})
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def new_ledger(tag: str) -> Ledger:
    topics = {f"Race{tag}T{w}x{i}": History() for w in range(TOPIC_WORKERS) for i in range(TOPICS_PER_WORKER)}
    groups = {f"Race{tag}G{w}x{i}": History() for w in range(GROUP_WORKERS) for i in range(GROUPS_PER_WORKER)}
    return Ledger(topics, groups)


async def race_then_kill(cluster: Cluster, ledger: Ledger, seconds: float, seed: int) -> None:
    client = RemotingClient()
    rng = random.Random(seed)
    topic_names = sorted(ledger.topics)
    group_names = sorted(ledger.groups)
    workers = []
    try:
        resp = await create_topic(client, cluster.broker, OFFSET_TOPIC,
                                  read=OFFSET_QUEUES, write=OFFSET_QUEUES)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        for w in range(TOPIC_WORKERS):
            mine = topic_names[w * TOPICS_PER_WORKER:(w + 1) * TOPICS_PER_WORKER]
            workers.append(topic_worker(client, cluster.broker, ledger, mine, random.Random(rng.random())))
        for w in range(GROUP_WORKERS):
            mine = group_names[w * GROUPS_PER_WORKER:(w + 1) * GROUPS_PER_WORKER]
            workers.append(group_worker(client, cluster.broker, ledger, mine, random.Random(rng.random())))
        for w in range(OFFSET_WORKERS):
            workers.append(offset_worker(client, cluster.broker, ledger, f"RaceOffsetG{w}",
                                         random.Random(rng.random())))
        tasks = [asyncio.ensure_future(w) for w in workers]
        done, _ = await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:  # a worker only ends early on a failed assertion
            task.result()
        await kill9(cluster)  # the workers are mid-request: some changes are in flight now
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await client.close()


def _parse_files(root: Path) -> tuple[dict[str, int], dict[str, int], dict[str, dict[int, int]]]:
    """topics -> writeQueueNums, groups -> retryMaxTimes, offsets, as the files on disk hold them;
    every file (and its .bak) must parse."""
    config = root / "config"
    for name in ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json"):
        for path in (config / name, config / f"{name}.bak"):
            if path.exists():
                orjson.loads(path.read_bytes())  # raises on a torn or mixed file
    topics = TopicConfigSerializeWrapper.from_json((config / "topics.json").read_bytes()).topic_config_table
    groups = SubscriptionGroupWrapper.from_json(
        (config / "subscriptionGroup.json").read_bytes()).subscription_group_table
    offsets_path = config / "consumerOffset.json"
    raw = orjson.loads(offsets_path.read_bytes())["offsetTable"] if offsets_path.exists() else {}
    return ({n: c.write_queue_nums for n, c in topics.items()},
            {n: c.retry_max_times for n, c in groups.items()},
            {k: {int(q): int(o) for q, o in v.items()} for k, v in raw.items()})


async def _served(cluster: Cluster) -> tuple[dict[str, int], dict[str, int]]:
    """What the restarted broker serves: topics -> writeQueueNums, groups -> retryMaxTimes."""
    client = RemotingClient()
    try:
        resp = await invoke(client, cluster.broker, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        topics = TopicConfigSerializeWrapper.from_json(resp.body_bytes()).topic_config_table
        resp = await invoke(client, cluster.broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        groups = SubscriptionGroupWrapper.from_json(resp.body_bytes()).subscription_group_table
    finally:
        await client.close()
    return ({n: c.write_queue_nums for n, c in topics.items()},
            {n: c.retry_max_times for n, c in groups.items()})


def _check(kind: str, ledger: dict[str, History], state: dict[str, int]) -> list[str]:
    wrong = []
    for name, history in ledger.items():
        seen = state.get(name)
        if seen not in history.allowed():
            wrong.append(f"{kind} {name}: {seen} ({'absent' if seen is None else 'present'}), but the last "
                         f"acknowledged change left {history.acked} and {history.in_flight!r} was in flight")
    return wrong


def _check_offsets(ledger: Ledger, offsets: dict[str, dict[int, int]]) -> list[str]:
    wrong = []
    for (group, queue_id), sent in ledger.offsets_sent.items():
        value = offsets.get(f"{OFFSET_TOPIC}@{group}", {}).get(queue_id)
        if value is not None and value not in sent:
            wrong.append(f"offset {group}:{queue_id} = {value} on disk was never committed")
    return wrong


async def run_rounds(tmp_path: Path, rounds: int, seconds: float) -> None:
    ledger = new_ledger(tmp_path.name[-6:].replace("_", "").replace("-", "") or "x")
    cluster = await up(tmp_path, *FAST_OFFSET_FLUSH)
    try:
        for round_no in range(rounds):
            before = ledger.acked_changes()
            await race_then_kill(cluster, ledger, seconds, seed=round_no)
            log = cluster.proc.stderr_path.read_text("utf-8", "replace")
            failed_writes = re.findall(r".*persist .* failed.*", log)
            assert not failed_writes, "\n".join(failed_writes[:5])
            refused = {n: h.refused for n, h in (*ledger.topics.items(), *ledger.groups.items()) if h.refused}
            assert not refused, f"changes refused during the race: {refused}"
            acked = ledger.acked_changes() - before
            in_flight = sum(not isinstance(h.in_flight, _Nothing)
                            for h in (*ledger.topics.values(), *ledger.groups.values()))
            print(f"round {round_no}: {acked} topic/group changes acknowledged, {in_flight} in flight "
                  f"at the kill, {sum(map(len, ledger.offsets_sent.values()))} offsets committed")
            assert acked >= MIN_ACKED, "too few changes acknowledged to prove much"

            topics, groups, offsets = _parse_files(store_root(cluster))
            wrong = _check("topic", ledger.topics, topics) + _check("group", ledger.groups, groups)
            wrong += _check_offsets(ledger, offsets)
            assert not wrong, "\n".join(wrong)

            cluster = await up(tmp_path, *FAST_OFFSET_FLUSH)  # the same data dir
            served_topics, served_groups = await _served(cluster)
            wrong = _check("served topic", ledger.topics, served_topics)
            wrong += _check("served group", ledger.groups, served_groups)
            assert not wrong, "\n".join(wrong)
            leftovers = list((store_root(cluster) / "config").glob(".*.tmp"))
            assert not leftovers, f"a killed writer's temp files stayed: {leftovers}"
            for name, history in ledger.topics.items():
                history.settle(served_topics.get(name))
            for name, history in ledger.groups.items():
                history.settle(served_groups.get(name))
    finally:
        await stop(cluster)


async def test_config_files_survive_a_kill_during_concurrent_changes(tmp_path: Path) -> None:
    await run_rounds(tmp_path, rounds=1, seconds=3.0)


@pytest.mark.slow
async def test_config_files_survive_kills_during_ten_seconds_of_changes(tmp_path: Path) -> None:
    await run_rounds(tmp_path, rounds=3, seconds=10.0)
