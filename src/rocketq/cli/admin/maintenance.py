"""Broker maintenance commands: cleanUnusedTopic, deleteExpiredCommitLog."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, cell
from rocketq.cli.admin.cluster import _brokers, _target
from rocketq.cli.errors import UsageError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def register(add: Adder) -> None:
    p = add("cleanUnusedTopic", clean_unused_topic, "Drop consume queues of topics a broker no longer has")
    _target(p, "every master of the cluster")

    p = add("deleteExpiredCommitLog", delete_expired_commit_log,
            "Delete commit-log files older than fileReservedTime now")
    _target(p, "every master of the cluster")


def _require_target(args: argparse.Namespace, command: str) -> None:
    if not args.broker_addr and not args.cluster:
        raise UsageError(f"{command}: one of -b/--brokerAddr or -c/--clusterName is required")


async def _each_broker(
    admin: AdminClient, args: argparse.Namespace, command: str, what: str,
    call: Callable[[str], Awaitable[None]],
) -> Result:
    _require_target(args, command)
    addrs = await _brokers(admin, args)
    for addr in addrs:
        await call(addr)
    return Result({"brokers": addrs, "success": True}, [cell(f"{what} success, {a}") for a in addrs])


async def clean_unused_topic(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each_broker(admin, args, "cleanUnusedTopic", "clean unused topic",
                              admin.clean_unused_topic)


async def delete_expired_commit_log(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each_broker(admin, args, "deleteExpiredCommitLog", "delete expired commit log",
                              admin.delete_expired_commit_log)
