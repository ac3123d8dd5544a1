"""The gRPC MQv2-HMAC-SHA1 header: parsing and signatures, against values computed with hmac."""

from __future__ import annotations

import pytest

from rocketq.acl.errors import AclError
from rocketq.acl.grpc_auth import (
    GrpcAuthorization,
    grpc_signature,
    parse_authorization,
    verify_grpc_signature,
)

# hmac.new(b"appSecret12", b"20261125T135200Z", hashlib.sha1).hexdigest(), and a second pair
GOLDEN = [("appSecret12", "20261125T135200Z", "278ee76943b814d7427da36d38e1aa1b3c42d0c9"),
          ("12345678", "20240101T000000Z", "c6fc09021280e20533c17364f135c0e3217d83e9")]


@pytest.mark.parametrize(("secret", "date_time", "expected"), GOLDEN)
def test_signature_is_lowercase_hex_hmac_sha1_of_the_date_time(secret: str, date_time: str,
                                                                expected: str) -> None:
    assert grpc_signature(secret, date_time) == expected


def test_the_official_clients_header_parses() -> None:
    sig = GOLDEN[0][2]
    header = f"MQv2-HMAC-SHA1 Credential=appKey1, SignedHeaders=x-mq-date-time, Signature={sig}"
    assert parse_authorization(header) == GrpcAuthorization("appKey1", ("x-mq-date-time",), sig)
    # a credential scope after the key (Java's proxy keeps the part before the first slash)
    scoped = parse_authorization(f"MQv2-HMAC-SHA1 Credential=appKey1/scope, Signature={sig}")
    assert scoped.access_key == "appKey1"


@pytest.mark.parametrize(("header", "message"), [
    (None, "authorization header is missing"),
    ("", "authorization header is missing"),
    ("AWS4-HMAC-SHA256 Credential=a, Signature=b", "is not supported"),
    ("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=ab", "no Credential"),
    ("MQv2-HMAC-SHA1 Credential=appKey1, SignedHeaders=x-mq-date-time", "no Signature"),
])
def test_a_missing_or_malformed_header_is_refused(header: str | None, message: str) -> None:
    with pytest.raises(AclError, match=message):
        parse_authorization(header)


def test_verify_accepts_the_right_secret_only() -> None:
    secret, date_time, sig = GOLDEN[0]
    auth = GrpcAuthorization("appKey1", ("x-mq-date-time",), sig)
    verify_grpc_signature(auth, secret, date_time)
    verify_grpc_signature(GrpcAuthorization("appKey1", (), sig.upper()), secret, date_time)
    with pytest.raises(AclError, match="Check signature failed for accessKey=appKey1") as refused:
        verify_grpc_signature(auth, "notTheSecret", date_time)
    assert "notTheSecret" not in str(refused.value) and secret not in str(refused.value)
    with pytest.raises(AclError):  # signed for another moment
        verify_grpc_signature(auth, secret, "20261125T135201Z")
    with pytest.raises(AclError, match="datetime is null"):
        verify_grpc_signature(auth, secret, None)
