"""SQL92 subscriptions on a real in-process broker, over the wire as a Java client sends them.

PULL_MESSAGE by the heartbeat's subscription and by the pull header's, CHECK_CLIENT_CONFIG, and
the answers RocketMQ gives with enablePropertyFilter off.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.wire import BrokerOptions, decode_pull, heartbeat, in_process_cluster, invoke, pull, send_message

from rocketq.codec.codes import RequestCode, ResponseCode

NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"
ON = BrokerOptions(broker={"enable_property_filter": True})


def _check_body(expression: str, expression_type: str = "SQL92") -> bytes:
    return orjson.dumps({"clientId": "c1", "group": "G", "subscriptionData": {
        "classFilterMode": False, "topic": "T", "subString": expression, "tagsSet": [], "codeSet": [],
        "subVersion": 1, "expressionType": expression_type}})


async def _send_orders(client: Any, addr: str, topic: str) -> None:
    for region, amount in (("eu", "150"), ("us", "500"), ("eu", "50"), ("eu", "101"), ("apac", "900")):
        r = await send_message(client, addr, topic, f"{region}-{amount}".encode(), tags="Order",
                               extra_properties={"region": region, "amount": amount})
        assert r.code == ResponseCode.SUCCESS, r.remark


async def test_check_client_config_refuses_sql92_when_off(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await invoke(client, broker.address, RequestCode.CHECK_CLIENT_CONFIG, body=_check_body("a > 1"))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
        # TAG subscriptions are never checked, as in Java
        r = await invoke(client, broker.address, RequestCode.CHECK_CLIENT_CONFIG,
                         body=_check_body("||", "TAG"))
        assert r.code == ResponseCode.SUCCESS


async def test_check_client_config_compiles_sql92_when_on(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, ON, with_namesrv=False) as (_, broker, client):
        r = await invoke(client, broker.address, RequestCode.CHECK_CLIENT_CONFIG, body=_check_body("a > 1"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await invoke(client, broker.address, RequestCode.CHECK_CLIENT_CONFIG, body=_check_body("a > > 1"))
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "column 5" in (r.remark or ""), r.remark


@pytest.mark.parametrize("by_header", [True, False], ids=["header", "heartbeat"])
async def test_pull_filters_by_properties(tmp_path: Path, by_header: bool) -> None:
    expr = "region = 'eu' AND amount > 100"
    async with in_process_cluster(tmp_path, ON, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _send_orders(client, addr, "Orders")
        if by_header:
            r = await pull(client, addr, "G", "Orders", 0, 0, subscription=expr, expression_type="SQL92")
        else:
            assert (await heartbeat(client, addr, "c1", consumer_groups={"G": ["Orders"]},
                                    sql92={"Orders": expr})).code == ResponseCode.SUCCESS
            r = await pull(client, addr, "G", "Orders", 0, 0, subscription=None)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in decode_pull(r)] == [b"eu-150", b"eu-101"]
        assert r.ext_fields["nextBeginOffset"] == "5"  # everything scanned was passed over

        # nothing left that matches: the client is told to go on from the end at once
        r = await pull(client, addr, "G", "Orders", 0, 4, subscription=expr, expression_type="SQL92")
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert r.ext_fields["nextBeginOffset"] == "5"


async def test_sql92_pull_answers_when_off(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _send_orders(client, addr, "Orders")
        r = await pull(client, addr, "G", "Orders", 0, 0, subscription="a > 1", expression_type="SQL92")
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)
        await heartbeat(client, addr, "c1", consumer_groups={"G": ["Orders"]}, sql92={"Orders": "a > 1"})
        r = await pull(client, addr, "G", "Orders", 0, 0, subscription=None)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED)


async def test_bad_expressions(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, ON, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _send_orders(client, addr, "Orders")
        r = await pull(client, addr, "G", "Orders", 0, 0, subscription="a >", expression_type="SQL92")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        # Java's ConsumerFilterManager does not register a heartbeat expression that does not compile
        await heartbeat(client, addr, "c1", consumer_groups={"G": ["Orders"]}, sql92={"Orders": "a >"})
        r = await pull(client, addr, "G", "Orders", 0, 0, subscription=None)
        assert r.code == ResponseCode.FILTER_DATA_NOT_EXIST


async def test_long_poll_answers_with_the_first_matching_message(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, ON, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        await _send_orders(client, addr, "Orders")
        parked = asyncio.ensure_future(pull(client, addr, "G", "Orders", 0, 5, subscription="region = 'mars'",
                                            expression_type="SQL92", suspend_ms=20_000))
        await asyncio.sleep(0.2)
        await send_message(client, addr, "Orders", b"mars-1", extra_properties={"region": "mars"})
        r = await asyncio.wait_for(parked, 15)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in decode_pull(r)] == [b"mars-1"]
