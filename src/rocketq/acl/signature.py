"""RocketMQ ACL 1.0 request signatures (AclUtils, AclSigner, AclClientRPCHook), sans-I/O.

The signed content is the values of every ext-field sorted by key (``Signature`` and the
``_UNIQUE_KEY_QUERY`` flag left out, as PlainAccessValidator.parse leaves them out) followed by
the body; the signature is Base64(HmacSHA1(secretKey, content)). Both the broker's check and the
client's signing call ``request_content`` so that the two can never disagree.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.codec.command import Body, RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "HmacSha1",
    "RequestSigner",
    "SessionCredentials",
    "cal_signature",
    "request_content",
    "signed_head",
]

# SessionCredentials' ext-field names.
ACCESS_KEY: Final = "AccessKey"
SECRET_KEY: Final = "SecretKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
# MixAll.UNIQUE_MSG_QUERY_FLAG: the broker leaves it out of the signed content.
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"
_UNSIGNED: Final = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG)
# A tuple, not ``bytes | bytearray | memoryview``: that union is built anew at every call.
_BUFFERS: Final = (bytes, bytearray, memoryview)


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


# For each key set seen (clients send the same keys request after request), a getter of the
# signed values in key order: saves the sort, and fetches them all in one C call, the broker's
# largest costs after the hash. Bounded: cleared when full.
_ORDER: dict[tuple[str, ...], Callable[[dict[str, str]], Any] | None] = {}
_ORDER_MAX: Final = 4096


def _signed_values(fields: dict[str, str]) -> Callable[[dict[str, str]], Any] | None:
    keys = tuple(fields)
    try:
        return _ORDER[keys]
    except KeyError:
        pass
    if len(_ORDER) >= _ORDER_MAX:
        _ORDER.clear()
    order = [k for k in sorted(keys) if k not in _UNSIGNED]
    # itemgetter of one key returns the value itself, which join reads char by char: same text
    getter = _ORDER[keys] = operator.itemgetter(*order) if order else None
    return getter


def signed_head(fields: dict[str, str] | None) -> bytes:
    """The ext-field part of the signed content: the values sorted by key, UTF-8."""
    if not fields:
        return b""
    getter = _signed_values(fields)
    if getter is None:
        return b""
    return "".join(getter(fields)).encode()


def request_content(fields: dict[str, str] | None, body: Body) -> bytes:
    """AclUtils.combineRequestContent: sorted ext-field values, then the body."""
    head = signed_head(fields)
    if not body:
        return head
    if isinstance(body, _BUFFERS):
        return head + body
    return head + b"".join(body)


class HmacSha1:
    """HmacSHA1 under one key, its padded key blocks hashed once (RFC 2104 over hashlib).

    Per request this costs two hash-state copies instead of OpenSSL's HMAC set-up, which is
    most of the broker's check; ``tests/unit/acl`` holds it equal to ``hmac.digest``.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _SHA1_BLOCK:
            key = hashlib.sha1(key).digest()
        key = key.ljust(_SHA1_BLOCK, b"\0")
        self._inner = hashlib.sha1(key.translate(_IPAD))
        self._outer = hashlib.sha1(key.translate(_OPAD))

    def sign(self, head: bytes, body: Body = b"") -> str:
        """Base64(HmacSHA1(key, head + body)): AclSigner.calSignature."""
        inner = self._inner.copy()
        inner.update(head)
        if body:
            if isinstance(body, _BUFFERS):
                inner.update(body)
            else:
                for part in body:
                    inner.update(part)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return binascii.b2a_base64(outer.digest(), newline=False).decode()


_SHA1_BLOCK: Final = 64
_IPAD: Final = bytes(b ^ 0x36 for b in range(256))
_OPAD: Final = bytes(b ^ 0x5C for b in range(256))


def cal_signature(content: bytes, secret_key: bytes | str) -> str:
    """AclSigner.calSignature: Base64(HmacSHA1(secret, content))."""
    key = secret_key.encode() if isinstance(secret_key, str) else secret_key
    return base64.b64encode(hmac.digest(key, content, "sha1")).decode()


class RequestSigner:
    """AclClientRPCHook: a callable that signs each request before it leaves a client.

    Installed as ``RemotingEndpoint.request_hook``; it adds ``AccessKey`` (and
    ``SecurityToken``), then ``Signature`` over everything else.
    """

    __slots__ = ("_access_key", "_mac", "_token")

    def __init__(self, credentials: SessionCredentials) -> None:
        self._access_key = credentials.access_key
        self._mac = HmacSha1(credentials.secret_key.encode())
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
        fields[SIGNATURE] = self._mac.sign(signed_head(fields), cmd.body)
        cmd.ext_fields = fields
        cmd.ext_json = None
