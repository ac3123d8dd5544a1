"""The controller's state machine, elect policy and heartbeat decisions, with plain values."""

from __future__ import annotations

from rocketq.controller.heartbeats import MAX_TIME_NOT_CATCHUP_MS, Heartbeats
from rocketq.controller.state import (
    BROKER_ID_INVALID,
    BROKER_NEED_TO_BE_REGISTERED,
    FENCED_MASTER_EPOCH,
    INVALID_MASTER,
    MASTER_NOT_AVAILABLE,
    MASTER_STILL_EXIST,
    ControllerState,
    LiveInfo,
    elect,
)


def _group(n: int = 2) -> ControllerState:
    s = ControllerState()
    for b in range(1, n + 1):
        assert s.apply({"op": "apply_broker_id", "cluster": "c", "brokerName": "a", "brokerId": b,
                        "checkCode": f"host{b}"}).ok
        assert s.apply({"op": "register", "brokerName": "a", "brokerId": b, "address": f"h:{b}",
                        "haAddress": f"h:{b}1"}).ok
    return s


def test_elect_policy_prefers_old_master_then_most_advanced() -> None:
    live = {1: LiveInfo(1, epoch=2, max_offset=10), 2: LiveInfo(2, epoch=2, max_offset=30),
            3: LiveInfo(3, epoch=1, max_offset=99)}
    assert elect({1, 2, 3}, 1, None, live) == 1
    assert elect({2, 3}, 1, None, live) == 2  # epoch first, then offset
    assert elect({2, 3}, 1, 3, live) == 3
    assert elect({2}, 1, 3, live) is None
    assert elect(set(), 1, None, live) is None


def test_broker_ids_are_claimed_once() -> None:
    s = _group(1)
    assert s.next_broker_id("a") == 2
    assert s.apply({"op": "apply_broker_id", "cluster": "c", "brokerName": "a", "brokerId": 1,
                    "checkCode": "other"}).code == BROKER_ID_INVALID
    assert s.apply({"op": "apply_broker_id", "cluster": "c", "brokerName": "a", "brokerId": 1,
                    "checkCode": "host1"}).ok  # the same broker again: its own id
    assert s.apply({"op": "register", "brokerName": "a", "brokerId": 7, "address": "x"}).code \
        == BROKER_NEED_TO_BE_REGISTERED


def test_first_election_takes_the_requester_then_failover_takes_an_in_sync_slave() -> None:
    s = _group(2)
    r = s.apply({"op": "elect", "brokerName": "a", "brokerId": 2, "alive": [1, 2]})
    assert r.ok and r.values["masterBrokerId"] == 2 and r.values["masterEpoch"] == 1
    assert r.values["masterAddress"] == "h:2" and r.values["masterHaAddress"] == "h:21"
    # asking again while the master lives: still the same master
    again = s.apply({"op": "elect", "brokerName": "a", "brokerId": 1, "alive": [1, 2]})
    assert again.code == MASTER_STILL_EXIST
    # broker 1 is not in the SyncStateSet: the master's death leaves nobody
    r = s.apply({"op": "elect", "brokerName": "a", "brokerId": None, "alive": [1]})
    assert r.code == MASTER_NOT_AVAILABLE and s.groups["a"].master is None
    # the old master comes back: it is the only in-sync member, it is elected again (epoch moves)
    r = s.apply({"op": "elect", "brokerName": "a", "brokerId": 2, "alive": [1, 2]})
    assert r.ok and r.values["masterBrokerId"] == 2 and r.values["masterEpoch"] == 2
    ssse = s.groups["a"].sync_state_set_epoch
    assert s.apply({"op": "alter_sync_state_set", "brokerName": "a", "masterBrokerId": 2, "masterEpoch": 2,
                    "syncStateSetEpoch": ssse, "syncStateSet": [1, 2]}).ok
    r = s.apply({"op": "elect", "brokerName": "a", "brokerId": None, "alive": [1]})
    assert r.ok and r.values["masterBrokerId"] == 1 and r.values["masterEpoch"] == 3
    assert r.values["syncStateSet"] == [1]


def test_unclean_election_takes_any_alive_replica() -> None:
    s = _group(2)
    s.apply({"op": "elect", "brokerName": "a", "brokerId": 1, "alive": [1, 2]})
    assert s.apply({"op": "elect", "brokerName": "a", "brokerId": None, "alive": [2], "unclean": True}) \
        .values["masterBrokerId"] == 2


def test_alter_sync_state_set_is_fenced() -> None:
    s = _group(2)
    s.apply({"op": "elect", "brokerName": "a", "brokerId": 1, "alive": [1, 2]})
    base = {"op": "alter_sync_state_set", "brokerName": "a", "masterBrokerId": 1, "masterEpoch": 1,
            "syncStateSetEpoch": 1, "syncStateSet": [1, 2]}
    assert s.apply({**base, "masterBrokerId": 2}).code == INVALID_MASTER
    assert s.apply({**base, "masterEpoch": 0}).code == FENCED_MASTER_EPOCH
    assert s.apply(base).values == {"syncStateSet": [1, 2], "syncStateSetEpoch": 2}
    assert s.apply(base).code != 0  # the set epoch moved on


def test_state_round_trips_through_a_dict() -> None:
    s = _group(2)
    s.apply({"op": "elect", "brokerName": "a", "brokerId": 1, "alive": [1, 2]})
    again = ControllerState.from_dict(s.to_dict())
    assert again.to_dict() == s.to_dict()


def test_heartbeats_elect_when_the_master_dies_and_grow_the_set() -> None:
    s = _group(2)
    s.apply({"op": "elect", "brokerName": "a", "brokerId": 1, "alive": [1, 2]})
    hb = Heartbeats(default_timeout_ms=1000)
    hb.become_leader(0)
    master_channel = object()
    hb.beat("a", 1, "h:1", 100, epoch=1, max_offset=500, channel=master_channel)
    hb.beat("a", 2, "h:2", 100, epoch=1, max_offset=400)
    assert hb.decide(s, 200) == []  # behind the master: not yet in sync
    hb.beat("a", 2, "h:2", 300, epoch=1, max_offset=500)
    (grow,) = hb.decide(s, 300)
    assert grow["op"] == "alter_sync_state_set" and grow["syncStateSet"] == [1, 2]
    assert s.apply(grow).ok
    # a slave stuck behind for longer than MAX_TIME_NOT_CATCHUP_MS leaves the set again
    hb2 = Heartbeats(default_timeout_ms=10 * MAX_TIME_NOT_CATCHUP_MS)
    hb2.become_leader(0)
    hb2.beat("a", 1, "h:1", 0, epoch=1, max_offset=500)
    hb2.beat("a", 2, "h:2", 0, epoch=1, max_offset=500)
    assert hb2.decide(s, 0) == []
    hb2.beat("a", 1, "h:1", 1000, epoch=1, max_offset=900)
    assert hb2.decide(s, 1000) == []
    hb2.beat("a", 1, "h:1", MAX_TIME_NOT_CATCHUP_MS + 2000, epoch=1, max_offset=950)
    (shrink,) = hb2.decide(s, MAX_TIME_NOT_CATCHUP_MS + 2000)
    assert shrink["syncStateSet"] == [1]
    # the master's connection closes: dead at once, the in-sync slave is elected
    hb.beat("a", 1, "h:1", 400, epoch=1, max_offset=600, channel=master_channel)
    assert hb.channel_closed(master_channel)
    (e,) = hb.decide(s, 401)
    assert e["op"] == "elect" and e["alive"] == [2]
    assert s.apply(e).values["masterBrokerId"] == 2


def test_a_new_leader_gives_unknown_brokers_one_timeout() -> None:
    s = _group(2)
    s.apply({"op": "elect", "brokerName": "a", "brokerId": 1, "alive": [1, 2]})
    hb = Heartbeats(default_timeout_ms=1000)
    hb.become_leader(10_000)
    assert hb.decide(s, 10_500) == []
    (e,) = hb.decide(s, 11_500)
    assert e["op"] == "elect" and e["alive"] == []
