"""UPDATE_NAMESRV_CONFIG (code 318) against a real name server with a real broker registered: every
runtime-updatable NamesrvConfig key takes effect, every other key is refused and changes nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.harness import wait_until
from tests.wire import get_route, invoke, start_broker, start_namesrv, update_config

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.config import Update, config_fields, parse_properties
from rocketq.namesrv.config import NamesrvConfig
from rocketq.remoting import RemotingClient


@dataclass
class Ctx:
    ns: Any  # NamesrvController
    broker: Any  # BrokerController
    client: RemotingClient

    @property
    def addr(self) -> str:
        return str(self.ns.address)

    @property
    def broker_topic(self) -> str:
        return str(self.broker.broker_name)  # registered with the broker, as RocketMQ does

    async def update(self, key: str, value: object) -> None:
        await update_config(self.client, self.addr, RequestCode.UPDATE_NAMESRV_CONFIG, key, value)

    async def code(self, request_code: int, ext: dict[str, Any] | None = None) -> int:
        return int((await invoke(self.client, self.addr, request_code, ext)).code)

    async def routed(self) -> bool:
        return await self.code(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": self.broker_topic}) == 0


@dataclass
class Case:
    run: Callable[[Ctx], Awaitable[None]]
    namesrv: dict[str, Any] = field(default_factory=dict)


CASES: dict[str, Case] = {}


def case(key: str, **namesrv: Any) -> Callable[[Callable[[Ctx], Awaitable[None]]], None]:
    def register(run: Callable[[Ctx], Awaitable[None]]) -> None:
        CASES[key] = Case(run, namesrv)

    return register


@contextlib.asynccontextmanager
async def _cluster(tmp_path: Path, **namesrv: Any) -> AsyncIterator[Ctx]:
    ns = await start_namesrv(tmp_path, **namesrv)
    client = RemotingClient()
    broker = None
    try:
        broker = await start_broker(tmp_path, ns.address)
        yield Ctx(ns, broker, client)
    finally:
        await client.close()
        if broker is not None:
            await broker.shutdown()
        await ns.shutdown()


@case("orderMessageEnable")
async def _order_message_enable(c: Ctx) -> None:
    ext = {"namespace": "ORDER_TOPIC_CONFIG", "key": c.broker_topic, "value": "broker-a:1"}
    assert await c.code(RequestCode.PUT_KV_CONFIG, ext) == ResponseCode.SUCCESS
    route = await get_route(c.client, c.addr, c.broker_topic)
    assert route is not None and route.order_topic_conf is None
    await c.update("orderMessageEnable", "true")
    route = await get_route(c.client, c.addr, c.broker_topic)
    assert route is not None and route.order_topic_conf == "broker-a:1"


@case("enableAllTopicList")
async def _enable_all_topic_list(c: Ctx) -> None:
    assert await c.code(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == ResponseCode.SUCCESS
    await c.update("enableAllTopicList", "false")
    assert await c.code(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == ResponseCode.SYSTEM_ERROR


@case("enableTopicList")
async def _enable_topic_list(c: Ctx) -> None:
    ext = {"cluster": "DefaultCluster"}
    assert await c.code(RequestCode.GET_TOPICS_BY_CLUSTER, ext) == ResponseCode.SUCCESS
    await c.update("enableTopicList", "false")
    assert await c.code(RequestCode.GET_TOPICS_BY_CLUSTER, ext) == ResponseCode.SYSTEM_ERROR


@case("needWaitForService", wait_seconds_for_service=3600)
async def _need_wait_for_service(c: Ctx) -> None:
    assert await c.routed()
    await c.update("needWaitForService", "true")
    assert not await c.routed()


@case("waitSecondsForService", need_wait_for_service=True, wait_seconds_for_service=3600)
async def _wait_seconds_for_service(c: Ctx) -> None:
    assert not await c.routed()
    await c.update("waitSecondsForService", 0)
    assert await c.routed()


# The broker re-registers every 30 s, so a route that disappears within seconds was expired.


@case("brokerChannelExpiredTime", scan_not_active_broker_interval=50)
async def _broker_channel_expired_time(c: Ctx) -> None:
    assert await c.routed()
    await c.update("brokerChannelExpiredTime", 200)
    await wait_until(lambda: _not_routed(c), timeout=8)


@case("scanNotActiveBrokerInterval", broker_channel_expired_time=200,
      scan_not_active_broker_interval=3_600_000)
async def _scan_not_active_broker_interval(c: Ctx) -> None:
    await c.update("scanNotActiveBrokerInterval", 50)
    await wait_until(lambda: _not_routed(c), timeout=8)


async def _not_routed(c: Ctx) -> bool:
    return not await c.routed()


def test_every_runtime_updatable_namesrv_key_has_a_case() -> None:
    assert set(CASES) == {f.key for f in config_fields(NamesrvConfig).values() if f.update is Update.RUNTIME}


@pytest.mark.parametrize("key", sorted(CASES))
async def test_runtime_key_takes_effect(tmp_path: Path, key: str) -> None:
    c = CASES[key]
    async with _cluster(tmp_path, **c.namesrv) as ctx:
        await c.run(ctx)


async def test_other_keys_are_refused_and_change_nothing(tmp_path: Path) -> None:
    async with _cluster(tmp_path) as c:
        before = (await invoke(c.client, c.addr, RequestCode.GET_NAMESRV_CONFIG)).body_bytes()
        current = {s.key: str(s.value) for s in parse_properties(before.decode())}
        refused = [f for f in config_fields(NamesrvConfig).values() if f.update is Update.RESTART]
        assert {"listenPort", "metricsPort", "rocketmqHome"} <= {f.key for f in refused}
        for f in refused:
            body = f"orderMessageEnable=true\n{f.key}={current.get(f.key, '')}\n".encode()
            r = await invoke(c.client, c.addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
            assert r.code == ResponseCode.NO_PERMISSION, (f.key, r.remark)
            assert f.key in (r.remark or "")
        assert (await invoke(c.client, c.addr, RequestCode.GET_NAMESRV_CONFIG)).body_bytes() == before
