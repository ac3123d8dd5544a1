"""ACL commands with mqadmin's names and letters: updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr, clusterAclConfigVersion (ACL 1.0), and createUser .. listAcl (ACL 2.0,
RocketMQ 5.3). Each goes to one broker (-b) or every master of a cluster (-c); brokers keep their
own ACL files, so a cluster-wide change is one request per broker."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rocketq.cli.admin._common import Adder, Result, bool_arg, cell, kv_table, table
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
    _register_v2(add)


def _register_v2(add: Adder) -> None:
    """ACL 2.0 (RocketMQ 5.3's mqadmin createUser .. listAcl)."""
    for name, handler, text in (("createUser", create_user, "Create an ACL 2.0 user"),
                                ("updateUser", update_user, "Update an ACL 2.0 user")):
        p = add(name, handler, text)
        _target(p, "every master of the cluster")
        p.add_argument("-u", "--username", required=True)
        p.add_argument("-p", "--password", required=name == "createUser")
        p.add_argument("-t", "--userType", dest="user_type", help="Super or Normal (default Normal)")
        if name == "updateUser":
            p.add_argument("-s", "--userStatus", dest="user_status", help="enable or disable")
    for name, handler, text in (("deleteUser", delete_user, "Delete an ACL 2.0 user and its ACL"),
                                ("getUser", get_user, "Show an ACL 2.0 user")):
        p = add(name, handler, text)
        _target(p, "every master of the cluster")
        p.add_argument("-u", "--username", required=True)
    p = add("listUser", list_user, "List ACL 2.0 users")
    _target(p, "every master of the cluster")
    p.add_argument("-f", "--filter", default="", help="only user names containing this")
    for name, handler, text in (("createAcl", create_acl, "Create a user's ACL 2.0 policy"),
                                ("updateAcl", update_acl, "Update a user's ACL 2.0 policy")):
        p = add(name, handler, text)
        _target(p, "every master of the cluster")
        p.add_argument("-s", "--subject", required=True, help="User:<name>")
        p.add_argument("-r", "--resources", required=True, help="Topic:orders,Group:g-*,Topic:*,*")
        p.add_argument("-a", "--actions", required=True, help="Pub,Sub,Create,Update,Delete,Get,List,All")
        p.add_argument("-i", "--sourceIp", dest="source_ip", default="", help="192.168.0.*,10.0.0.1")
        p.add_argument("-d", "--decision", default="Allow", help="Allow or Deny (default Allow)")
    p = add("deleteAcl", delete_acl, "Delete a user's ACL 2.0 policy (or one resource of it)")
    _target(p, "every master of the cluster")
    p.add_argument("-s", "--subject", required=True, help="User:<name>")
    p.add_argument("-r", "--resources", default="", help="only this resource's entries")
    p = add("getAcl", get_acl, "Show a user's ACL 2.0 policy")
    _target(p, "every master of the cluster")
    p.add_argument("-s", "--subject", required=True, help="User:<name>")
    p = add("listAcl", list_acl, "List ACL 2.0 policies")
    _target(p, "every master of the cluster")
    p.add_argument("-s", "--subject", default="", help="only subjects containing this")
    p.add_argument("-r", "--resource", default="", help="only policies with a resource containing this")


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


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


async def _each(admin: AdminClient, args: argparse.Namespace, name: str,
                call: Callable[[str], Awaitable[Any]]) -> Result:
    addrs = await _targets(admin, args, name)
    results = {addr: await call(addr) for addr in addrs}
    if all(v is None for v in results.values()):
        return Result({"brokers": addrs}, [cell(f"{name} to {a} success.") for a in addrs])
    views = [kv_table(v, a) if isinstance(v, dict) else cell(f"{a}: {v}") for a, v in results.items()]
    return Result(results, views)


async def create_user(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "createUser", lambda a: admin.create_user(
        a, args.username, args.password, args.user_type or "Normal"))


async def update_user(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "updateUser", lambda a: admin.update_user(
        a, args.username, password=args.password, user_type=args.user_type, user_status=args.user_status))


async def delete_user(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "deleteUser", lambda a: admin.delete_user(a, args.username))


async def get_user(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "getUser", lambda a: admin.get_user(a, args.username))


async def list_user(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "listUser", lambda a: admin.list_user(a, args.filter))


async def create_acl(admin: AdminClient, args: argparse.Namespace, update: bool = False) -> Result:
    return await _each(admin, args, "updateAcl" if update else "createAcl", lambda a: admin.create_acl(
        a, args.subject, _split(args.resources), _split(args.actions), args.decision,
        _split(args.source_ip), update=update))


async def update_acl(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await create_acl(admin, args, update=True)


async def delete_acl(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "deleteAcl", lambda a: admin.delete_acl(a, args.subject, args.resources))


async def get_acl(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "getAcl", lambda a: admin.get_acl(a, args.subject))


async def list_acl(admin: AdminClient, args: argparse.Namespace) -> Result:
    return await _each(admin, args, "listAcl", lambda a: admin.list_acl(a, args.subject, args.resource))
