"""Name-server commands: getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig,
wipeWritePerm, addWritePerm."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, cell, kv_table, table
from rocketq.cli.errors import UsageError
from rocketq.config import check_updatable
from rocketq.errors import ConfigError
from rocketq.namesrv.config import NamesrvConfig

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def register(add: Adder) -> None:
    add("getNamesrvConfig", get_namesrv_config, "Show every name server's configuration")

    p = add("updateNamesrvConfig", update_namesrv_config, "Change one name server config key at runtime")
    p.add_argument("-k", "--key", required=True, help="config key (RocketMQ name)")
    p.add_argument("-v", "--value", required=True, help="config value")

    p = add("updateKvConfig", update_kv_config, "Create or update a name server KV config entry")
    p.add_argument("-s", "--namespace", required=True, help="namespace")
    p.add_argument("-k", "--key", required=True, help="key")
    p.add_argument("-v", "--value", required=True, help="value")

    p = add("deleteKvConfig", delete_kv_config, "Delete a name server KV config entry")
    p.add_argument("-s", "--namespace", required=True, help="namespace")
    p.add_argument("-k", "--key", required=True, help="key")

    p = add(
        "wipeWritePerm", wipe_write_perm, "Take write permission away from a broker (on every name server)"
    )
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")

    p = add("addWritePerm", add_write_perm, "Give a broker its write permission back (on every name server)")
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")


async def get_namesrv_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    configs = await admin.get_namesrv_config()
    return Result(configs, [kv_table(c, f"name server {addr}") for addr, c in configs.items()])


async def update_namesrv_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    try:  # path and command keys never change over the wire (CVE-2023-37582)
        check_updatable(args.key, (NamesrvConfig,))
    except ConfigError as exc:
        raise UsageError(f"updateNamesrvConfig: {exc}") from None
    await admin.update_namesrv_config({args.key: args.value})
    return Result(
        {"key": args.key, "value": args.value, "namesrvs": admin.namesrv_addrs},
        [cell(f"update name server config success, {a}") for a in admin.namesrv_addrs],
    )


async def update_kv_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    await admin.create_and_update_kv_config(args.namespace, args.key, args.value)
    data = {"namespace": args.namespace, "key": args.key, "value": args.value}
    return Result(data, [cell("update kv config in namespace success.")])


async def delete_kv_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    await admin.delete_kv_config(args.namespace, args.key)
    return Result(
        {"namespace": args.namespace, "key": args.key}, [cell("delete kv config from namespace success.")]
    )


async def wipe_write_perm(admin: AdminClient, args: argparse.Namespace) -> Result:
    counts = await admin.wipe_write_perm_of_broker(args.broker_name)
    return _perm_result("wipe", args.broker_name, counts)


async def add_write_perm(admin: AdminClient, args: argparse.Namespace) -> Result:
    counts = await admin.add_write_perm_of_broker(args.broker_name)
    return _perm_result("add", args.broker_name, counts)


def _perm_result(verb: str, broker: str, counts: dict[str, int]) -> Result:
    rows = [{"namesrvAddr": a, "topicCount": n} for a, n in counts.items()]
    t = table(
        ("Name Server", "Topics Changed"),
        [(r["namesrvAddr"], r["topicCount"]) for r in rows],
        f"{verb} write perm of broker [{broker}]",
    )
    return Result({"brokerName": broker, "namesrvs": rows}, [t])
