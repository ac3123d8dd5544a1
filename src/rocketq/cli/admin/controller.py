"""Controller commands (RocketMQ 5 controller mode, mqadmin 5.x): getControllerMetaData,
getSyncStateSet, electMaster, cleanBrokerMetadata, getControllerConfig, updateControllerConfig.

They talk to the controllers (``-a``, a list allowed); the name server (``-n``) is needed only to
find a cluster's groups (``getSyncStateSet -c``).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, kv_table, positive, table
from rocketq.cli.errors import UsageError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient
    from rocketq.admin.controllers import GroupReplicas, ReplicaIdentity


def _controller(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--controllerAddress", dest="controller_addr", required=True, metavar="ADDR",
                   help="a controller's host:port (or several, 'a:9878;b:9878')")


def _broker_ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(";") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a ';' list of broker ids (e.g. 1;2;3)") from None


def register(add: Adder) -> None:
    p = add("getControllerMetaData", get_controller_meta_data, "Show the controllers' leader and peers")
    _controller(p)

    p = add("getSyncStateSet", get_sync_state_set,
            "Show each broker group's master, epochs and SyncStateSet (controller mode)")
    _controller(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("-b", "--brokerName", dest="broker_name", help="this broker group (default: every group)")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every group of this cluster (needs -n)")
    p.add_argument("-i", "--interval", type=positive, help="repeat every N seconds (Ctrl-C stops)")

    p = add("electMaster", elect_master, "Make a broker of a group its master (one in the SyncStateSet)")
    _controller(p)
    p.add_argument("-b", "--brokerId", dest="broker_id", type=int, required=True, help="the broker to elect")
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True, help="its broker group")
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="its cluster")

    p = add("cleanBrokerMetadata", clean_broker_metadata, "Make the controllers forget a group or members")
    _controller(p)
    p.add_argument("-b", "--brokerControllerIdsToClean", dest="broker_ids", type=_broker_ids, metavar="1;2",
                   help="only these members (default: the whole group)")
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True, help="the broker group")
    p.add_argument("-c", "--clusterName", dest="cluster", help="its cluster (required without -l)")
    p.add_argument("-l", "--cleanLivingBroker", dest="clean_living", action="store_true",
                   help="clean members that are alive too")

    p = add("getControllerConfig", get_controller_config, "Show each controller's settings")
    _controller(p)

    p = add("updateControllerConfig", update_controller_config, "Change a controller setting at runtime")
    _controller(p)
    p.add_argument("-k", "--key", required=True, help="the setting (enableElectUncleanMaster)")
    p.add_argument("-v", "--value", required=True, help="its value")


async def get_controller_meta_data(admin: AdminClient, args: argparse.Namespace) -> Result:
    meta = await admin.get_controller_meta_data(args.controller_addr)
    data = {"group": meta.group, "controllerLeaderId": meta.leader_id,
            "controllerLeaderAddress": meta.leader_address, "isLeader": meta.is_leader,
            "peers": list(meta.peers)}
    shown = {"#ControllerGroup": meta.group, "#ControllerLeaderId": meta.leader_id,
             "#ControllerLeaderAddress": meta.leader_address or "(none: an election is under way)"}
    shown.update({f"#Peer {i + 1}": peer for i, peer in enumerate(meta.peers)})
    return Result(data, [kv_table(shown, f"controllers via {args.controller_addr}")])


def _group_data(g: GroupReplicas) -> dict[str, object]:
    def ids(rows: tuple[ReplicaIdentity, ...]) -> list[dict[str, object]]:
        return [{"brokerName": r.broker_name, "brokerId": r.broker_id, "brokerAddress": r.broker_address,
                 "alive": r.alive} for r in rows]

    return {"masterBrokerId": g.master_broker_id, "masterAddress": g.master_address,
            "masterEpoch": g.master_epoch, "syncStateSetEpoch": g.sync_state_set_epoch,
            "inSyncReplicas": ids(g.in_sync), "notInSyncReplicas": ids(g.not_in_sync)}


async def get_sync_state_set(admin: AdminClient, args: argparse.Namespace) -> Result:
    names: list[str] = []
    if args.broker_name:
        names = [args.broker_name]
    elif args.cluster:
        info = await admin.examine_broker_cluster_info()
        found = info.cluster_addr_table.get(args.cluster)
        if found is None:
            raise UsageError(f"cluster [{args.cluster}] not found")
        names = sorted(found)
    while True:
        groups = await admin.get_sync_state_data(args.controller_addr, names)
        data = {name: _group_data(g) for name, g in groups.items()}
        views = []
        for name, g in groups.items():
            views.append(kv_table({
                "#brokerName": name,
                "#MasterBrokerId": "" if g.master_broker_id is None else g.master_broker_id,
                "#MasterAddr": g.master_address, "#MasterEpoch": g.master_epoch,
                "#SyncStateSetEpoch": g.sync_state_set_epoch, "#SyncStateSetNums": len(g.in_sync)}))
            rows = [("InSyncReplica", r.broker_id, r.broker_address, r.alive) for r in g.in_sync]
            rows += [("NotInSyncReplica", r.broker_id, r.broker_address, r.alive) for r in g.not_in_sync]
            views.append(table(("#Replica", "#BrokerId", "#BrokerAddress", "#Alive"), rows))
        if not groups:
            wanted = ", ".join(names) if names else "any broker group"
            views.append(kv_table({"#Groups": f"the controllers know no {wanted}"}))
        result = Result({"replicasInfoTable": data}, views)
        if not args.interval:
            return result
        from rocketq.cli.admin import emit

        emit(result, as_json=args.json)
        await asyncio.sleep(args.interval)


async def elect_master(admin: AdminClient, args: argparse.Namespace) -> Result:
    r = await admin.elect_master(args.controller_addr, args.cluster, args.broker_name, args.broker_id)
    data = {"clusterName": args.cluster, "brokerName": args.broker_name, "masterBrokerId": r.master_broker_id,
            "masterAddress": r.master_address, "masterEpoch": r.master_epoch,
            "syncStateSetEpoch": r.sync_state_set_epoch,
            "brokerAddrs": {str(k): v for k, v in r.broker_addrs.items()}}
    shown = {"#ClusterName": args.cluster, "#BrokerName": args.broker_name,
             "#BrokerMasterAddr": r.master_address, "#MasterEpoch": r.master_epoch,
             "#SyncStateSetEpoch": r.sync_state_set_epoch}
    views = [kv_table(shown, f"{args.broker_name}: broker {args.broker_id} elected")]
    if r.broker_addrs:
        views.append(table(("#BrokerId", "#Broker"), sorted(r.broker_addrs.items())))
    return Result(data, views)


async def clean_broker_metadata(admin: AdminClient, args: argparse.Namespace) -> Result:
    if not args.clean_living and not args.cluster:
        raise UsageError("cleanBrokerMetadata: -c/--clusterName is required without -l/--cleanLivingBroker")
    await admin.clean_controller_broker_data(args.controller_addr, args.cluster, args.broker_name,
                                             args.broker_ids, args.clean_living)
    which = f"members {args.broker_ids} of " if args.broker_ids else ""
    text = f"clear broker {which}{args.broker_name} metadata from controller success!"
    return Result({"brokerName": args.broker_name, "brokerIds": args.broker_ids or [], "cleaned": True},
                  [kv_table({"#Result": text})])


async def get_controller_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    configs = await admin.get_controller_config(args.controller_addr)
    views = [kv_table(props, f"controller {addr}") for addr, props in configs.items()]
    return Result(configs, views)


async def update_controller_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    await admin.update_controller_config(args.controller_addr, {args.key: args.value})
    text = f"update controller config success! {args.key}={args.value} on {args.controller_addr}"
    return Result({"key": args.key, "value": args.value, "controllers": args.controller_addr},
                  [kv_table({"#Result": text})])
