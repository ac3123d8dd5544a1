"""ACL commands: updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion
(mqadmin's names and option letters). Each goes to one broker (-b) or every master of a cluster
(-c); brokers keep their own plain_acl.yml, so a cluster-wide change is one request per broker."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rocketq.cli.admin._common import Adder, Result, bool_arg, cell, table
from rocketq.cli.admin.cluster import _brokers, _target
from rocketq.cli.errors import UsageError

if TYPE_CHECKING:
    from rocketq.admin import AdminClient


def register(add: Adder) -> None:
    p = add("updateAclConfig", update_acl_config, "Create or update an ACL account in brokers' plain_acl.yml")
    _target(p, "every master of the cluster")
    p.add_argument("-a", "--accessKey", dest="access_key", required=True, help="the account's access key")
    p.add_argument("-s", "--secretKey", dest="secret_key", help="its secret key (required for a new account)")
    p.add_argument("-w", "--whiteRemoteAddress", dest="white", help="addresses that need no signature")
    p.add_argument("-i", "--defaultTopicPerm", dest="default_topic_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-u", "--defaultGroupPerm", dest="default_group_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-t", "--topicPerms", dest="topic_perms", help="topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", dest="group_perms", help="groupA=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", type=bool_arg, metavar="true|false", help="an admin account")

    p = add("deleteAclConfig", delete_acl_config, "Delete an ACL account from brokers' plain_acl.yml")
    _target(p, "every master of the cluster")
    p.add_argument("-a", "--accessKey", dest="access_key", required=True, help="the account to delete")

    p = add("updateGlobalWhiteAddr", update_global_white_addr, "Replace brokers' global ACL white list")
    _target(p, "every master of the cluster")
    p.add_argument("-g", "--globalWhiteRemoteAddresses", dest="addrs", required=True,
                   help="10.10.103.*,192.168.0.*")
    p.add_argument("-p", "--aclFileFullPath", dest="path", help=argparse.SUPPRESS)

    p = add("clusterAclConfigVersion", cluster_acl_config_version, "Show brokers' ACL file versions")
    _target(p, "every master of the cluster")


async def _targets(admin: AdminClient, args: argparse.Namespace, name: str) -> list[str]:
    if not args.broker_addr and not args.cluster:
        raise UsageError(f"{name}: one of -b/--brokerAddr or -c/--clusterName is required")
    return await _brokers(admin, args)


async def update_acl_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    config = {
        "accessKey": args.access_key, "secretKey": args.secret_key, "whiteRemoteAddress": args.white,
        "defaultTopicPerm": args.default_topic_perm, "defaultGroupPerm": args.default_group_perm,
        "topicPerms": args.topic_perms, "groupPerms": args.group_perms, "admin": args.admin,
    }
    addrs = await _targets(admin, args, "updateAclConfig")
    for addr in addrs:
        await admin.create_and_update_plain_access_config(addr, config)
    # Never echo the secret: this output ends up in terminals and logs.
    return Result({"accessKey": args.access_key, "brokers": addrs},
                  [cell(f"update plain access config to {a} success.") for a in addrs])


async def delete_acl_config(admin: AdminClient, args: argparse.Namespace) -> Result:
    addrs = await _targets(admin, args, "deleteAclConfig")
    for addr in addrs:
        await admin.delete_plain_access_config(addr, args.access_key)
    return Result({"accessKey": args.access_key, "brokers": addrs},
                  [cell(f"delete plain access config account from {a} success.") for a in addrs])


async def update_global_white_addr(admin: AdminClient, args: argparse.Namespace) -> Result:
    if args.path:
        raise UsageError("updateGlobalWhiteAddr: -p is not supported: a broker has one ACL file")
    addrs = await _targets(admin, args, "updateGlobalWhiteAddr")
    white = [a.strip() for a in args.addrs.split(",") if a.strip()]
    for addr in addrs:
        await admin.update_global_white_addr_config(addr, white)
    return Result({"globalWhiteRemoteAddresses": white, "brokers": addrs},
                  [cell(f"update global white remote addresses to {a} success.") for a in addrs])


async def cluster_acl_config_version(admin: AdminClient, args: argparse.Namespace) -> Result:
    rows, data = [], []
    for addr in await _targets(admin, args, "clusterAclConfigVersion"):
        info = await admin.examine_broker_cluster_acl_version_info(addr)
        version = info.get("version") or {}
        data.append(info)
        rows.append((info.get("clusterName"), info.get("brokerName"), addr,
                     version.get("counter"), version.get("timestamp")))
    return Result(data, [table(("#Cluster Name", "#Broker Name", "#Broker Addr", "#Counter", "#Timestamp"),
                               rows)])
