"""The ACL 1.0 permission model (Permission, PlainAccessResource, PlainPermissionManager.validate
and checkPerm), sans-I/O: plain values in, a refusal (``AclError``) or nothing out.

``AclRules.from_mapping`` reads what ``plain_acl.yml`` holds once parsed; ``AclRules.check``
decides one request, described by an ``AccessRequest`` (``resource.parse_request``).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.acl.address import AddressMatcher, address_matcher
from rocketq.acl.errors import AclError
from rocketq.acl.signature import HmacSha1
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import Body

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "AccessRequest",
    "AclRules",
    "PlainAccount",
    "check_permission",
    "parse_perm",
]

DENY: Final = 1
ANY: Final = 1 << 1
PUB: Final = 1 << 2
SUB: Final = 1 << 3

RETRY_PREFIX: Final = "%RETRY%"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
ACCESS_KEY_MIN_LENGTH: Final = 6
SECRET_KEY_MIN_LENGTH: Final = 6

# Permission.ADMIN_CODE (Java's five), plus what rocketq also keeps to admins: the list forms of
# those five, and the ACL changes and secrets themselves (4.9.8 lets any signed account change
# the ACL).
ADMIN_CODES: Final = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
    50,  # UPDATE_AND_CREATE_ACL_CONFIG
    51,  # DELETE_ACL_CONFIG
    53,  # UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
    54,  # GET_BROKER_CLUSTER_ACL_CONFIG: its answer holds every secret
    *range(3001, 3011),  # ACL 2.0's AUTH_CREATE_USER .. AUTH_LIST_ACL
})

_PERMS: Final = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def parse_perm(text: str | None) -> int:
    """Permission.parsePermFromString: anything unknown (or missing) is DENY."""
    if text is None:
        return DENY
    return _PERMS.get(str(text).strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def _resource_perms(items: Any, is_topic: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or ():
        name, eq, perm = str(item).partition("=")
        if not eq or not name.strip() or "=" in perm:
            raise AclError(
                f"Parse resource permission failed for {'topic' if is_topic else 'group'}:{item}")
        out[name.strip() if is_topic else retry_topic(name.strip())] = parse_perm(perm)
    return out


def check_resource_perms(items: Any) -> None:
    """Permission.checkResourcePerms: what an update request may say."""
    for item in items or ():
        _, eq, perm = str(item).partition("=")
        if not eq or "=" in perm:
            raise AclError(f"Parse Resource format error for {item}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        if perm.strip() != "DENY" and parse_perm(perm) == DENY:
            raise AclError(f"Parse resource permission error for {item}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


@dataclass(frozen=True, slots=True)
class PlainAccount:
    """One account of plain_acl.yml (PlainAccessConfig made into a PlainAccessResource)."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    # topic -> perm, and %RETRY%group -> perm (groups are kept as their retry topic, as Java does)
    perms: Mapping[str, int] = field(default_factory=dict)
    white: AddressMatcher = field(default=address_matcher(None), repr=False, compare=False)
    mac: HmacSha1 = field(default=HmacSha1(b""), repr=False, compare=False)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PlainAccount:
        """checkPlainAccessConfig + buildPlainAccessResource."""
        ak, sk = _text(raw.get("accessKey")), _text(raw.get("secretKey"))
        if ak is None or sk is None or len(ak) <= ACCESS_KEY_MIN_LENGTH or len(sk) <= SECRET_KEY_MIN_LENGTH:
            # Java prints the secret here; a secret in an error text ends up in logs, so not us.
            raise AclError(f"The accessKey={ak} and secretKey=*** cannot be null and length should "
                           "longer than 6")
        white = _text(raw.get("whiteRemoteAddress"))
        perms = _resource_perms(raw.get("groupPerms"), False)
        perms.update(_resource_perms(raw.get("topicPerms"), True))
        return cls(
            access_key=ak,
            secret_key=sk,
            white_remote_address=white,
            admin=_flag(raw.get("admin", False)),
            default_topic_perm=parse_perm(_text(raw.get("defaultTopicPerm"))),
            default_group_perm=parse_perm(_text(raw.get("defaultGroupPerm"))),
            perms=perms,
            white=address_matcher(white),
            mac=HmacSha1(sk.encode()),
        )


@dataclass(slots=True)
class AccessRequest:
    """What a request asks for (PlainAccessResource on the broker's side of parse)."""

    code: int
    remote_ip: str
    access_key: str | None = None
    signature: str | None = None
    # what was signed: the sorted ext-field values (signature.signed_head), then the body
    head: bytes = b""
    body: Body = b""
    # resource (topic, or %RETRY%group for a group) -> the permission needed
    needs: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclRules:
    """Global white list and accounts: one loaded plain_acl.yml."""

    global_white: tuple[AddressMatcher, ...] = ()
    global_white_addrs: tuple[str, ...] = ()
    accounts: Mapping[str, PlainAccount] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> AclRules:
        """The rules a parsed plain_acl.yml holds (an empty file allows only white-listed peers)."""
        if not data:
            return cls()
        addrs = tuple(str(a) for a in data.get("globalWhiteRemoteAddresses") or () if a is not None)
        accounts: dict[str, PlainAccount] = {}
        for raw in data.get("accounts") or ():
            if not isinstance(raw, Mapping):
                raise AclError(f"an account of plain_acl.yml is not a mapping: {type(raw).__name__}")
            account = PlainAccount.from_mapping(raw)
            accounts.setdefault(account.access_key, account)
        return cls(tuple(address_matcher(a) for a in addrs), addrs, accounts)

    def authenticate(self, req: AccessRequest) -> PlainAccount | None:
        """Who sent ``req``: None for a globally white-listed peer, else its account (whose
        signature was checked unless the account's own white list matched); ``AclError`` if nobody."""
        return self._authenticate(req)[0]

    def _authenticate(self, req: AccessRequest) -> tuple[PlainAccount | None, bool]:
        """(account, whether a white list let it in without its signature)."""
        ip = req.remote_ip
        for white in self.global_white:
            if white(ip):
                return None, True
        ak = req.access_key
        if ak is None:
            raise AclError("No accessKey is configured")
        owned = self.accounts.get(ak)
        if owned is None:
            raise AclError(f"No acl config for {ak}")
        if owned.white_remote_address and owned.white(ip):
            return owned, True
        signature = owned.mac.sign(req.head, req.body)
        if req.signature is None or not hmac.compare_digest(signature, req.signature):
            raise AclError(f"Check signature failed for accessKey={ak}")
        return owned, False

    def check(self, req: AccessRequest) -> None:
        """PlainPermissionManager.validate: return to let the request through, raise to refuse."""
        owned, white = self._authenticate(req)
        if white or owned is None:
            return
        if req.needs.get(TRACE_TOPIC) == PUB:
            return
        self._check_perm(req, owned)

    def authorize(self, req: AccessRequest, owned: PlainAccount) -> None:
        """checkPerm alone, for a caller that authenticated ``owned`` itself (gRPC's signature)."""
        if req.needs.get(TRACE_TOPIC) == PUB:
            return
        self._check_perm(req, owned)

    @staticmethod
    def _check_perm(req: AccessRequest, owned: PlainAccount) -> None:
        """PlainPermissionManager.checkPerm."""
        if req.code in ADMIN_CODES and not owned.admin:
            raise AclError(f"Need admin permission for request code={req.code}, "
                           f"but accessKey={owned.access_key} is not")
        if not req.needs:
            return
        perms = owned.perms
        if not perms and owned.admin:
            return
        for resource, needed in req.needs.items():
            is_group = resource.startswith(RETRY_PREFIX)
            have = perms.get(resource)
            if have is None:
                have = owned.default_group_perm if is_group else owned.default_topic_perm
            if not check_permission(needed, have):
                shown = f"group:{resource[len(RETRY_PREFIX):]}" if is_group else f"topic:{resource}"
                raise AclError(f"No default permission for {shown}")
