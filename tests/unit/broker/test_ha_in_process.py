"""Master/slave replication with both brokers in this process (the wire is still real TCP): what
the master stores reaches the slave's commit log, consume queues and tables; SYNC_MASTER answers
as RocketMQ's does with and without a slave; the slave refuses sends."""

from __future__ import annotations

from pathlib import Path

from tests.harness import wait_until
from tests.wire import BrokerOptions, create_topic, send_message, start_broker, start_namesrv

from rocketq.codec.codes import ResponseCode
from rocketq.remoting import RemotingClient

SLAVE = {"broker_id": 1, "broker_role": "SLAVE"}


async def test_slave_replicates_messages_and_refuses_sends(tmp_path: Path) -> None:
    ns = await start_namesrv(tmp_path)
    master = await start_broker(tmp_path / "m", ns.address, BrokerOptions())
    slave = await start_broker(tmp_path / "s", ns.address, BrokerOptions(broker=SLAVE))
    try:
        async with RemotingClient() as client:
            r = await create_topic(client, master.address, "HaT", read=2, write=2)
            assert r.code == ResponseCode.SUCCESS
            for i in range(50):
                r = await send_message(client, master.address, "HaT", b"m%d" % i, queue_id=i % 2)
                assert r.code == ResponseCode.SUCCESS, r.remark
            await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset, timeout=20)
            await wait_until(lambda: slave.store.get_max_offset_in_queue("HaT", 1) == 25, timeout=20)
            assert slave.store.get_max_offset_in_queue("HaT", 0) == 25
            got = slave.store.get_message("HaT", 0, 0, 32)
            assert got.message_count == 25
            r = await send_message(client, slave.address, "HaT", b"no", queue_id=0)
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
            await wait_until(lambda: "HaT" in slave.topic_manager.table, timeout=30)
    finally:
        await slave.shutdown()
        await master.shutdown()
        await ns.shutdown()
