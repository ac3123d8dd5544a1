"""The controller's state replicated by Raft: pysyncobj (PyPI) runs the consensus, we only feed it
commands. pysyncobj ticks in its own thread and calls `_command` there, in log order, on every
controller; asyncio callers await `propose`, which resolves once the command is committed and
applied here (on the leader) and carries the state machine's `Result`.

Peers are the controllers' remoting addresses; each controller's Raft port is its remoting port + 1
(as a broker's HA port is listenPort + 1), so the leader's remoting address follows from Raft's.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

from rocketq.controller.state import NOT_LEADER, ControllerState, Result

__all__ = ["ControllerRaft", "raft_addr", "remoting_addr"]


def raft_addr(remoting: str) -> str:
    host, _, port = remoting.rpartition(":")
    return f"{host}:{int(port) + 1}"


def remoting_addr(raft: str) -> str:
    host, _, port = raft.rpartition(":")
    return f"{host}:{int(port) - 1}"


class ControllerRaft(SyncObj):  # type: ignore[misc]
    # Guards the state between pysyncobj's thread and the event loop. A class attribute, not an
    # instance one: pysyncobj pickles the instance attributes set before its __init__.
    lock = threading.RLock()

    def __init__(self, self_addr: str, peers: list[str], data_dir: str | None = None) -> None:
        # Attributes set before SyncObj.__init__ are what pysyncobj snapshots: the state only.
        self.state = ControllerState()
        journal = dump = None
        if data_dir:
            os.makedirs(data_dir, exist_ok=True)
            journal = os.path.join(data_dir, "raft.journal")
            dump = os.path.join(data_dir, "raft.dump")
        conf = SyncObjConf(
            dynamicMembershipChange=False, connectionRetryTime=1.0, leaderFallbackTimeout=5.0,
            journalFile=journal, fullDumpFile=dump, commandsWaitLeader=False)
        self_raft = raft_addr(self_addr)
        others = [raft_addr(p) for p in peers if raft_addr(p) != self_raft]
        super().__init__(self_raft, others, conf)

    @replicated  # type: ignore[untyped-decorator]
    def _command(self, command: dict[str, Any]) -> Result:
        with self.lock:
            return self.state.apply(command)

    # -- asyncio side ---------------------------------------------------------------------------

    async def propose(self, command: dict[str, Any], timeout: float = 3.0) -> Result:
        """Replicate `command`; NOT_LEADER when this controller cannot commit it."""
        if not self.is_leader:
            return Result(NOT_LEADER, "this controller is not the leader")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Result] = loop.create_future()

        def done(result: Any, error: Any) -> None:
            def settle() -> None:
                if fut.done():
                    return
                if error == FAIL_REASON.SUCCESS and isinstance(result, Result):
                    fut.set_result(result)
                else:
                    fut.set_result(Result(NOT_LEADER, f"the command was not committed (reason {error})"))
            loop.call_soon_threadsafe(settle)

        self._command(command, callback=done)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return Result(NOT_LEADER, "the command was not committed in time")

    @property
    def is_leader(self) -> bool:
        return bool(self._isLeader())

    @property
    def leader_addr(self) -> str | None:
        """The leader's remoting address, when one is known."""
        leader = self._getLeader()
        if not leader:
            return None
        return remoting_addr(str(getattr(leader, "address", leader)))

    def read(self) -> ControllerState:
        """The state for a reader on another thread; hold `lock` while using it."""
        return self.state

    def close(self) -> None:
        self.destroy()
