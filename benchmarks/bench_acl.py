"""ACL 1.0 cost per request (printed, never asserted; the target is <= 3 us on the broker).

- broker check: what the validator adds to one signed request before its processor runs
  (``PlainPermissionManager.validate``: parse the resources, the signed content, HmacSHA1,
  compare, permissions), for a SEND_MESSAGE_V2 as a Java 4.9 producer sends it and a PULL_MESSAGE;
- client sign: what ``credentials=`` adds to each request a client sends (``RequestSigner``).

``python -m benchmarks acl`` or ``python benchmarks/bench_acl.py``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.acl import PlainPermissionManager, RequestSigner, SessionCredentials
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand, decode_header, encode_json_header
from rocketq.codec.frame import FrameDecoder, encode_frame_bytes

CREDS = SessionCredentials("benchAccount", "benchSecret123")
PLAIN_ACL = """\
accounts:
- accessKey: benchAccount
  secretKey: benchSecret123
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - TopicTest=PUB|SUB
"""
# What a Java 4.9 producer sends for SEND_MESSAGE_V2 (PROTOCOL.md's captured example).
SEND_EXT = {
    "a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3",
    "f": "0", "g": "1491978653614", "h": "0", "i": "UNIQ_KEY\u00017F00000166E018B4AAC2742D3A790000\u0002WAIT"
    "\u0001true\u0002TAGS\u0001TagA\u0002", "j": "0", "k": "false", "m": "false",
}
PULL_EXT = {
    "consumerGroup": "please_rename_unique_group_name", "topic": "TopicTest", "queueId": "3",
    "queueOffset": "100", "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
    "suspendTimeoutMillis": "15000", "subscription": "*", "subVersion": "1491978653614",
    "expressionType": "TAG",
}


def _per_op(fn: Callable[[], object], seconds: float = 0.5) -> float:
    """Best of three runs of ``fn``, in microseconds per call."""
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.perf_counter()
        while True:
            for _ in range(1000):
                fn()
            n += 1000
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / 3:
                break
        best = min(best, elapsed / n * 1e6)
    return best


def _signed(code: int, ext: dict[str, str], body: bytes) -> RemotingCommand:
    cmd = RemotingCommand.request(code, dict(ext), body=body)
    RequestSigner(CREDS)(cmd)
    return cmd


def _received(code: int, ext: dict[str, str], body: bytes) -> RemotingCommand:
    """A signed request as the broker decodes it off the wire."""
    cmd = _signed(code, ext, body)
    decoded = decode_header(encode_json_header(cmd), 0)
    decoded.body = memoryview(body)
    return decoded


def run() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plain_acl.yml"
        path.write_text(PLAIN_ACL)
        manager = PlainPermissionManager(path)
    send = _received(RequestCode.SEND_MESSAGE_V2, SEND_EXT, b"x" * 128)
    pull = _received(RequestCode.PULL_MESSAGE, PULL_EXT, b"")
    big = _received(RequestCode.SEND_MESSAGE_V2, SEND_EXT, b"x" * 4096)
    peer = "10.0.0.7:51234"
    manager.validate(send, peer)
    manager.validate(pull, peer)
    signer = RequestSigner(CREDS)

    def sign() -> None:
        signer(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=dict(SEND_EXT), body=b"x" * 128))

    # The same request's frame decode, for scale on a machine whose speed varies with its load.
    frame = encode_frame_bytes(_signed(RequestCode.SEND_MESSAGE_V2, SEND_EXT, b"x" * 128))
    figures = {
        "reference: decode of that request's frame (us)": _per_op(lambda: FrameDecoder().feed(frame)),
        "broker check, SEND_MESSAGE_V2 128 B body (us)": _per_op(lambda: manager.validate(send, peer)),
        "broker check, SEND_MESSAGE_V2 4 KiB body (us)": _per_op(lambda: manager.validate(big, peer)),
        "broker check, PULL_MESSAGE (us)": _per_op(lambda: manager.validate(pull, peer)),
        "client sign, SEND_MESSAGE_V2 128 B body (us)": _per_op(sign),
    }
    for name, value in figures.items():
        print(f"  {name:<52} {value:6.2f}")
    return {k: round(v, 2) for k, v in figures.items()}


if __name__ == "__main__":
    run()
