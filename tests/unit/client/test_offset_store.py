"""One conformance suite for every OffsetStore, subclassed per implementation (eventsourcing style).

The remote store runs against a real in-process broker over the wire; the local store against
tmp_path. Each subclass says how to build a store and how to build "the same store again" (a
consumer restart) so persistence is checked the same way for both.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.wire import in_process_cluster, invoke

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    decode_offset_file,
    encode_offset_file,
)
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.errors import BrokerNotFound

pytestmark = pytest.mark.timeout(30)

MEMORY = ReadOffsetType.READ_FROM_MEMORY
STORE = ReadOffsetType.READ_FROM_STORE
FIRST_MEMORY = ReadOffsetType.MEMORY_FIRST_THEN_STORE

Q0 = MessageQueue("TopicA", "broker-a", 0)
Q1 = MessageQueue("TopicA", "broker-a", 1)
QB = MessageQueue("TopicB", "broker-a", 0)


class OffsetStoreConformance(abc.ABC):
    """What every offset store must do. Subclasses provide `env` and the two factories."""

    group = "conformance_group"
    # What a store read gives for a queue nobody committed to: -1, except that a broker answers 0
    # for a fresh queue (PROTOCOL.md §2.2 QUERY_CONSUMER_OFFSET, as the Java broker does).
    nothing_stored = -1

    @abc.abstractmethod
    def new_store(self, env: Any) -> OffsetStore:
        """A store of `group` (a fresh object each call: the second call is a consumer restart)."""

    async def test_unknown_queue_reads_minus_one(self, env: Any) -> None:
        store = self.new_store(env)
        await store.load()
        assert await store.read_offset(Q0, MEMORY) == -1
        for how in (STORE, FIRST_MEMORY):
            assert await store.read_offset(Q0, how) == self.nothing_stored

    async def test_update_in_memory_and_increase_only(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 10, increase_only=False)
        store.update_offset(Q0, 5, increase_only=True)
        assert await store.read_offset(Q0, MEMORY) == 10
        store.update_offset(Q0, 12, increase_only=True)
        assert store.read_offset_in_memory(Q0) == 12
        store.update_offset(Q0, 3, increase_only=False)  # a seek / reset may go back
        assert await store.read_offset(Q0, FIRST_MEMORY) == 3
        # Memory only: nothing reached the store yet.
        assert await self.new_store(env).read_offset(Q0, STORE) == self.nothing_stored

    async def test_persist_all_survives_a_restart(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 7, False)
        store.update_offset(Q1, 9, False)
        store.update_offset(QB, 4, False)
        await store.persist_all({Q0, Q1, QB})
        again = self.new_store(env)
        await again.load()
        assert await again.read_offset(Q0, STORE) == 7
        assert await again.read_offset(Q1, FIRST_MEMORY) == 9
        assert await again.read_offset(QB, STORE) == 4
        # A store read is remembered in memory.
        assert again.read_offset_in_memory(Q0) == 7

    async def test_persist_one_queue(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 21, False)
        store.update_offset(Q1, 22, False)
        await store.persist(Q0)
        await store.persist(QB)  # never updated: nothing to do
        again = self.new_store(env)
        assert await again.read_offset(Q0, STORE) == 21
        assert await again.read_offset(Q1, STORE) == self.nothing_stored

    async def test_later_persists_overwrite(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 1, False)
        await store.persist_all([Q0])
        store.update_offset(Q0, 50, False)
        await store.persist_all([Q0])
        assert await self.new_store(env).read_offset(Q0, STORE) == 50

    async def test_memory_first_prefers_memory_then_fills_from_store(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 30, False)
        await store.persist_all([Q0])
        other = self.new_store(env)
        other.update_offset(Q0, 31, False)
        assert await other.read_offset(Q0, FIRST_MEMORY) == 31
        third = self.new_store(env)
        assert await third.read_offset(Q0, MEMORY) == -1
        assert await third.read_offset(Q0, FIRST_MEMORY) == 30
        assert third.read_offset_in_memory(Q0) == 30

    async def test_remove_and_clone(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 1, False)
        store.update_offset(Q1, 2, False)
        store.update_offset(QB, 3, False)
        assert store.clone_offset_table("TopicA") == {Q0: 1, Q1: 2}
        assert store.clone_offset_table() == {Q0: 1, Q1: 2, QB: 3}
        store.remove_offset(Q1)
        store.remove_offset(Q1)  # twice is fine
        assert store.read_offset_in_memory(Q1) == -1
        assert store.clone_offset_table("TopicA") == {Q0: 1}

    async def test_persist_all_of_nothing_is_a_no_op(self, env: Any) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 5, False)
        await store.persist_all([])
        assert await self.new_store(env).read_offset(Q0, STORE) == self.nothing_stored
        assert store.read_offset_in_memory(Q0) == 5


class _BrokerClient:
    """The slice of MQClientInstance a RemoteBrokerOffsetStore uses, bound to one real broker."""

    def __init__(self, api: MQClientAPI, broker_addr: str) -> None:
        self.api = api
        self.config = api.config
        self.client_id = "127.0.0.1@offset-test"
        self.addrs = {"broker-a": broker_addr}
        self.route_updates: list[str] = []

    def find_broker_address_in_subscribe(self, broker_name: str) -> str | None:
        return self.addrs.get(broker_name)

    async def update_topic_route_info_from_name_server(self, topic: str) -> bool:
        self.route_updates.append(topic)
        return False

    def refresh_route_soon(self, topic: str) -> None:
        self.route_updates.append(topic)


class TestRemoteBrokerOffsetStore(OffsetStoreConformance):
    nothing_stored = 0

    @pytest.fixture
    async def env(self, tmp_path: Path) -> AsyncIterator[_BrokerClient]:
        async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, remoting):
            yield _BrokerClient(
                MQClientAPI(remoting, ClientConfig(instance_name="offset-test")), broker.address
            )

    def new_store(self, env: _BrokerClient) -> OffsetStore:
        return RemoteBrokerOffsetStore(env, self.group)

    async def test_offsets_land_on_the_broker(self, env: _BrokerClient) -> None:
        store = self.new_store(env)
        store.update_offset(Q1, 42, False)
        await store.persist_all([Q1])
        await store.update_consume_offset_to_broker(QB, 8, is_oneway=False)
        for mq, expected in ((Q1, 42), (QB, 8)):
            resp = await invoke(
                env.api.remoting_client,
                env.addrs["broker-a"],
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": self.group, "topic": mq.topic, "queueId": mq.queue_id},
            )
            assert resp.code == ResponseCode.SUCCESS and int(resp.ext_fields["offset"]) == expected

    async def test_persist_all_forgets_queues_no_longer_assigned(self, env: _BrokerClient) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 1, False)
        store.update_offset(Q1, 2, False)
        await store.persist_all([Q0])
        assert store.clone_offset_table() == {Q0: 1}
        assert await self.new_store(env).read_offset(Q1, STORE) == self.nothing_stored

    async def test_unknown_broker(self, env: _BrokerClient) -> None:
        store = self.new_store(env)
        lost = MessageQueue("TopicA", "broker-x", 0)
        assert await store.read_offset(lost, STORE) == -2  # an error, not "no offset"
        with pytest.raises(BrokerNotFound):
            await store.update_consume_offset_to_broker(lost, 3)
        assert env.route_updates == ["TopicA", "TopicA"]  # a route refresh was tried each time

    async def test_a_gone_broker_is_one_warning_per_direction_until_it_is_back(
        self, env: _BrokerClient, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = self.new_store(env)
        real = env.addrs.pop("broker-a")
        caplog.set_level(logging.WARNING, logger="rocketq.client")
        for _ in range(3):
            for mq in (Q0, Q1):
                assert await store.read_offset(mq, STORE) == -2
                store.update_offset(mq, 5, False)
            await store.persist_all([Q0, Q1])
        lines = [r.getMessage() for r in caplog.records]
        assert sum("fetchConsumeOffsetFromBroker" in line for line in lines) == 1
        assert sum("updateConsumeOffsetToBroker" in line for line in lines) == 1
        env.addrs["broker-a"] = real  # back: the next failure is news again
        await store.persist_all([Q0])
        assert await store.read_offset(Q0, STORE) == 5
        del env.addrs["broker-a"]
        caplog.clear()
        assert await store.read_offset(Q1, STORE) == -2
        assert [r.levelno for r in caplog.records] == [logging.WARNING]


class TestLocalFileOffsetStore(OffsetStoreConformance):
    @pytest.fixture
    def env(self, tmp_path: Path) -> Path:
        return tmp_path / "offsets"

    def new_store(self, env: Path) -> OffsetStore:
        return LocalFileOffsetStore("127.0.0.1@local-test", self.group, store_dir=env)

    async def test_file_layout_and_java_format(self, env: Path) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 3, False)
        await store.persist_all([Q0])
        path = env / "127.0.0.1@local-test" / self.group / "offsets.json"
        assert (
            path.read_bytes() == b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicA"}:3}}'
        )

    async def test_corrupt_file_falls_back_to_backup(self, env: Path) -> None:
        store = self.new_store(env)
        store.update_offset(Q0, 3, False)
        await store.persist_all([Q0])
        store.update_offset(Q0, 4, False)
        await store.persist_all([Q0])  # the 3 is now in offsets.json.bak
        path = env / "127.0.0.1@local-test" / self.group / "offsets.json"
        path.write_bytes(b"{garbage")
        again = self.new_store(env)
        await again.load()
        assert again.read_offset_in_memory(Q0) == 3


def test_offset_file_bytes_are_what_a_java_client_writes() -> None:
    table = {MessageQueue("T2", 'bro"ker-\u00e9', 1): 5, MessageQueue("T1", "b", 0): -1}
    assert encode_offset_file(table) == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T1"}:-1,'
        b'{"brokerName":"bro\\"ker-\xc3\xa9","queueId":1,"topic":"T2"}:5}}'
    )
    assert encode_offset_file({}) == b'{"offsetTable":{}}'


def test_offset_file_codec_round_trip_and_java_spacing() -> None:
    table = {Q1: 5, Q0: 2, QB: -1}
    assert decode_offset_file(encode_offset_file(table)) == table
    java = (
        '{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:17, '
        '{"topic":"T","queueId":4,"brokerName":"b"} : 18}}'
    )
    assert decode_offset_file(java) == {MessageQueue("T", "b", 3): 17, MessageQueue("T", "b", 4): 18}
    assert decode_offset_file("{}") == {}
    with pytest.raises(ValueError):
        decode_offset_file("not json")
