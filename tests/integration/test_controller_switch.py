"""A manual switch (`rocketq admin electMaster`) under live clients, with real processes: one
`rocketq controller`, a name server and a group of two brokers in controller mode, each with its
Prometheus endpoint (docs/ha.md).

Unlike a kill, the old master stays up: it becomes a slave and refuses sends, so a producer must
find the new master in the route and a push consumer must pull from it and commit its offsets there.
The brokers' controller-mode gauges (role, master epoch, SyncStateSet membership) follow the switch.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.harness import (
    AdminRun,
    Server,
    small_store,
    start_controller_member,
    unique_name,
    wait_until,
)
from tests.integration.test_controller_pop_timer import _has_topics, _is, one_controller
from tests.integration.test_metrics import one, samples
from tests.wire import create_topic, get_max_offset, invoke, send_message

from rocketq.aio import ConsumeStatus, Producer, PushConsumer
from rocketq.client.message import Message, SendStatus
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.errors import RocketQError
from rocketq.remoting import RemotingClient

# ~45 s: make test-all runs it; test_controller_admin switches a live group under make test.
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

GROUP = "ctl-switch"
QUEUES = 2
STORE = small_store(commit_log=1024 * 1024, slots=4000, index=16000)
METRICS = re.compile(r"^READY broker=\S+ metrics=(?P<metrics>\S+)", re.MULTILINE)


def member(tmp_path: Path, g: dict[str, Server], index: int) -> tuple[Server, str]:
    """Member `index` in controller mode and its metrics endpoint."""
    s = start_controller_member(tmp_path, GROUP, g["ns"].addr, [g["c0"]], index, *STORE,
                                "--set", "metricsPort=0")
    g[f"b{index}"] = s
    return s, s.proc.wait_for(METRICS, 5)["metrics"]


async def replica_info(client: RemotingClient, controller: str) -> tuple[str, int, int]:
    """(master address, master epoch, SyncStateSet size) as the controller sees them."""
    r = await invoke(client, controller, RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
    if r.code != 0:
        return "", 0, 0
    body = r.body_bytes()
    ext = r.ext_fields or {}
    return (ext.get("masterAddress", ""), int(ext.get("masterEpoch") or 0),
            len(orjson.loads(body).get("syncStateSet", [])) if body else 0)


def gauges(metrics: str) -> tuple[float, ...]:
    data = samples(metrics)
    return tuple(one(data, f"rocketq_controller_mode_{name}")
                 for name in ("is_master", "is_slave", "master_epoch", "in_sync_state_set"))


async def committed_to_end(client: RemotingClient, addr: str, group: str, topic: str) -> bool:
    """The group's offsets on `addr` are at every queue's end there."""
    for q in range(QUEUES):
        r = await invoke(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": group, "topic": topic, "queueId": q})
        end = await get_max_offset(client, addr, topic, q)
        if r.code != 0 or int(r.ext_fields.get("offset", "-1")) != end:
            return False
    return True


async def test_elect_master_moves_live_producer_and_push_consumer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with one_controller(tmp_path) as g:
        ctl = g["c0"].addr
        async with RemotingClient() as client:
            b0, m0 = member(tmp_path, g, 0)
            await wait_until(lambda: _is(replica_info(client, ctl), (b0.addr, 1, 1)), timeout=60)
            b1, m1 = member(tmp_path, g, 1)
            await wait_until(lambda: _is(replica_info(client, ctl), (b0.addr, 1, 2)), timeout=60)
            # each broker's own view: a master and a slave at epoch 1, both in the set
            await wait_until(lambda: gauges(m0) == (1, 0, 1, 1) and gauges(m1) == (0, 1, 1, 1), timeout=30)

            topic, cg = unique_name("CtlSwT"), unique_name("CtlSwCG")
            assert (await create_topic(client, b0.addr, topic, read=QUEUES, write=QUEUES)).code == 0
            # the slave's table copy (every 10 s) brings the topic it will serve once master
            await wait_until(lambda: _has_topics(client, b1.addr, topic), timeout=30)

            bodies: list[bytes] = []

            def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
                bodies.extend(bytes(m.body) for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = PushConsumer(cg, namesrv_addr=g["ns"].addr, instance_name=unique_name("i"))
            consumer.subscribe(topic, "*")
            consumer.register_listener(listener)
            await consumer.start()
            acked: list[bytes] = []
            acked_at: list[float] = []
            statuses: dict[bytes, Any] = {}
            try:
                async with Producer(unique_name("CtlSwPG"), namesrv_addr=g["ns"].addr, send_msg_timeout=3000,
                                    retry_times_when_send_failed=2) as producer:
                    stop = asyncio.Event()

                    async def send_on() -> None:
                        """Send as an application would: one after another, a failed send retried later."""
                        i = 0
                        while not stop.is_set():
                            body = b"m-%d" % i
                            try:
                                r = await producer.send(Message(topic, body))
                            except RocketQError:
                                await asyncio.sleep(0.1)
                                continue
                            if r.status in (SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE):
                                acked.append(body)
                                acked_at.append(time.monotonic())
                                statuses[body] = (r.status.name, r.msg_id)
                                i += 1
                            await asyncio.sleep(0.02)

                    sender = asyncio.ensure_future(send_on())
                    try:
                        await wait_until(lambda: len(acked) >= 20 and set(acked) <= set(bodies), timeout=60)
                        admin = AdminRun(capsys, g["ns"].addr)
                        cluster = admin.json("clusterList")[0]["clusterName"]
                        sets = admin.json("getSyncStateSet", "-a", ctl, "-b", GROUP)["replicasInfoTable"]
                        table = sets[GROUP]
                        ids = {r["brokerAddress"]: r["brokerId"] for r in table["inSyncReplicas"]}
                        elected = admin.json("electMaster", "-a", ctl, "-c", cluster, "-bn", GROUP,
                                             "-b", str(ids[b1.addr]))
                        assert elected["masterAddress"] == b1.addr and elected["masterEpoch"] == 2
                        switched_at, elected_at = len(acked), time.monotonic()

                        # the old master turns slave and refuses sends; the gauges follow
                        await wait_until(lambda: gauges(m1) == (1, 0, 2, 1) and gauges(m0) == (0, 1, 2, 1),
                                         timeout=30)
                        r = await send_message(client, b0.addr, topic, b"refused")
                        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, r.remark
                        # the producer goes on through the new master, the consumer reads every message
                        await wait_until(lambda: len(acked) >= switched_at + 50, timeout=60)
                    finally:
                        stop.set()
                        await sender
                    gap = max(b - a for a, b in zip([elected_at, *acked_at[switched_at:]],
                                                     acked_at[switched_at:], strict=False))
                    print(f"electMaster: longest pause between acknowledged sends {gap:.2f} s")
                    # the producer looked the route up when the old master refused, not at its 30 s poll
                    assert gap <= 15.0, f"sends paused {gap:.1f} s across the switch"
                    # every acknowledged message is read (SEND_OK: the new master has it too);
                    # checked last, after what the clients do across the switch
                    with contextlib.suppress(AssertionError):
                        await wait_until(lambda: set(acked) <= set(bodies), timeout=30)
                    assert len(set(bodies) & set(acked[switched_at:])) >= 40  # read past the switch
                    consumed_at = time.monotonic()
                    # the consumer commits its progress to the new master (it has messages the old
                    # one never had as master: offsets there can only come from this consumer)
                    # (at the consumer's next route poll, 30 s, plus its 5 s commit interval)
                    await wait_until(lambda: committed_to_end(client, b1.addr, cg, topic), timeout=90)
                    now = time.monotonic()
                    print(f"electMaster: offsets at the end on the new master {now - consumed_at:.1f} s after"
                          f" the last message was consumed, {now - elected_at:.1f} s after the switch")
            finally:
                await consumer.shutdown()
            assert b"refused" not in bodies
            lost = {b.decode(): statuses[b] for b in sorted(set(acked) - set(bodies))}
            assert not lost, f"acknowledged, never consumed (old master {b0.addr}): {lost}"

