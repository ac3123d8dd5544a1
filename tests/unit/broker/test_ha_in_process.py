"""Master/slave replication with both brokers in this process (the wire is still real TCP): what
the master stores reaches the slave's commit log, consume queues and tables; SYNC_MASTER answers
as RocketMQ's does with and without a slave; the slave refuses sends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.harness import wait_until
from tests.wire import BrokerOptions, create_topic, send_message, start_broker, start_namesrv

from rocketq.codec.codes import ResponseCode
from rocketq.codec.ha import TRANSFER_HEADER, encode_report
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


async def test_sync_master_answers_as_rocketmq(tmp_path: Path) -> None:
    """No slave: SLAVE_NOT_AVAILABLE; a slave that never acks: FLUSH_SLAVE_TIMEOUT after
    slaveTimeout; a slave that acks: SUCCESS. The message is stored in every case."""
    ns = await start_namesrv(tmp_path)
    master = await start_broker(tmp_path / "m", ns.address, BrokerOptions(
        broker={"broker_role": "SYNC_MASTER"}, store={"slave_timeout": 300}))
    try:
        async with RemotingClient() as client:
            await create_topic(client, master.address, "SyncT", read=1, write=1)
            r = await send_message(client, master.address, "SyncT", b"alone")
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE and r.ext_fields["msgId"]

            # A bare 4.x HA client: it reports offset 0 once and then nothing (no acks).
            host, port = master.replication.ha_server_addr().rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(encode_report(0))
            await writer.drain()
            await wait_until(lambda: master.replication.service.slaves(), timeout=10)
            header = TRANSFER_HEADER.unpack(await reader.readexactly(TRANSFER_HEADER.size))
            assert header[0] == 0 and header[1] > 0  # the log from its start: the first message
            r = await send_message(client, master.address, "SyncT", b"unacked")
            assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
            writer.write(encode_report(master.store.max_phy_offset))  # now it acks everything
            await writer.drain()
            await wait_until(lambda: master.replication.service.group_transfer.push2slave_max_offset
                             == master.store.max_phy_offset, timeout=10)
            writer.close()
            await wait_until(lambda: not master.replication.service.slaves(), timeout=10)

            slave = await start_broker(tmp_path / "s", ns.address, BrokerOptions(broker=SLAVE))
            try:
                await wait_until(lambda: master.replication.service.slaves(), timeout=20)
                r = await send_message(client, master.address, "SyncT", b"acked")
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert master.store.get_max_offset_in_queue("SyncT", 0) == 3
                await wait_until(lambda: slave.store.get_max_offset_in_queue("SyncT", 0) == 3, timeout=10)
            finally:
                await slave.shutdown()
    finally:
        await master.shutdown()
        await ns.shutdown()
