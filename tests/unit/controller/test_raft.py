"""Three pysyncobj controllers in one process: commands reach every state, and a leader lost
leaves two that still commit."""

from __future__ import annotations

import asyncio
import time

from tests.harness import free_port_pair

from rocketq.controller.raft import ControllerRaft


def _wait(pred: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _leader(nodes: list[ControllerRaft]) -> ControllerRaft:
    _wait(lambda: any(n.is_leader for n in nodes))
    return next(n for n in nodes if n.is_leader)


def test_three_controllers_replicate_and_survive_one_loss() -> None:
    peers = [f"127.0.0.1:{free_port_pair()}" for _ in range(3)]
    nodes = [ControllerRaft(p, peers) for p in peers]
    try:
        leader = _leader(nodes)
        assert leader.leader_addr in peers
        apply_id = {"op": "apply_broker_id", "cluster": "c", "brokerName": "a", "brokerId": 1,
                    "checkCode": "x"}
        result = asyncio.run(leader.propose(apply_id))
        assert result.ok
        _wait(lambda: all("a" in n.state.groups for n in nodes))
        follower = next(n for n in nodes if n is not leader)
        assert asyncio.run(follower.propose(apply_id)).code == 2007  # only the leader commits
        leader.destroy_synchronous()
        rest = [n for n in nodes if n is not leader]
        new_leader = _leader(rest)
        register = {"op": "register", "brokerName": "a", "brokerId": 1, "address": "h:1"}
        _wait(lambda: asyncio.run(new_leader.propose(register)).ok, 30)
        _wait(lambda: all(n.state.groups["a"].brokers == {1: "h:1"} for n in rest))
    finally:
        for n in nodes:
            n.destroy_synchronous()
