"""RebalanceService: re-run every consumer's rebalance every 20 s, and at once when woken.

The MQClientInstance starts it with its first consumer and wakes it on NOTIFY_CONSUMER_IDS_CHANGED
(a consumer joined or left the group). A rebalance that could not finish its job (an orderly queue
whose broker lock is still held by the previous owner) asks for another round after
``min_interval`` instead of waiting the full period, which is what makes a group converge in about a
second after a change.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

__all__ = ["RebalanceService"]

log = logging.getLogger("rocketq.client")


def _env_ms(name: str, default: int) -> float:
    # RocketMQ reads these as JVM system properties; an environment variable is our equivalent.
    try:
        return int(os.environ.get(name, default)) / 1000.0
    except ValueError:
        return default / 1000.0


class RebalanceService:
    def __init__(
        self, instance: Any, wait_interval: float | None = None, min_interval: float | None = None
    ) -> None:
        self.instance = instance
        self.wait_interval = (
            wait_interval
            if wait_interval is not None
            else _env_ms("ROCKETMQ_CLIENT_REBALANCE_WAIT_INTERVAL", 20_000)
        )
        self.min_interval = (
            min_interval
            if min_interval is not None
            else _env_ms("ROCKETMQ_CLIENT_REBALANCE_MIN_INTERVAL", 1_000)
        )
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"RebalanceService-{getattr(self.instance, 'client_id', '')}"
            )

    def wakeup(self) -> None:
        self._wakeup.set()

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        log.info("RebalanceService service started")
        # Like Java, wait first: a starting consumer wakes us once its heartbeat reached the brokers
        # (a round before that would not find this client in the group yet).
        wait = self.wait_interval
        while True:
            if wait > 0:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancel that lands as
                # the event fires, and shutdown() then waits forever for this task.
                try:
                    async with asyncio.timeout(wait):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
            self._wakeup.clear()
            balanced = await self.rebalance_once()
            wait = self.wait_interval if balanced else self.min_interval

    async def rebalance_once(self) -> bool:
        """One round over every consumer of the instance; False if any is not balanced yet."""
        self.rounds += 1
        balanced = True
        for group, consumer in list(self.instance.consumer_table.items()):
            try:
                result = await consumer.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("doRebalance of group %s failed", group)
                result = False
            if result is False:
                balanced = False
        return balanced
