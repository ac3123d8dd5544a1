"""RouteRefresher: a topic's route is fetched at once when asked, and at most once per interval
per topic however often a failing pull, commit or send asks."""

from __future__ import annotations

import asyncio

from rocketq.client.route import RouteRefresher


async def test_fetches_at_once_then_at_most_once_per_interval_per_topic() -> None:
    fetched: list[str] = []

    async def fetch(topic: str) -> bool:
        fetched.append(topic)
        return True

    refresher = RouteRefresher(fetch, interval=0.2)
    for _ in range(5):
        refresher.request("A")
    refresher.request("B")
    await asyncio.sleep(0.05)
    assert fetched == ["A", "B"]
    await asyncio.sleep(0.25)
    refresher.request("A")
    await asyncio.sleep(0.05)
    assert fetched == ["A", "B", "A"]


async def test_a_failing_fetch_stays_quiet() -> None:
    async def fetch(topic: str) -> bool:
        raise OSError("name server unreachable")

    refresher = RouteRefresher(fetch)
    refresher.request("A")
    await asyncio.sleep(0.05)
    assert not refresher._running
