"""SyncAdminClient: the blocking admin API, the asyncio AdminClient run on rocketq's shared
background loop (``rocketq.client._sync``), for scripts, notebooks and the CLI.

::

    from rocketq.admin import SyncAdminClient

    with SyncAdminClient("127.0.0.1:9876") as admin:
        admin.create_topic("Orders", cluster="DefaultCluster")
        print(admin.examine_topic_stats("Orders"))

Every coroutine method of :class:`AdminClient` is here with the same name and arguments and
blocks for its result (an async-iterator method, such as ``read_queue``, returns a list); other
attributes are passed through.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

from rocketq.admin._base import DEFAULT_TIMEOUT
from rocketq.admin.client import AdminClient
from rocketq.client import _sync

__all__ = ["SyncAdminClient"]


class SyncAdminClient:
    """Blocking :class:`AdminClient`; ``aio`` is the asyncio client underneath (started on first use)."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        instance_name: str | None = None,
        **security: Any,
    ) -> None:
        """``security``: AdminClient's ``credentials``, ``tls``, ``tls_ca_file``, ``tls_verify``."""
        self.aio = AdminClient(namesrv_addr, timeout=timeout, instance_name=instance_name, **security)
        self._started = False

    def __repr__(self) -> str:
        return f"SyncAdminClient({';'.join(self.aio.namesrv_addrs)})"

    def start(self) -> None:
        _sync.run_sync(self.aio.start())
        self._started = True

    def shutdown(self) -> None:
        if self._started:
            self._started = False
            _sync.run_sync(self.aio.shutdown())

    def __enter__(self) -> SyncAdminClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if inspect.isasyncgenfunction(attr):
            gen_fn = attr

            async def collect(*args: Any, **kwargs: Any) -> list[Any]:
                return [item async for item in gen_fn(*args, **kwargs)]

            attr = functools.wraps(gen_fn)(collect)
        elif not inspect.iscoroutinefunction(attr):
            return attr
        fn = attr

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self._started:
                self.start()
            # No overall deadline: every request of the operation has its own timeout.
            return _sync.run_sync(fn(*args, **kwargs))

        return call

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(n for n in dir(self.aio) if not n.startswith("_"))})
