"""Allocate strategies: RocketMQ's golden examples (PROTOCOL.md §4.7) and partition properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.rebalance.allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    allocate_strategy,
    md5_hash,
    register_strategy,
)
from rocketq.codec.bodies import MessageQueue


def queues(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def cids(c: int) -> list[str]:
    return sorted(f"127.0.0.1@{i}" for i in range(c))


def ids(mqs: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in mqs]


def assignment(
    strategy: AllocateMessageQueueStrategy, mqs: list[MessageQueue], all_cids: list[str]
) -> dict[str, list[MessageQueue]]:
    return {cid: strategy.allocate("G", cid, mqs, all_cids) for cid in all_cids}


@pytest.mark.parametrize(
    ("n", "c", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (16, 8, [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]),
        (3, 5, [[0], [1], [2], [], []]),
        (4, 4, [[0], [1], [2], [3]]),
        (5, 1, [[0, 1, 2, 3, 4]]),
    ],
)
def test_averagely_golden(n: int, c: int, expected: list[list[int]]) -> None:
    mqs, all_cids = queues(n), cids(c)
    got = [ids(AllocateMessageQueueAveragely().allocate("G", cid, mqs, all_cids)) for cid in all_cids]
    assert got == expected


@pytest.mark.parametrize(
    ("n", "c", "expected"),
    [
        (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
        (3, 5, [[0], [1], [2], [], []]),
        (16, 8, [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]]),
    ],
)
def test_averagely_by_circle_golden(n: int, c: int, expected: list[list[int]]) -> None:
    mqs, all_cids = queues(n), cids(c)
    got = [ids(AllocateMessageQueueAveragelyByCircle().allocate("G", cid, mqs, all_cids)) for cid in all_cids]
    assert got == expected


@pytest.mark.parametrize(
    "strategy",
    [
        AllocateMessageQueueAveragely(),
        AllocateMessageQueueAveragelyByCircle(),
        AllocateMessageQueueConsistentHash(),
    ],
    ids=lambda s: type(s).__name__,
)
@given(n=st.integers(1, 64), c=st.integers(1, 20))
def test_every_queue_has_exactly_one_owner(strategy: AllocateMessageQueueStrategy, n: int, c: int) -> None:
    mqs, all_cids = queues(n), cids(c)
    owned = [mq for share in assignment(strategy, mqs, all_cids).values() for mq in share]
    assert sorted(owned) == mqs


@given(n=st.integers(1, 64), c=st.integers(1, 20))
def test_averagely_is_balanced_and_contiguous(n: int, c: int) -> None:
    mqs, all_cids = queues(n), cids(c)
    shares = [ids(s) for s in assignment(AllocateMessageQueueAveragely(), mqs, all_cids).values()]
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    assert [q for s in shares for q in s] == list(range(n))  # contiguous ranges, in consumer order


def test_unknown_consumer_gets_nothing_and_bad_input_raises() -> None:
    mqs = queues(4)
    for strategy in (AllocateMessageQueueAveragely(), AllocateMessageQueueConsistentHash()):
        assert strategy.allocate("G", "stranger", mqs, cids(2)) == []
        with pytest.raises(ValueError):
            strategy.allocate("G", "", mqs, cids(2))
        with pytest.raises(ValueError):
            strategy.allocate("G", "127.0.0.1@0", [], cids(2))
        with pytest.raises(ValueError):
            strategy.allocate("G", "127.0.0.1@0", mqs, [])


def test_md5_ring_hash_rule() -> None:
    # MD5("") = d41d8cd98f00b204e9800998ecf8427e: the first four bytes, unsigned big-endian.
    assert md5_hash("") == 0xD41D8CD9
    # MD5("abc") = 900150983cd24fb0d6963f7d28e17f72
    assert md5_hash("abc") == 0x90015098


def test_consistent_hash_routes_by_java_tostring_and_virtual_node_keys() -> None:
    mqs = queues(8, topic="TopicTest", broker="broker-a")
    all_cids = ["127.0.0.1@a", "127.0.0.1@b"]
    strategy = AllocateMessageQueueConsistentHash()
    # Recompute the ring by the published rules (nodes "<cid>-<k>", first node >= queue hash, wrap).
    ring = sorted((md5_hash(f"{cid}-{k}"), cid) for cid in all_cids for k in range(10))
    expected: dict[str, list[int]] = {cid: [] for cid in all_cids}
    for mq in mqs:
        h = md5_hash(f"MessageQueue [topic=TopicTest, brokerName=broker-a, queueId={mq.queue_id}]")
        owner = next((cid for point, cid in ring if point >= h), ring[0][1])
        expected[owner].append(mq.queue_id)
    got = {cid: ids(share) for cid, share in assignment(strategy, mqs, all_cids).items()}
    assert got == expected
    # Pinned: a change here means a mixed Java/Python group would split queues differently.
    assert got == {"127.0.0.1@a": [1, 6, 7], "127.0.0.1@b": [0, 2, 3, 4, 5]}


def test_consistent_hash_moves_only_what_the_newcomer_takes() -> None:
    mqs = queues(64)
    before_cids = cids(4)
    after_cids = sorted([*before_cids, "127.0.0.1@new"])
    strategy = AllocateMessageQueueConsistentHash(virtual_node_cnt=10)
    before = {mq: cid for cid, share in assignment(strategy, mqs, before_cids).items() for mq in share}
    after = {mq: cid for cid, share in assignment(strategy, mqs, after_cids).items() for mq in share}
    moved = [mq for mq in mqs if before[mq] != after[mq]]
    assert moved and all(after[mq] == "127.0.0.1@new" for mq in moved)


def test_consistent_hash_custom_hash_and_wraparound() -> None:
    points = {"a-0": 10, "b-0": 20}
    by_queue = {0: 5, 1: 15, 2: 25, 3: 20}  # 25 is past every node: wraps to the smallest (a)

    def fake_hash(key: str) -> int:
        return points.get(key) or by_queue[int(key.rsplit("=", 1)[1].rstrip("]"))]

    strategy = AllocateMessageQueueConsistentHash(virtual_node_cnt=1, hash_function=fake_hash)
    assert ids(strategy.allocate("G", "a", queues(4), ["a", "b"])) == [0, 2]
    assert ids(strategy.allocate("G", "b", queues(4), ["a", "b"])) == [1, 3]  # equal hash: that node
    with pytest.raises(ValueError):
        AllocateMessageQueueConsistentHash(virtual_node_cnt=-1)


def test_by_config_returns_its_list_whatever_the_group() -> None:
    mine = [MessageQueue("T", "b", 3), MessageQueue("T", "b", 1)]
    assert AllocateMessageQueueByConfig(mine).allocate("G", "x", queues(8), ["y"]) == mine


def test_by_machine_room() -> None:
    mqs = [
        *(MessageQueue("T", "room1@broker-a", i) for i in range(3)),
        *(MessageQueue("T", "room2@broker-b", i) for i in range(2)),
        MessageQueue("T", "broker-c", 0),
        MessageQueue("T", "room1@", 0),  # Java's split drops the empty tail: not "room1@<broker>"
    ]
    strategy = AllocateMessageQueueByMachineRoom({"room1", "room2"})
    got = assignment(strategy, mqs, ["c0", "c1"])
    # 5 eligible queues over 2 consumers: 2 each in order, the remainder to the first.
    assert [(mq.broker_name, mq.queue_id) for mq in got["c0"]] == [
        ("room1@broker-a", 0),
        ("room1@broker-a", 1),
        ("room2@broker-b", 1),
    ]
    assert [(mq.broker_name, mq.queue_id) for mq in got["c1"]] == [
        ("room1@broker-a", 2),
        ("room2@broker-b", 0),
    ]


class _Rooms:
    def broker_deploy_in(self, message_queue: MessageQueue) -> str:
        return message_queue.broker_name.split("-")[0]

    def consumer_deploy_in(self, client_id: str) -> str:
        return client_id.split("-")[0]


def test_machine_room_nearby_prefers_own_room_and_shares_orphans() -> None:
    mqs = [MessageQueue("T", f"{room}-broker", i) for room in ("hz", "sh", "bj") for i in range(2)]
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), _Rooms())
    all_cids = ["hz-c1", "sh-c1", "sh-c2"]
    got = {
        cid: [(mq.broker_name, mq.queue_id) for mq in share]
        for cid, share in assignment(strategy, mqs, all_cids).items()
    }
    assert got["hz-c1"] == [("hz-broker", 0), ("hz-broker", 1), ("bj-broker", 0)]
    assert got["sh-c1"] == [("sh-broker", 0), ("bj-broker", 1)]
    assert got["sh-c2"] == [("sh-broker", 1)]


def test_strategy_lookup_by_name_and_registration() -> None:
    assert isinstance(allocate_strategy(None), AllocateMessageQueueAveragely)
    assert isinstance(allocate_strategy("avg_by_circle"), AllocateMessageQueueAveragelyByCircle)
    assert isinstance(allocate_strategy("CONSISTENT_HASH"), AllocateMessageQueueConsistentHash)
    custom = AllocateMessageQueueByConfig(queues(1))
    assert allocate_strategy(custom) is custom
    register_strategy("FIRST_ONLY", lambda: AllocateMessageQueueByConfig(queues(1)))
    assert ids(allocate_strategy("FIRST_ONLY").allocate("G", "a", queues(4), ["a"])) == [0]
    with pytest.raises(ValueError):
        allocate_strategy("NOPE")
    with pytest.raises(TypeError):
        allocate_strategy(42)  # type: ignore[arg-type]
