"""apache.rocketmq.v2.Admin on the broker's gRPC port: ChangeLogLevel, the one RPC of the
published admin.proto. Apache's proxy does not register this service (a call there is gRPC
UNIMPLEMENTED); rocketq serves it as what it says, the server's log level, guarded by the ACL as
the remoting UPDATE_BROKER_CONFIG (an admin account's operation: auth.py)."""

from __future__ import annotations

import logging
from typing import Any

from rocketq.broker.grpc.protocol import load_admin

log = logging.getLogger("rocketq.broker.grpc")

# The request names no logger: the whole process (the root logger) and rocketq's own tree, which
# the CLI may have given a level of its own. Python has no TRACE: DEBUG is the finest it logs.
LOGGERS = ("", "rocketq")
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
           "WARN": logging.WARNING, "ERROR": logging.ERROR}

_Servicer: Any = load_admin()[1].AdminServicer


class AdminService(_Servicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.m, _ = load_admin()

    async def ChangeLogLevel(self, request: Any, context: Any) -> Any:  # noqa: N802 - the RPC's name
        name = self.m.ChangeLogLevelRequest.Level.Name(request.level)
        level = _LEVELS[name]
        for logger in LOGGERS:
            logging.getLogger(logger).setLevel(level)
        log.warning("log level changed to %s by gRPC ChangeLogLevel from %s", name, context.peer())
        return self.m.ChangeLogLevelResponse(remark=f"log level changed to {logging.getLevelName(level)}")
