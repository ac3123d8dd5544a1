"""ConditionLog: an expected, lasting condition is logged once, then only when it changes.

The client's periodic tasks (rebalance every 20 s, route refresh every 30 s, pulls) meet some
situations again and again while they last and that need nobody's action: a subscribed topic
not created yet, a group the broker does not know until the first heartbeat lands. Logging
them at every meeting filled stderr with WARNING lines; a ``ConditionLog`` says each once, at
INFO, per key (a topic, a group), again only when its state changes or after it ended and
came back. WARNING stays for what a user must act on.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

__all__ = ["ConditionLog"]


class ConditionLog:
    def __init__(self, logger: logging.Logger, level: int = logging.INFO) -> None:
        self._logger = logger
        self._level = level
        self._state: dict[Hashable, Hashable] = {}

    def report(self, key: Hashable, state: Hashable, msg: str, *args: object) -> None:
        """Log ``msg`` unless ``key`` is already known to be in ``state``."""
        if key in self._state and self._state[key] == state:
            return
        self._state[key] = state
        self._logger.log(self._level, msg, *args)

    def clear(self, key: Hashable) -> None:
        """The condition of ``key`` is over: its next occurrence is logged again."""
        if key in self._state:
            del self._state[key]

    def active(self, key: Hashable) -> bool:
        return key in self._state
