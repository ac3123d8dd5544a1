"""The gRPC (apache.rocketmq.v2) request signature, sans-I/O.

A 5.x client sends ``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
Signature=<sig>`` and ``x-mq-date-time: <yyyyMMdd'T'HHmmss'Z'>``; the signature is the lowercase hex
of HmacSHA1(secret key, the date-time value), as the clients' Signature classes and Apache's
proxy (AuthenticationHeader, DefaultAuthenticationHandler) compute it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Final

from rocketq.acl.errors import AclError

__all__ = ["ALGORITHM", "AUTHORIZATION", "DATE_TIME", "GrpcAuthorization", "grpc_signature",
           "parse_authorization", "verify_grpc_signature"]

AUTHORIZATION: Final = "authorization"
DATE_TIME: Final = "x-mq-date-time"
ALGORITHM: Final = "MQv2-HMAC-SHA1"


@dataclass(frozen=True, slots=True)
class GrpcAuthorization:
    access_key: str
    signed_headers: tuple[str, ...]
    signature: str


def parse_authorization(value: str | None) -> GrpcAuthorization:
    """The header's parts; ``AclError`` (with no secret in it) when it is missing or malformed."""
    if not value:
        raise AclError("authorization header is missing")
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise AclError(f"authorization algorithm {algorithm!r} is not supported, only {ALGORITHM}")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, val = item.strip().partition("=")
        if eq:
            parts[key.strip()] = val.strip()
    # Credential may carry a scope after the key (ak/...): the access key is its first part
    ak = parts.get("Credential", "").split("/", 1)[0]
    signature = parts.get("Signature", "")
    if not ak or not signature:
        raise AclError("authorization header has no Credential or no Signature")
    headers = tuple(h.strip().lower() for h in parts.get("SignedHeaders", "").split(";") if h.strip())
    return GrpcAuthorization(ak, headers, signature)


def grpc_signature(secret_key: str, date_time: str) -> str:
    """Hex(HmacSHA1(secret key, x-mq-date-time)), lowercase."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def verify_grpc_signature(auth: GrpcAuthorization, secret_key: str, date_time: str | None) -> None:
    """Raise ``AclError`` unless ``auth`` was signed with ``secret_key`` (compared in constant time)."""
    if not date_time:
        raise AclError("datetime is null.")
    expected = grpc_signature(secret_key, date_time)
    if not hmac.compare_digest(expected, auth.signature.lower()):
        raise AclError(f"Check signature failed for accessKey={auth.access_key}")
