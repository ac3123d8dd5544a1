"""UPDATE_BROKER_CONFIG (code 25) against a real broker: every runtime-updatable key takes effect in the
component that uses it, and every other key is refused with a remark saying why.

One case per runtime-updatable key of BrokerConfig and MessageStoreConfig; a meta-test fails when a
key is declared runtime_updatable without a case here. Each case updates over the wire and then
observes the effect (a send refused, a pull capped, a file flushed or deleted, a registration sent
differently), checking the old behaviour first where that is cheap.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.harness import wait_until
from tests.wire import (
    BrokerOptions,
    decode_pull,
    get_route,
    heartbeat,
    in_process_cluster,
    invoke,
    message_properties,
    pull,
    query_message,
    send_header,
    send_message,
    start_namesrv,
    update_config,
)

from rocketq.broker.config import BrokerConfig
from rocketq.broker.java_config import JavaOnlyConfig
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.config import Update, config_fields, parse_properties
from rocketq.remoting import RemotingClient
from rocketq.remoting.config import RemotingServerConfig
from rocketq.store.config import MessageStoreConfig

HOUR_MS = 3_600_000
MB = 1_000_000


@dataclass
class Ctx:
    tmp_path: Path
    namesrv: str
    broker: Any  # BrokerController
    client: RemotingClient

    @property
    def addr(self) -> str:
        return str(self.broker.address)

    @property
    def store(self) -> Any:
        return self.broker.store

    async def update(self, key: str, value: object) -> None:
        await update_config(self.client, self.addr, RequestCode.UPDATE_BROKER_CONFIG, key, value)

    async def send(self, topic: str, body: bytes = b"x", **kw: Any) -> RemotingCommand:
        r = await send_message(self.client, self.addr, topic, body, **kw)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return r


@dataclass
class Case:
    run: Callable[[Ctx], Awaitable[None]]
    broker: dict[str, Any] = field(default_factory=dict)
    store: dict[str, Any] = field(default_factory=dict)


CASES: dict[str, Case] = {}


def case(key: str, **initial: dict[str, Any]) -> Callable[[Callable[[Ctx], Awaitable[None]]], None]:
    def register(run: Callable[[Ctx], Awaitable[None]]) -> None:
        CASES[key] = Case(run, **initial)

    return register


def _runtime_keys(*classes: type) -> set[str]:
    return {f.key for cls in classes for f in config_fields(cls).values() if f.update is Update.RUNTIME}


# -- BrokerConfig ------------------------------------------------------------------------------------


async def _route_perm(c: Ctx, topic: str) -> int | None:
    route = await get_route(c.client, c.namesrv, topic)
    return None if route is None else route.queue_datas[0].perm


@case("brokerPermission")
async def _broker_permission(c: Ctx) -> None:
    # As in RocketMQ, the broker's permission reaches clients through the routes it registers (and
    # refuses sends to ordered topics itself).
    await c.send("CfgPerm")
    await wait_until(lambda: _route_perm(c, "CfgPerm"), timeout=20)
    assert await _route_perm(c, "CfgPerm") == 6
    await c.update("brokerPermission", 4)  # read only: re-registered at once
    await wait_until(lambda: _route_perm_is(c, "CfgPerm", 4), timeout=20)


async def _route_perm_is(c: Ctx, topic: str, perm: int) -> bool:
    return await _route_perm(c, topic) == perm


@case("namesrvAddr")
async def _namesrv_addr(c: Ctx) -> None:
    ns2 = await start_namesrv(c.tmp_path / "ns2")
    try:
        topic = c.broker.broker_name  # the broker topic travels with every registration
        await c.update("namesrvAddr", ns2.address)
        await wait_until(lambda: get_route(c.client, ns2.address, topic), timeout=20)
    finally:
        await ns2.shutdown()


@case("autoCreateSubscriptionGroup")
async def _auto_create_subscription_group(c: Ctx) -> None:
    await c.send("CfgSub")
    assert (await pull(c.client, c.addr, "CfgG1", "CfgSub", 0, 0)).code == ResponseCode.SUCCESS
    await c.update("autoCreateSubscriptionGroup", "false")
    r = await pull(c.client, c.addr, "CfgG2", "CfgSub", 0, 0)
    assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def _spy_registrations(c: Ctx) -> list[tuple[RemotingCommand, float]]:
    seen: list[tuple[RemotingCommand, float]] = []
    client = c.broker.outer_api.client
    original = client.invoke

    async def invoke_and_record(addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        if request.code == RequestCode.REGISTER_BROKER:
            seen.append((request, timeout))
        return await original(addr, request, timeout)

    client.invoke = invoke_and_record
    return seen


@case("registerBrokerTimeoutMills")
async def _register_broker_timeout(c: Ctx) -> None:
    seen = _spy_registrations(c)
    await c.update("registerBrokerTimeoutMills", 7_000)  # an update re-registers at once
    await wait_until(lambda: seen, timeout=20)
    assert seen[-1][1] == pytest.approx(7.0)


@case("compressedRegister")
async def _compressed_register(c: Ctx) -> None:
    seen = _spy_registrations(c)
    await c.update("compressedRegister", "true")
    await wait_until(lambda: seen, timeout=20)
    assert (seen[-1][0].ext_fields or {}).get("compressed") == "true"


def _held(c: Ctx, topic: str) -> Any:
    waiting = c.broker.hold_service.pull_request_table.get((topic, 0))
    return waiting[0] if waiting else None


async def _held_pull_millis(c: Ctx, topic: str) -> int:
    await c.send(topic)
    parked = asyncio.create_task(pull(c.client, c.addr, "CfgLp", topic, 0, 1, suspend_ms=60_000))
    held = await wait_until(lambda: _held(c, topic), timeout=20)
    response = await parked  # answered after the hold time, PULL_NOT_FOUND
    assert response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
    return int(held.timeout_millis)


@case("longPollingEnable")
async def _long_polling_enable(c: Ctx) -> None:
    await c.update("longPollingEnable", "false")
    assert await _held_pull_millis(c, "CfgLp") == 1000  # shortPollingTimeMills, not the client's 60 s


@case("shortPollingTimeMills", broker={"long_polling_enable": False})
async def _short_polling_time(c: Ctx) -> None:
    await c.update("shortPollingTimeMills", 300)
    assert await _held_pull_millis(c, "CfgSp") == 300


class _RecordingChannel:
    is_active = True

    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []

    def invoke_oneway(self, command: RemotingCommand) -> None:
        self.sent.append(command)


@case("notifyConsumerIdsChangedEnable")
async def _notify_consumer_ids_changed(c: Ctx) -> None:
    channel = _RecordingChannel()
    c.broker.consumer_manager.notify_consumer_ids_changed("CfgG", [channel])
    assert len(channel.sent) == 1
    await c.update("notifyConsumerIdsChangedEnable", "false")
    c.broker.consumer_manager.notify_consumer_ids_changed("CfgG", [channel])
    assert len(channel.sent) == 1


@case("channelExpiredTimeout")
async def _channel_expired_timeout(c: Ctx) -> None:
    r = await heartbeat(c.client, c.addr, "cfg-client@1", consumer_groups={"CfgExp": ["CfgT"]})
    assert r.code == ResponseCode.SUCCESS
    manager = c.broker.consumer_manager
    c.broker._scan_client_channels()
    assert manager.get_consumer_group_info("CfgExp") is not None
    await c.update("channelExpiredTimeout", 1)
    await asyncio.sleep(0.05)
    c.broker._scan_client_channels()
    assert manager.get_consumer_group_info("CfgExp") is None


@case("traceOn")
async def _trace_on(c: Ctx) -> None:
    assert (await c.send("CfgTr")).ext_fields["TRACE_ON"] == "true"  # type: ignore[index]
    await c.update("traceOn", "false")
    assert (await c.send("CfgTr")).ext_fields["TRACE_ON"] == "false"  # type: ignore[index]


@case("regionId")
async def _region_id(c: Ctx) -> None:
    await c.update("regionId", "Mars")
    assert (await c.send("CfgRg")).ext_fields["MSG_REGION"] == "Mars"  # type: ignore[index]


async def _query_count(c: Ctx, topic: str, key: str, *, unique: bool) -> int:
    r = await query_message(c.client, c.addr, topic, key, unique=unique)
    return len(decode_pull(r)) if r.code == ResponseCode.SUCCESS else 0


async def _query_finds(c: Ctx, topic: str, key: str, n: int, *, unique: bool) -> bool:
    return await _query_count(c, topic, key, unique=unique) == n


@case("defaultQueryMaxNum")
async def _default_query_max_num(c: Ctx) -> None:
    for _ in range(3):  # one message stored three times, as a retried send is
        await c.send("CfgQ", properties=message_properties(uniq_key="CFG-UNIQ-1"))
    await wait_until(lambda: _query_finds(c, "CfgQ", "CFG-UNIQ-1", 3, unique=True), timeout=10)
    await c.update("defaultQueryMaxNum", 1)
    assert await _query_count(c, "CfgQ", "CFG-UNIQ-1", unique=True) == 1


# -- MessageStoreConfig: limits -------------------------------------------------------------------------


@case("maxMsgsNumBatch")
async def _max_msgs_num_batch(c: Ctx) -> None:
    for _ in range(3):
        await c.send("CfgK", keys="cfg-key")
    await wait_until(lambda: _query_finds(c, "CfgK", "cfg-key", 3, unique=False), timeout=10)
    await c.update("maxMsgsNumBatch", 1)
    assert await _query_count(c, "CfgK", "cfg-key", unique=False) == 1


@case("maxMessageSize")
async def _max_message_size(c: Ctx) -> None:
    await c.send("CfgMs", bytes(2048))
    await c.update("maxMessageSize", 1024)
    r = await send_message(c.client, c.addr, "CfgMs", bytes(2048))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL


async def _pulled(c: Ctx, topic: str) -> int:
    r = await pull(c.client, c.addr, "CfgPull", topic, 0, 0, max_nums=32)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return len(decode_pull(r))


@case("maxTransferCountOnMessageInMemory")
async def _max_transfer_count(c: Ctx) -> None:
    for _ in range(5):
        await c.send("CfgTc")
    assert await _pulled(c, "CfgTc") == 5
    await c.update("maxTransferCountOnMessageInMemory", 2)
    assert await _pulled(c, "CfgTc") == 2


async def _suggested_broker(c: Ctx, topic: str) -> int:
    """suggestWhichBrokerId of a pull that reads one of two messages (so one lies behind it)."""
    r = await pull(c.client, c.addr, "CfgSuggestG", topic, 0, 0, max_nums=1)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["suggestWhichBrokerId"])


@case("slaveReadEnable", store={"access_message_in_memory_max_ratio": 0})
async def _slave_read_enable(c: Ctx) -> None:
    for _ in range(2):
        await c.send("CfgSre", queue_id=0)
    assert await _suggested_broker(c, "CfgSre") == 0  # off: always the master
    await c.update("slaveReadEnable", "true")
    assert await _suggested_broker(c, "CfgSre") == 1  # whichBrokerWhenConsumeSlowly


@case("accessMessageInMemoryMaxRatio", broker={"slave_read_enable": True})
async def _access_in_memory_ratio(c: Ctx) -> None:
    for _ in range(2):
        await c.send("CfgAim", queue_id=0)
    assert await _suggested_broker(c, "CfgAim") == 0  # 40% of memory: well inside
    await c.update("accessMessageInMemoryMaxRatio", 0)
    assert await _suggested_broker(c, "CfgAim") == 1


@case("maxTransferBytesOnMessageInMemory")
async def _max_transfer_bytes(c: Ctx) -> None:
    for _ in range(5):
        await c.send("CfgTb", bytes(1000))
    assert await _pulled(c, "CfgTb") == 5
    await c.update("maxTransferBytesOnMessageInMemory", 2500)
    assert 1 <= await _pulled(c, "CfgTb") < 5


@case("syncFlushTimeout", store={"flush_disk_type": "SYNC_FLUSH", "sync_flush_timeout": 60_000})
async def _sync_flush_timeout(c: Ctx) -> None:
    # Hold every group-commit flush in its worker thread, so the acks depend on the timeout alone.
    release = threading.Event()
    commit_log = c.store.commit_log
    flush = commit_log.flush

    def held_flush(least_pages: int) -> int:
        release.wait(30)
        return int(flush(least_pages))

    commit_log.flush = held_flush
    try:
        first = asyncio.create_task(send_message(c.client, c.addr, "CfgSf", b"x", timeout=90))
        await wait_until(lambda: c.store.put._group_commit._waiting, timeout=20)
        await c.update("syncFlushTimeout", 0)
        # answered at once, not when the first send's 60 s run out
        r = await send_message(c.client, c.addr, "CfgSf", b"y", timeout=30)
        assert r.code == ResponseCode.FLUSH_DISK_TIMEOUT
        assert not first.done()
    finally:
        release.set()
        commit_log.flush = flush
    assert (await first).code == ResponseCode.SUCCESS


# -- MessageStoreConfig: flushing ----------------------------------------------------------------------


def _commit_log_flushed(c: Ctx) -> bool:
    cl = c.store.commit_log
    return bool(cl.flushed_offset >= cl.max_offset)


def _cq_flushed(c: Ctx, topic: str) -> bool:
    cq = c.store.consume_queues.get((topic, 0))
    return cq is not None and cq.max_offset > 0 and cq.mfq.flushed_where >= cq.mfq.max_offset()


# Flushing only ever after an hour unless the key under test says otherwise.
_NO_CL_FLUSH = {"flush_interval_commit_log": 20, "flush_commit_log_thorough_interval": HOUR_MS}
_NO_CQ_FLUSH = {"flush_interval_consume_queue": 20, "flush_consume_queue_thorough_interval": HOUR_MS}


@case("flushCommitLogLeastPages", store=_NO_CL_FLUSH)
async def _flush_commit_log_least_pages(c: Ctx) -> None:
    await c.send("CfgFl")  # far less than the 4 dirty pages a flush waits for
    await c.update("flushCommitLogLeastPages", 0)
    await wait_until(lambda: _commit_log_flushed(c), timeout=10)


@case("flushCommitLogThoroughInterval", store=_NO_CL_FLUSH)
async def _flush_commit_log_thorough(c: Ctx) -> None:
    await c.send("CfgFt")
    await c.update("flushCommitLogThoroughInterval", 0)
    await wait_until(lambda: _commit_log_flushed(c), timeout=10)


@case("flushIntervalCommitLog",
      store={"flush_interval_commit_log": HOUR_MS, "flush_commit_log_least_pages": 0})
async def _flush_interval_commit_log(c: Ctx) -> None:
    await c.update("flushIntervalCommitLog", 20)
    service = next(s for s in c.store._services if s.name == "FlushRealTimeService")
    assert service.interval_ms == 20
    # The update wakes the service once; a message sent after that is flushed by the new period.
    await wait_until(lambda: _commit_log_flushed(c), timeout=10)
    await c.send("CfgFi")
    await wait_until(lambda: _commit_log_flushed(c), timeout=10)


@case("flushConsumeQueueLeastPages", store=_NO_CQ_FLUSH)
async def _flush_cq_least_pages(c: Ctx) -> None:
    await c.send("CfgCl")
    await c.update("flushConsumeQueueLeastPages", 0)
    await wait_until(lambda: _cq_flushed(c, "CfgCl"), timeout=10)


@case("flushConsumeQueueThoroughInterval", store=_NO_CQ_FLUSH)
async def _flush_cq_thorough(c: Ctx) -> None:
    await c.send("CfgCt")
    await c.update("flushConsumeQueueThoroughInterval", 0)
    await wait_until(lambda: _cq_flushed(c, "CfgCt"), timeout=10)


@case("flushIntervalConsumeQueue",
      store={"flush_interval_consume_queue": HOUR_MS, "flush_consume_queue_least_pages": 0})
async def _flush_interval_cq(c: Ctx) -> None:
    await c.send("CfgCi")
    await c.update("flushIntervalConsumeQueue", 20)
    service = next(s for s in c.store._services if s.name == "FlushConsumeQueueService")
    assert service.interval_ms == 20
    await wait_until(lambda: _cq_flushed(c, "CfgCi"), timeout=10)
    await c.send("CfgCi")
    await wait_until(lambda: c.store.consume_queues[("CfgCi", 0)].max_offset == 2, timeout=10)
    await wait_until(lambda: _cq_flushed(c, "CfgCi"), timeout=10)


# -- MessageStoreConfig: retention ----------------------------------------------------------------------
# The store's clean-up is called directly with a disk ratio and a clock, so that each key decides
# alone; the background clean service only runs hourly here.

_NO_CLEAN = {"clean_resource_interval": HOUR_MS}


async def _two_segments(c: Ctx) -> None:
    for _ in range(5):  # 4 MiB segments in the test store
        await c.send("CfgRet", bytes(MB))
    assert _segments(c) == 2


def _segments(c: Ctx) -> int:
    return len(list(c.store.commit_log.mfq))


def _later_at_an_hour_other_than_4() -> tuple[int, int]:
    """A time when every file is past its 72 h, at a local hour that is not deleteWhen's 04."""
    t = time.time() + 100 * 3600
    if time.localtime(t).tm_hour == 4:
        t += 3600
    return int(t * 1000), time.localtime(t).tm_hour


@case("cleanResourceInterval", store=_NO_CLEAN)
async def _clean_resource_interval(c: Ctx) -> None:
    await c.update("cleanResourceInterval", 50)
    service = next(s for s in c.store._services if s.name == "CleanCommitLogService")
    assert service.interval_ms == 50


async def _deletes_only_after(c: Ctx, key: str, value: object, **clean: Any) -> None:
    """The clean-up keeps both segments, and deletes the older one once ``key`` is updated."""
    await _two_segments(c)
    c.store.clean_expired_files(**clean)
    assert _segments(c) == 2
    await c.update(key, value)
    c.store.clean_expired_files(**clean)
    assert _segments(c) == 1


@case("fileReservedTime", store=_NO_CLEAN)
async def _file_reserved_time(c: Ctx) -> None:
    # written just now: 72 h to go, none with 0
    await _deletes_only_after(c, "fileReservedTime", 0, disk_ratio=0.1, manual=True)


@case("deleteWhen", store=_NO_CLEAN)
async def _delete_when(c: Ctx) -> None:
    now, hour = _later_at_an_hour_other_than_4()
    await _deletes_only_after(c, "deleteWhen", f"{hour:02d}", now=now, disk_ratio=0.1)


@case("diskMaxUsedSpaceRatio", store=_NO_CLEAN)
async def _disk_max_used_space_ratio(c: Ctx) -> None:
    # 60 % used is "space full" at 50: delete expired files at any hour
    now, _ = _later_at_an_hour_other_than_4()
    await _deletes_only_after(c, "diskMaxUsedSpaceRatio", 50, now=now, disk_ratio=0.6)


@case("diskSpaceCleanForciblyRatio", store=_NO_CLEAN)
async def _disk_space_clean_forcibly_ratio(c: Ctx) -> None:
    # at 50, 60 % used deletes even files that have not expired
    await _deletes_only_after(c, "diskSpaceCleanForciblyRatio", 50, disk_ratio=0.6, manual=True)


@case("cleanFileForciblyEnable", store=_NO_CLEAN)
async def _clean_file_forcibly_enable(c: Ctx) -> None:
    await _two_segments(c)
    await c.update("cleanFileForciblyEnable", "false")
    c.store.clean_expired_files(disk_ratio=0.87, manual=True)  # above the forcibly ratio of 85 %
    assert _segments(c) == 2
    await c.update("cleanFileForciblyEnable", "true")
    c.store.clean_expired_files(disk_ratio=0.87, manual=True)
    assert _segments(c) == 1


@case("diskSpaceWarningLevelRatio", store=_NO_CLEAN)
async def _disk_space_warning_level_ratio(c: Ctx) -> None:
    c.store.clean_expired_files(disk_ratio=0.6)
    assert not c.store.disk_full
    await c.update("diskSpaceWarningLevelRatio", 50)
    # no await between the clean-up and the check: the woken background service measures the
    # real disk and may set the flag back
    c.store.clean_expired_files(disk_ratio=0.6)
    assert c.store.disk_full


# -- keys that may not change at runtime ---------------------------------------------------------------


async def test_restart_required_and_unhonoured_keys_are_refused_and_change_nothing(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        before = (await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)).body_bytes()
        current = {s.key: str(s.value) for s in parse_properties(before.decode())}
        refused = [
            f for cls in (BrokerConfig, MessageStoreConfig, RemotingServerConfig, JavaOnlyConfig)
            for f in config_fields(cls).values() if f.update is Update.RESTART and f.key in current
        ]
        must = {"flushDiskType", "brokerName", "listenPort", "mappedFileSizeCommitLog"}
        assert must <= {f.key for f in refused}
        for f in refused:
            body = f"traceOn=false\n{f.key}={current[f.key]}\n".encode()
            r = await invoke(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
            assert r.code == ResponseCode.NO_PERMISSION, (f.key, r.remark)
            assert f.key in (r.remark or ""), r.remark
            expected = "restart" if f.honoured else "not honoured"
            if "path or command" not in (r.remark or ""):
                assert expected in (r.remark or ""), r.remark
        # all or nothing: traceOn, sent beside each refused key, never changed
        assert (await invoke(client, addr, RequestCode.GET_BROKER_CONFIG)).body_bytes() == before


async def test_flush_disk_type_cannot_switch_at_runtime(tmp_path: Path) -> None:
    """ASYNC -> SYNC used to be accepted while the group-commit service, chosen at start, never ran."""
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        body = b"flushDiskType=SYNC_FLUSH\n"
        r = await invoke(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        assert r.code == ResponseCode.NO_PERMISSION
        assert "flushDiskType" in (r.remark or "") and "restart" in (r.remark or "")
        assert broker.store_config.flush_disk_type == "ASYNC_FLUSH" and not broker.store.config.sync_flush


@case("enablePropertyFilter")
async def _enable_property_filter(c: Ctx) -> None:
    for a in ("1", "2", "3"):
        await c.send("CfgSql", extra_properties={"a": a})
    r = await pull(c.client, c.addr, "CfgSqlG", "CfgSql", 0, 0, subscription="a >= 2",
                   expression_type="SQL92")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The broker does not support consumer to filter message by SQL92")
    await c.update("enablePropertyFilter", "true")
    r = await pull(c.client, c.addr, "CfgSqlG", "CfgSql", 0, 0, subscription="a >= 2",
                   expression_type="SQL92")
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert [m.properties["a"] for m in decode_pull(r)] == ["2", "3"]


@case("filterSupportRetry", broker={"enable_property_filter": True})
async def _filter_support_retry(c: Ctx) -> None:
    # a retried message keeps its properties; the group's SQL92 expression for its first topic decides
    assert (await heartbeat(c.client, c.addr, "cfg-client", consumer_groups={"CfgRG": ["CfgRT"]},
                            sql92={"CfgRT": "a = 2"})).code == ResponseCode.SUCCESS
    for a in ("1", "2"):
        await c.send("%RETRY%CfgRG", extra_properties={"a": a, "RETRY_TOPIC": "CfgRT"})

    async def retried() -> list[str]:
        r = await pull(c.client, c.addr, "CfgRG", "%RETRY%CfgRG", 0, 0)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return [m.properties["a"] for m in decode_pull(r)]
    assert await retried() == ["1", "2"]
    await c.update("filterSupportRetry", "true")
    assert await retried() == ["2"]


@case("storeReplyMessageEnable")
async def _store_reply_message_enable(c: Ctx) -> None:
    # No requester is connected, so the push fails (SYSTEM_ERROR) either way; only the store differs.
    topic = f"{c.broker.broker_config.broker_cluster_name}_REPLY_TOPIC"
    props = message_properties(extra={"MSG_TYPE": "reply", "REPLY_TO_CLIENT": "nobody@1",
                                      "CORRELATION_ID": "c"})

    async def reply() -> None:
        ext = send_header(topic, properties=props)
        r = await invoke(c.client, c.addr, RequestCode.SEND_REPLY_MESSAGE_V2, ext, b"pong")
        assert r.code == ResponseCode.SYSTEM_ERROR and "nobody@1" in (r.remark or ""), r.remark
    await reply()
    assert c.store.get_max_offset_in_queue(topic, 0) == 1
    await c.update("storeReplyMessageEnable", "false")
    await reply()
    assert c.store.get_max_offset_in_queue(topic, 0) == 1


async def _send_half(c: Ctx, topic: str) -> RemotingCommand:
    props = message_properties(extra={"TRAN_MSG": "true", "PGROUP": "CfgTxPG"})
    return await send_message(c.client, c.addr, topic, b"half", properties=props, producer_group="CfgTxPG")


async def _count_checks(c: Ctx) -> list[RemotingCommand]:
    """CHECK_TRANSACTION_STATE requests the broker sends to this client (registered as CfgTxPG)."""
    checks: list[RemotingCommand] = []
    c.client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, lambda req, ch: checks.append(req))
    assert (await heartbeat(c.client, c.addr, "cfg-tx@1", producer_groups=["CfgTxPG"])).code == 0
    return checks


@case("rejectTransactionMessage")
async def _reject_transaction_message(c: Ctx) -> None:
    assert (await _send_half(c, "CfgTx")).code == ResponseCode.SUCCESS
    await c.update("rejectTransactionMessage", "true")
    r = await _send_half(c, "CfgTx")
    assert r.code == ResponseCode.NO_PERMISSION and "transaction message is forbidden" in (r.remark or "")


@case("transactionTimeOut", broker={"transaction_time_out": 3_600_000})
async def _transaction_time_out(c: Ctx) -> None:
    checks = await _count_checks(c)
    assert (await _send_half(c, "CfgTx")).code == ResponseCode.SUCCESS
    await asyncio.sleep(0.01)
    await c.broker.transaction_check_service.check_once()
    await asyncio.sleep(0.1)
    assert checks == []  # younger than an hour
    await c.update("transactionTimeOut", 0)
    await c.broker.transaction_check_service.check_once()
    await wait_until(lambda: len(checks) == 1)


@case("transactionCheckMax", broker={"transaction_time_out": 0})
async def _transaction_check_max(c: Ctx) -> None:
    assert (await _send_half(c, "CfgTx")).code == ResponseCode.SUCCESS
    await asyncio.sleep(0.01)
    service = c.broker.transaction_check_service
    await service.check_once()
    assert c.broker.transaction_service.discarded == 0
    await c.update("transactionCheckMax", 1)
    await asyncio.sleep(0.01)
    await service.check_once()
    assert c.broker.transaction_service.discarded == 1
    assert c.store.get_max_offset_in_queue("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1


@case("transactionCheckInterval", broker={"transaction_check_interval": 3_600_000})
async def _transaction_check_interval(c: Ctx) -> None:
    service = c.broker.transaction_check_service
    await asyncio.sleep(0.3)
    assert service.passes == 0
    await c.update("transactionCheckInterval", 100)
    await wait_until(lambda: service.passes >= 3, timeout=20)


# -- pop (docs/pop.md) --------------------------------------------------------------------------------


async def _second_pop_is_refused_as_full(c: Ctx, key: str) -> None:
    from tests.wire import pop

    await c.send("CfgPop")
    msg = await pop(c.client, c.addr, "CfgPopG", "CfgPop")  # the only message: later pops wait
    assert msg.code == ResponseCode.SUCCESS
    await c.update(key, 1)
    first = asyncio.ensure_future(pop(c.client, c.addr, "CfgPopG", "CfgPop", queue_id=0, poll_ms=3_000))
    await wait_until(lambda: c.broker.pop_service.polling.polling_num == 1, timeout=5)
    # one waiting already: the next one on the same key is refused at once
    assert (await pop(c.client, c.addr, "CfgPopG", "CfgPop", queue_id=0, poll_ms=3_000)).code == \
        ResponseCode.POLLING_FULL
    await first


@case("popPollingSize")
async def _pop_polling_size(c: Ctx) -> None:
    await _second_pop_is_refused_as_full(c, "popPollingSize")


@case("maxPopPollingSize")
async def _max_pop_polling_size(c: Ctx) -> None:
    await _second_pop_is_refused_as_full(c, "maxPopPollingSize")


# -- timer messages -----------------------------------------------------------------------------------


@case("timerMaxDelaySec")
async def _timer_max_delay_sec(c: Ctx) -> None:
    hour = {"TIMER_DELAY_SEC": "3600"}
    await c.send("CfgTimer", extra_properties=hour)
    await c.update("timerMaxDelaySec", 60)
    r = await send_message(c.client, c.addr, "CfgTimer", b"x", extra_properties=hour)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "max delay 60000ms" in (r.remark or ""), r.remark


async def _recall(c: Ctx, handle: str) -> RemotingCommand:
    ext = {"topic": "CfgRecall", "recallHandle": handle, "producerGroup": "PID_TEST"}
    return await invoke(c.client, c.addr, RequestCode.RECALL_MESSAGE, ext)


async def _timer_handle(c: Ctx) -> str:
    r = await c.send("CfgRecall", extra_properties={"TIMER_DELAY_SEC": "3600"})
    assert r.ext_fields is not None
    return r.ext_fields["recallHandle"]


@case("recallMessageEnable")
async def _recall_message_enable(c: Ctx) -> None:
    handle = await _timer_handle(c)
    r = await _recall(c, handle)
    assert r.code == ResponseCode.NO_PERMISSION and r.remark == "recall failed, operation is forbidden"
    await c.update("recallMessageEnable", "true")
    assert (await _recall(c, handle)).code == ResponseCode.SUCCESS


@case("allowRecallWhenBrokerNotWriteable", broker={"recall_message_enable": True})
async def _allow_recall_when_broker_not_writeable(c: Ctx) -> None:
    handle = await _timer_handle(c)
    await c.update("brokerPermission", 4)
    assert (await _recall(c, handle)).code == ResponseCode.SUCCESS
    await c.update("allowRecallWhenBrokerNotWriteable", "false")
    r = await _recall(c, handle)
    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, r.remark


# -- the cases, run (after every case above has registered) -------------------------------------


def test_every_runtime_updatable_broker_key_has_a_case() -> None:
    assert set(CASES) == _runtime_keys(BrokerConfig, MessageStoreConfig, RemotingServerConfig)


@pytest.mark.parametrize("key", sorted(CASES))
async def test_runtime_key_takes_effect(tmp_path: Path, key: str) -> None:
    c = CASES[key]
    opts = BrokerOptions(broker=c.broker, store=c.store)
    async with in_process_cluster(tmp_path, opts) as (ns, broker, client):
        await c.run(Ctx(tmp_path, ns.address, broker, client))
