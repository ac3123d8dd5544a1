"""ACL 2.0 on the broker (RocketMQ 5.3): users and ACLs kept in ``<data-dir>/conf/acl2.json``, and
the admin codes AUTH_CREATE_USER (3001) .. AUTH_LIST_ACL (3010) with 5.3's headers and bodies
(UserInfo, AclInfo). Checking requests is ``acl/v2.py``; which model checks a request is
``broker/acl.py`` (a 1.0 account of plain_acl.yml first, then a 2.0 user)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.acl.errors import AclError
from rocketq.acl.v2 import AclPolicy, AuthRules, User
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.configfile import write_atomically
from rocketq.errors import ConfigError

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = ["Auth2AdminProcessor", "Auth2Store"]

log = logging.getLogger("rocketq.broker.acl")


class Auth2Store:
    """The users and ACLs of this broker, in memory and in one JSON file (rewritten on change)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rules = AuthRules()
        if path.exists():
            self.rules = AuthRules.from_mapping(orjson.loads(path.read_bytes()))

    def init_user(self, text: str) -> None:
        """initAuthenticationUser: the JSON user made a Super user unless one of its name exists
        (5.3's AuthenticationMetadataManagerImpl.initUser). A bad value stops the start."""
        try:
            info = orjson.loads(text)
            if not isinstance(info, dict):
                raise AclError("expected a JSON object")
            user = User.from_info({**info, "userType": "Super"})
        except (orjson.JSONDecodeError, AclError) as e:
            raise ConfigError(f"initAuthenticationUser: Init authentication user error: {e}") from None
        if user.username not in self.rules.users:
            self.put_user(user, create=True)
            log.info("initAuthenticationUser: created the super user %s", user.username)

    def _save(self, rules: AuthRules) -> None:
        write_atomically(self.path, orjson.dumps(rules.to_mapping(), option=orjson.OPT_INDENT_2))
        self.rules = rules

    def put_user(self, user: User, *, create: bool) -> None:
        known = user.username in self.rules.users
        if create and known:
            raise AclError(f"The user is existed: User:{user.username}")
        if not create and not known:
            raise AclError(f"The user is not exist: User:{user.username}")
        self._save(AuthRules({**self.rules.users, user.username: user}, self.rules.acls))

    def delete_user(self, username: str) -> None:
        users = {k: v for k, v in self.rules.users.items() if k != username}
        acls = {k: v for k, v in self.rules.acls.items() if k != f"User:{username}"}
        self._save(AuthRules(users, acls))

    def put_acl(self, acl: AclPolicy, *, create: bool) -> None:
        name = acl.subject.partition(":")[2]
        if name not in self.rules.users:
            raise AclError(f"The subject of {acl.subject} is not exist")
        old = self.rules.acls.get(acl.subject)
        if create and old is not None:
            raise AclError(f"The acl is existed: {acl.subject}")
        merged = acl if old is None else old.merged(acl)
        self._save(AuthRules(self.rules.users, {**self.rules.acls, acl.subject: merged}))

    def delete_acl(self, subject: str, resource: str | None) -> None:
        old = self.rules.acls.get(subject)
        if old is None:
            return
        acls = dict(self.rules.acls)
        left = old.without(resource)
        if left is None:
            del acls[subject]
        else:
            acls[subject] = left
        self._save(AuthRules(self.rules.users, acls))


class Auth2AdminProcessor:
    """AdminBrokerProcessor's createUser .. listAcl. Who may call them is the validator's part
    (AUTH_ADMIN_CODES: super users and ACL 1.0 admins)."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    def _store(self) -> Auth2Store | None:
        acl = getattr(self._ctl, "acl", None)
        return None if acl is None else acl.auth2

    def _run(self, request: RemotingCommand, action: Any) -> RemotingCommand:
        store = self._store()
        if store is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The broker does not enable acl")
        try:
            body = action(store)
        except (AclError, OSError, orjson.JSONDecodeError, AttributeError, TypeError) as e:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(e) or type(e).__name__)
        if body is None:
            return request.make_response(ResponseCode.SUCCESS)
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    @staticmethod
    def _info(request: RemotingCommand) -> dict[str, Any]:
        info = orjson.loads(request.body_bytes() or b"{}")
        if not isinstance(info, dict):
            raise AclError("The body is not a JSON object")
        return info

    def create_user(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._put_user(request, create=True)

    def update_user(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._put_user(request, create=False)

    def _put_user(self, request: RemotingCommand, *, create: bool) -> RemotingCommand:
        def act(store: Auth2Store) -> None:
            info = self._info(request)
            info["username"] = request.ext("username") or info.get("username")
            old = store.rules.users.get(str(info["username"]))
            if not create and old is not None:  # members not given keep their values
                info = {**old.to_info(), **{k: v for k, v in info.items() if v is not None}}
            store.put_user(User.from_info(info), create=create)
        return self._run(request, act)

    def delete_user(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._run(request, lambda store: store.delete_user(request.ext("username") or ""))

    def get_user(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        def act(store: Auth2Store) -> dict[str, Any]:
            user = store.rules.users.get(request.ext("username") or "")
            if user is None:
                raise AclError(f"The user is not exist: User:{request.ext('username')}")
            return user.to_info(with_password=False)
        return self._run(request, act)

    def list_user(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        flt = request.ext("filter") or ""
        return self._run(request, lambda store: [
            u.to_info(with_password=False) for u in store.rules.users.values() if flt in u.username])

    def create_acl(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._put_acl(request, create=True)

    def update_acl(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._put_acl(request, create=False)

    def _put_acl(self, request: RemotingCommand, *, create: bool) -> RemotingCommand:
        def act(store: Auth2Store) -> None:
            info = self._info(request)
            info["subject"] = request.ext("subject") or info.get("subject")
            store.put_acl(AclPolicy.from_info(info), create=create)
        return self._run(request, act)

    def delete_acl(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._run(request, lambda store: store.delete_acl(request.ext("subject") or "",
                                                                 request.ext("resource")))

    def get_acl(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        def act(store: Auth2Store) -> dict[str, Any]:
            acl = store.rules.acls.get(request.ext("subject") or "")
            if acl is None:
                raise AclError(f"The acl is not exist: {request.ext('subject')}")
            return acl.to_info()
        return self._run(request, act)

    def list_acl(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        subject, resource = request.ext("subjectFilter") or "", request.ext("resourceFilter") or ""

        def act(store: Auth2Store) -> list[dict[str, Any]]:
            return [a.to_info() for a in store.rules.acls.values() if subject in a.subject
                    and (not resource or any(resource in e.resource for e in a.custom + a.default))]
        return self._run(request, act)
