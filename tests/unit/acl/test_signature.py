"""The signed content and signature are exactly AclUtils' (golden values computed independently
with `openssl dgst -sha1 -hmac`), and the client's signer and the broker's check agree."""

from __future__ import annotations

import pytest

from rocketq.acl import (
    AclRules,
    RequestSigner,
    SessionCredentials,
    cal_signature,
    parse_request,
    request_content,
)
from rocketq.acl.errors import AclError
from rocketq.acl.signature import HmacSha1, signed_head
from rocketq.codec.command import RemotingCommand, decode_header, encode_json_header

# printf 'RocketMQgtopicAxhello' | openssl dgst -sha1 -hmac 12345678 -binary | base64
GOLDEN = "tQ7atRHAfeka9O7a9uhiQyEzfU8="


def test_content_is_the_values_sorted_by_key_then_the_body() -> None:
    fields = {"b": "topicA", "a": "g", "c": "x", "AccessKey": "RocketMQ", "Signature": "ignored"}
    assert request_content(fields, b"hello") == b"RocketMQgtopicAxhello"


def test_the_unique_key_query_flag_is_not_signed() -> None:
    assert request_content({"topic": "t", "_UNIQUE_KEY_QUERY": "true"}, b"") == b"t"


def test_signature_matches_openssl() -> None:
    assert cal_signature(b"RocketMQgtopicAxhello", "12345678") == GOLDEN


def test_the_signer_adds_access_key_token_and_signature() -> None:
    cmd = RemotingCommand.request(310, {"b": "topicA", "a": "g", "c": "x"}, body=b"hello")
    RequestSigner(SessionCredentials("RocketMQ", "12345678"))(cmd)
    assert cmd.ext_fields is not None
    assert cmd.ext_fields["AccessKey"] == "RocketMQ"
    assert cmd.ext_fields["Signature"] == GOLDEN
    assert "SecurityToken" not in cmd.ext_fields

    token = RemotingCommand.request(310, {"b": "t"})
    RequestSigner(SessionCredentials("RocketMQ", "12345678", "sts"))(token)
    assert token.ext_fields is not None and token.ext_fields["SecurityToken"] == "sts"
    expected = cal_signature(b"RocketMQsts" + b"t", "12345678")
    assert token.ext_fields["Signature"] == expected


def test_a_body_in_pieces_signs_like_one_body() -> None:
    assert request_content({"k": "v"}, [b"ab", memoryview(b"cd")]) == b"vabcd"


def test_a_signed_request_survives_the_wire_and_passes_the_check() -> None:
    rules = AclRules.from_mapping({"accounts": [
        {"accessKey": "RocketMQ", "secretKey": "12345678", "defaultTopicPerm": "PUB"}]})
    cmd = RemotingCommand.request(310, {"a": "g", "b": "T", "e": "1"}, body=b"x" * 10)
    RequestSigner(SessionCredentials("RocketMQ", "12345678"))(cmd)
    decoded = decode_header(encode_json_header(cmd), 0)
    decoded.body = cmd.body
    rules.check(parse_request(decoded, "127.0.0.1:5555"))
    decoded.body = b"y" * 10  # a body changed in flight
    with pytest.raises(AclError, match="Check signature failed for accessKey=RocketMQ"):
        rules.check(parse_request(decoded, "127.0.0.1:5555"))


def test_credentials_never_show_their_secret() -> None:
    creds = SessionCredentials("AK123456", "very-secret-value", "token-value")
    assert "very-secret-value" not in repr(creds) and "token-value" not in repr(creds)
    assert "very-secret-value" not in repr(RequestSigner(creds))
    with pytest.raises(ValueError):
        SessionCredentials("", "x")


@pytest.mark.parametrize("key", [b"", b"k", b"12345678", b"x" * 64, b"y" * 65, "sécret".encode()])
@pytest.mark.parametrize("body", [b"", b"body", [b"pi", memoryview(b"eces")]])
def test_the_precomputed_hmac_is_hmac_sha1(key: bytes, body: object) -> None:
    import base64
    import hmac

    whole = body if isinstance(body, bytes) else b"".join(bytes(p) for p in body)  # type: ignore[attr-defined]
    expected = base64.b64encode(hmac.digest(key, b"head" + whole, "sha1")).decode()
    assert HmacSha1(key).sign(b"head", body) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("fields", [
    {},
    {"Signature": "s"},
    {"AccessKey": "ak"},
    {"AccessKey": "ak", "Signature": "s", "_UNIQUE_KEY_QUERY": "true"},
    {"b": "2", "a": "1", "AccessKey": "ak", "c": "\u00e9", "Signature": "s"},
])
def test_the_signed_head_is_the_values_sorted_by_key(fields: dict[str, str]) -> None:
    expected = "".join(v for k, v in sorted(fields.items()) if k not in ("Signature", "_UNIQUE_KEY_QUERY"))
    assert signed_head(dict(fields)) == signed_head(dict(fields)) == expected.encode()
