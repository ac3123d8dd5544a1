"""RocketMQ ACL 1.0 request signatures (AclUtils, AclSigner, AclClientRPCHook), sans-I/O.

The signed content is the values of every ext-field sorted by key (``Signature`` and the
``_UNIQUE_KEY_QUERY`` flag left out, as PlainAccessValidator.parse leaves them out) followed by
the body; the signature is Base64(HmacSHA1(secretKey, content)). Both the broker's check and the
client's signing call ``request_content`` so that the two can never disagree.
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass, field
from typing import Final

from rocketq.codec.command import Body, RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "RequestSigner",
    "SessionCredentials",
    "cal_signature",
    "request_content",
]

# SessionCredentials' ext-field names.
ACCESS_KEY: Final = "AccessKey"
SECRET_KEY: Final = "SecretKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
# MixAll.UNIQUE_MSG_QUERY_FLAG: the broker leaves it out of the signed content.
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"
_UNSIGNED: Final = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG)


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An access key and its secret (and an optional STS token), as RocketMQ's client takes them.

    The secret never appears in ``repr`` (so never in a log line or a traceback).
    """

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("SessionCredentials needs a non-empty access_key and secret_key")


def request_content(fields: dict[str, str] | None, body: Body) -> bytes:
    """AclUtils.combineRequestContent: sorted ext-field values, then the body."""
    head = "".join([v for k, v in sorted(fields.items()) if k not in _UNSIGNED]).encode() if fields else b""
    if not body:
        return head
    if isinstance(body, bytes | bytearray | memoryview):
        return head + body
    return head + b"".join(body)


def cal_signature(content: bytes, secret_key: bytes | str) -> str:
    """AclSigner.calSignature: Base64(HmacSHA1(secret, content))."""
    key = secret_key.encode() if isinstance(secret_key, str) else secret_key
    return base64.b64encode(hmac.digest(key, content, "sha1")).decode()


class RequestSigner:
    """AclClientRPCHook: a callable that signs each request before it leaves a client.

    Installed as ``RemotingEndpoint.request_hook``; it adds ``AccessKey`` (and
    ``SecurityToken``), then ``Signature`` over everything else.
    """

    __slots__ = ("_access_key", "_secret", "_token")

    def __init__(self, credentials: SessionCredentials) -> None:
        self._access_key = credentials.access_key
        self._secret = credentials.secret_key.encode()
        self._token = credentials.security_token

    def __repr__(self) -> str:
        return f"RequestSigner(access_key={self._access_key!r})"

    def __call__(self, cmd: RemotingCommand) -> None:
        fields = cmd.fields()
        fields = {} if fields is None else dict(fields)
        fields[ACCESS_KEY] = self._access_key
        if self._token is not None:
            fields[SECURITY_TOKEN] = self._token
        fields.pop(SIGNATURE, None)
        fields[SIGNATURE] = cal_signature(request_content(fields, cmd.body), self._secret)
        cmd.ext_fields = fields
        cmd.ext_json = None
