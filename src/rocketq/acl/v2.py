"""RocketMQ 5.3's ACL 2.0 model (RIP-68), sans-I/O: users (super or normal, enabled or disabled)
and, per subject, policies of entries (a resource pattern, actions, source IPs, Allow or Deny).

Requests are signed exactly as in ACL 1.0 (the user name is the AccessKey, the password the
secret). ``AuthRules.check`` authenticates (DefaultAuthenticationHandler) and authorizes
(UserAuthorizationHandler, then AclAuthorizationHandler): a super user may do anything; a normal
user needs, for every resource the request touches, a matching entry, and the most specific
matching entry decides (a literal name over a prefix, a longer prefix over a shorter one, a prefix
over ``*``; Deny over Allow at the same specificity). No matching entry is a refusal.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from rocketq.acl.address import AddressMatcher, address_matcher
from rocketq.acl.errors import AclError
from rocketq.acl.model import ADMIN_CODES, RETRY_PREFIX, AccessRequest
from rocketq.acl.signature import HmacSha1
from rocketq.codec.bodies.client import HeartbeatData
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand

__all__ = ["ACTIONS", "AUTH_ADMIN_CODES", "AclPolicy", "AuthRules", "PolicyEntry", "User", "contexts"]

ACTIONS: Final = ("Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All", "Any")
RESOURCE_TYPES: Final = ("Cluster", "Namespace", "Topic", "Group")
# AUTH_CREATE_USER .. AUTH_LIST_ACL: only super users (or ACL 1.0 admins) manage users and ACLs.
AUTH_ADMIN_CODES: Final = frozenset(range(3001, 3011))
UserType = Literal["Super", "Normal"]


def _title(text: str) -> str:
    return text[:1].upper() + text[1:].lower()


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str = field(repr=False)
    user_type: UserType = "Normal"
    enabled: bool = True
    mac: HmacSha1 = field(default=HmacSha1(b""), repr=False, compare=False)

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> User:
        """UserInfo's JSON: username, password, userType (Super/Normal), userStatus (enable/disable)."""
        name, password = info.get("username"), info.get("password")
        if not name or not isinstance(name, str):
            raise AclError("The username is blank")
        if not password or not isinstance(password, str):
            raise AclError(f"The password of User:{name} is blank")
        user_type = _title(str(info.get("userType") or "Normal"))
        if user_type not in ("Super", "Normal"):
            raise AclError(f"The userType of User:{name} is illegal: {info.get('userType')}")
        status = _title(str(info.get("userStatus") or "Enable"))
        if status not in ("Enable", "Disable"):
            raise AclError(f"The userStatus of User:{name} is illegal: {info.get('userStatus')}")
        return cls(name, password, user_type, status == "Enable", HmacSha1(password.encode()))  # type: ignore[arg-type]

    def to_info(self, *, with_password: bool = True) -> dict[str, Any]:
        info: dict[str, Any] = {"username": self.username, "userType": self.user_type,
                                "userStatus": "enable" if self.enabled else "disable"}
        if with_password:
            info["password"] = self.password
        return info


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    resource: str  # "Topic:orders", "Group:g-*", "Topic:*", "*"
    actions: frozenset[str]
    decision: Literal["Allow", "Deny"] = "Allow"
    source_ips: tuple[str, ...] = ()
    _ips: tuple[AddressMatcher, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def of(cls, resource: str, actions: Iterable[str], decision: str = "Allow",
           source_ips: Iterable[str] = ()) -> PolicyEntry:
        resource = resource.strip()
        kind, sep, _ = resource.partition(":")
        if resource != "*" and (not sep or _title(kind) not in RESOURCE_TYPES):
            raise AclError(f"The resource {resource} is illegal: Topic:<name>, Group:<name>, a trailing * "
                           "for a prefix, or *")
        if resource != "*":
            resource = f"{_title(kind)}:{resource.partition(':')[2]}"
        acts = frozenset(_title(a.strip()) for a in actions if a.strip())
        bad = sorted(a for a in acts if a not in ACTIONS)
        if not acts or bad:
            raise AclError(f"The actions {sorted(bad) or '[]'} are illegal: one or more of "
                           f"{', '.join(ACTIONS)}")
        dec = _title(decision.strip())
        if dec not in ("Allow", "Deny"):
            raise AclError(f"The decision {decision} is illegal: Allow or Deny")
        ips = tuple(ip.strip() for ip in source_ips if ip.strip())
        return cls(resource, acts, dec, ips, tuple(address_matcher(ip) for ip in ips))  # type: ignore[arg-type]

    def specificity(self) -> tuple[int, int]:
        """Larger is more specific: (2 literal / 1 prefix / 0 any, prefix length)."""
        if self.resource == "*":
            return (0, 0)
        name = self.resource.partition(":")[2]
        if name == "*":
            return (0, 1)
        if name.endswith("*"):
            return (1, len(name) - 1)
        return (2, 0)

    def matches(self, resource: str, actions: Iterable[str], ip: str) -> bool:
        if self.resource != "*":
            kind, _, pattern = self.resource.partition(":")
            rkind, _, rname = resource.partition(":")
            if kind != rkind:
                return False
            if pattern != "*" and not (rname.startswith(pattern[:-1]) if pattern.endswith("*")
                                       else rname == pattern):
                return False
        wanted = set(actions)
        if "Any" not in wanted and "All" not in self.actions and not wanted & self.actions:
            return False
        return not self._ips or any(m(ip) for m in self._ips)

    def to_info(self) -> dict[str, Any]:
        return {"resource": self.resource, "actions": sorted(self.actions),
                "sourceIps": list(self.source_ips), "decision": self.decision}


@dataclass(frozen=True, slots=True)
class AclPolicy:
    """The ACL of one subject ("User:alice"): CUSTOM entries, then DEFAULT ones when none matched."""

    subject: str
    custom: tuple[PolicyEntry, ...] = ()
    default: tuple[PolicyEntry, ...] = ()

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> AclPolicy:
        """AclInfo's JSON: subject, policies [{policyType, entries [{resource, actions, sourceIps,
        decision}]}]."""
        subject = info.get("subject")
        if not subject or not isinstance(subject, str) or not subject.startswith("User:"):
            raise AclError(f"The subject {subject} is illegal: User:<name>")
        custom: list[PolicyEntry] = []
        default: list[PolicyEntry] = []
        for policy in info.get("policies") or ():
            kind = str(policy.get("policyType") or "Custom").upper()
            target = default if kind == "DEFAULT" else custom
            for e in policy.get("entries") or ():
                target.append(PolicyEntry.of(str(e.get("resource") or ""), e.get("actions") or (),
                                             str(e.get("decision") or "Allow"), e.get("sourceIps") or ()))
        return cls(subject, tuple(custom), tuple(default))

    def merged(self, other: AclPolicy) -> AclPolicy:
        """UPDATE_ACL: the other's entries replace ours for the same resource, the rest are kept."""
        def merge(mine: tuple[PolicyEntry, ...], theirs: tuple[PolicyEntry, ...]) -> tuple[PolicyEntry, ...]:
            replaced = {e.resource for e in theirs}
            return tuple(e for e in mine if e.resource not in replaced) + theirs
        return AclPolicy(self.subject, merge(self.custom, other.custom), merge(self.default, other.default))

    def without(self, resource: str | None) -> AclPolicy | None:
        """DELETE_ACL: the entries of ``resource`` removed (None: everything)."""
        if not resource:
            return None
        left = AclPolicy(self.subject, tuple(e for e in self.custom if e.resource != resource),
                         tuple(e for e in self.default if e.resource != resource))
        return left if left.custom or left.default else None

    def to_info(self) -> dict[str, Any]:
        policies = []
        for kind, entries in (("CUSTOM", self.custom), ("DEFAULT", self.default)):
            if entries:
                policies.append({"policyType": kind, "entries": [e.to_info() for e in entries]})
        return {"subject": self.subject, "policies": policies}

    def decide(self, resource: str, actions: Iterable[str], ip: str) -> PolicyEntry | None:
        acts = tuple(actions)
        for entries in (self.custom, self.default):
            matched = [e for e in entries if e.matches(resource, acts, ip)]
            if matched:
                return max(matched, key=lambda e: (e.specificity(), e.decision == "Deny"))
        return None


def _group(name: str | None) -> str | None:
    if name is None:
        return None
    return "Group:" + (name[len(RETRY_PREFIX):] if name.startswith(RETRY_PREFIX) else name)


def _topic(name: str | None) -> str | None:
    return None if name is None else "Topic:" + name


def contexts(cmd: RemotingCommand) -> list[tuple[str, tuple[str, ...]]]:
    """DefaultAuthorizationContextBuilder: the (resource, actions) a request needs; none for codes
    that need only an authenticated user. ADMIN codes without a resource need ``Cluster`` Update."""
    ext = cmd.fields() or {}
    code = cmd.code
    out: list[tuple[str | None, tuple[str, ...]]] = []
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        topic = ext.get("topic" if code == RequestCode.SEND_MESSAGE else "b")
        group = ext.get("producerGroup" if code == RequestCode.SEND_MESSAGE else "a")
        if topic is not None and topic.startswith(RETRY_PREFIX):
            out.append((_group(group or topic), ("Sub",)))
        else:
            out.append((_topic(topic), ("Pub",)))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        out.append((_group(ext.get("group")), ("Sub",)))
    elif code == RequestCode.RECALL_MESSAGE:  # RecallMessageRequestHeader: @RocketMQAction PUB
        out.append((_topic(ext.get("topic")), ("Pub",)))
    elif code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):
        topic = ext.get("topic")
        if topic is not None and not topic.startswith(RETRY_PREFIX):
            out.append((_topic(topic), ("Sub",)))
        out.append((_group(ext.get("consumerGroup")), ("Sub",)))
    elif code == RequestCode.QUERY_MESSAGE:
        out.append((_topic(ext.get("topic")), ("Sub", "Get")))
    elif code == RequestCode.HEART_BEAT:
        for consumer in HeartbeatData.from_json(cmd.body_bytes()).consumer_data_set:
            out.append((_group(consumer.group_name), ("Sub",)))
            out += [(_topic(s.topic), ("Sub",)) for s in consumer.subscription_data_set
                    if not s.topic.startswith(RETRY_PREFIX)]
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        group = ext.get("consumerGroup")
        if group:
            out.append((_group(group), ("Sub", "Get") if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP
                        else ("Sub",)))
    elif code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET):
        query = code == RequestCode.QUERY_CONSUMER_OFFSET
        actions: tuple[str, ...] = ("Sub", "Get") if query else ("Sub", "Update")
        topic = ext.get("topic")
        if topic is not None and not topic.startswith(RETRY_PREFIX):
            out.append((_topic(topic), actions))
        out.append((_group(ext.get("consumerGroup")), actions))
    elif code in (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER):
        actions = ("Create", "Update") if code == RequestCode.UPDATE_AND_CREATE_TOPIC else ("Delete",)
        out.append((_topic(ext.get("topic")), actions))
    elif code == RequestCode.DELETE_SUBSCRIPTIONGROUP:
        out.append((_group(ext.get("groupName")), ("Delete",)))
    elif code in ADMIN_CODES:
        out.append(("Cluster:*", ("Update",)))
    return [(r, a) for r, a in out if r is not None]


@dataclass(frozen=True, slots=True)
class AuthRules:
    """Users and ACLs: one broker's ACL 2.0 metadata."""

    users: Mapping[str, User] = field(default_factory=dict)
    acls: Mapping[str, AclPolicy] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> AuthRules:
        data = data or {}
        users = {u.username: u for u in (User.from_info(i) for i in data.get("users") or ())}
        acls = {a.subject: a for a in (AclPolicy.from_info(i) for i in data.get("acls") or ())}
        return cls(users, acls)

    def to_mapping(self) -> dict[str, Any]:
        return {"users": [u.to_info() for u in self.users.values()],
                "acls": [a.to_info() for a in self.acls.values()]}

    def authenticate(self, req: AccessRequest) -> User:
        """DefaultAuthenticationHandler: the user whose password signed ``req``."""
        if not req.access_key:
            raise AclError("username cannot be null.")
        user = self.users.get(req.access_key)
        if user is None:
            raise AclError(f"User:{req.access_key} is not found.")
        if not user.enabled:
            raise AclError(f"User:{req.access_key} is disabled.")
        signature = user.mac.sign(req.head, req.body)
        if req.signature is None or not hmac.compare_digest(signature, req.signature):
            raise AclError("check signature failed.")
        return user

    def authorize(self, user: User, cmd: RemotingCommand, ip: str) -> None:
        if user.user_type == "Super":
            return
        if cmd.code in AUTH_ADMIN_CODES:
            raise AclError(f"User:{user.username} is not a super user: users and ACLs are managed by "
                           "super users")
        subject = f"User:{user.username}"
        acl = self.acls.get(subject)
        for resource, actions in contexts(cmd):
            entry = acl.decide(resource, actions, ip) if acl is not None else None
            if entry is None or entry.decision == "Deny":
                detail = "no matched policies." if entry is None else "the decision is deny."
                raise AclError(f"{subject} has no permission to access {resource} from {ip}, {detail}")
