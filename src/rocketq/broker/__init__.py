"""The broker: topics split into queues over one commit-log store (DESIGN.md "Broker").

`BrokerController` is the entry point; it is imported lazily so that importing one manager
does not pull in the transport and the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = ["BrokerController"]


def __getattr__(name: str) -> Any:
    if name == "BrokerController":
        from rocketq.broker.controller import BrokerController

        return BrokerController
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
