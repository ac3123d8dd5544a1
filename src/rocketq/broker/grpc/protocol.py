"""The apache.rocketmq.v2 message classes, compiled from the .proto files beside this module when
the broker first needs them (grpcio-tools, in process: nothing generated is kept in the repo)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

PROTO_ROOT = Path(__file__).with_name("proto")


@functools.cache
def load() -> tuple[ModuleType, ModuleType, ModuleType]:
    """(definition, service messages, service stubs): each module compiled once per process."""
    import grpc

    root = str(PROTO_ROOT)
    sys.path.insert(0, root)  # protoc resolves the imports between our files from sys.path
    try:
        definition = grpc.protos("apache/rocketmq/v2/definition.proto")
        service, stubs = grpc.protos_and_services("apache/rocketmq/v2/service.proto")
    finally:
        sys.path.remove(root)
    return definition, service, stubs


@functools.cache
def load_admin() -> tuple[ModuleType, ModuleType]:
    """(messages, stubs) of apache.rocketmq.v2.Admin (admin.proto), compiled once per process."""
    import grpc

    root = str(PROTO_ROOT)
    sys.path.insert(0, root)
    try:
        return grpc.protos_and_services("apache/rocketmq/v2/admin.proto")  # type: ignore[no-any-return]
    finally:
        sys.path.remove(root)


def code(name: str) -> int:
    """An apache.rocketmq.v2.Code value by its name."""
    return int(load()[0].Code.Value(name))


def status(pb: Any, name: str, message: str = "") -> Any:
    return pb.Status(code=pb.Code.Value(name), message=message or name)
