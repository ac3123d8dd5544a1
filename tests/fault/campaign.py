"""What every campaign test shares: the one-line figures, server RSS, and the garbage it sends.

Each campaign test prints ``CAMPAIGN <name> key=value ...`` (``pytest -s -m slow tests/fault -k
campaign`` collects them into the table of issue 9); the default run does the same with a bounded
sample.
"""

from __future__ import annotations

import json
import random
import resource
import struct
from pathlib import Path

import orjson

from rocketq.codec.codes import RequestCode
from rocketq.codec.headers._compiler import CommandHeader, _specs


def report(name: str, **figures: object) -> str:
    """Print one campaign line (the lead collects them into a table) and return it."""
    line = " ".join([f"CAMPAIGN {name}", *(f"{k}={v}" for k, v in figures.items())])
    print(line, flush=True)
    return line


# Tracebacks a campaign finds whose fix belongs to other work: counted and reported, not asserted
# on. Empty since the config files got one atomic writer each (issue 9 item 2).
KNOWN_ELSEWHERE: tuple[str, ...] = ()


def split_tracebacks(log: str) -> tuple[list[str], list[str]]:
    """The tracebacks in a server's log text as (new, known elsewhere), each with the line that
    logged it."""
    new: list[str] = []
    known: list[str] = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("Traceback"):
            continue
        logged = lines[i - 1] if i else ""
        message = logged.split(" - ", 1)[-1]
        excerpt = "\n".join(lines[max(0, i - 1):i + 40])
        (known if message.startswith(KNOWN_ELSEWHERE) else new).append(excerpt)
    return new, known


def ensure_fd_limit(needed: int) -> int:
    """Raise this process's soft limit on open files to at least `needed` (servers started
    afterwards inherit it); returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    assert soft >= needed, f"`ulimit -n` is {soft} (hard {hard}); this test needs {needed} descriptors"
    return soft


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory in KiB from /proc/PID/status: VmRSS (everything), or RssAnon
    (the heap alone, without the mapped store files a broker is supposed to touch)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def header_keys() -> list[str]:
    """Every extFields key any typed header of the broker or name server reads (V2 letters too)."""
    # Some headers are defined beside their processors.
    import rocketq.broker.processors.admin
    import rocketq.broker.processors.admin_group
    import rocketq.broker.processors.query
    import rocketq.namesrv.processor  # noqa: F401

    keys: set[str] = set()
    todo = list(CommandHeader.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "__dataclass_fields__" not in cls.__dict__:
            continue
        keys.update(spec.key for spec in _specs(cls))
        keys.update(cls.__dict__.get("V2_KEYS", {}).values())
    return sorted(keys)


# Values that are wrong for some field's Java type or range, and a few plausible ones so that a
# header gets past its decoder and the processor sees odd but well-typed values.
GARBAGE_VALUES = (
    "", " ", "-1", "-2147483649", "2147483648", "9223372036854775808", "99999999999999999999999",
    "abc", "1e5", "0x10", "1_000", "NaN", "true", "\x00\xff", "%s%n", "{", "../../etc/passwd",
    "T" * 300, "\u0661\u0662", "9" * 5000,
)
PLAUSIBLE_VALUES = ("0", "1", "3", "-1", "TopicTest", "DefaultCluster", "broker-a", "127.0.0.1:1",
                    "true", "false", "*", "TAG", "SINGLE_TAG", "G", "%RETRY%G", "%DLQ%G", "TBW102",
                    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "DELAY\x013\x02REAL_QID\x01x")

GARBAGE_BODIES = (
    b"",
    b"\x00\x01\x02\xff" * 8,
    b"{",
    b"null",
    b"[1,2]",
    b'"text"',
    b'{"a":1}',
    b'{"clientID":5,"producerDataSet":[1],"consumerDataSet":{"a":1}}',
    b'{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":7}]}]}',
    b'{"consumerGroup":[],"clientId":1,"mqSet":[{"topic":null,"brokerName":2,"queueId":"x"}]}',
    b'{"topicConfigTable":{"T":{"readQueueNums":"x","perm":[]}},"dataVersion":5}',
    b'{"offsetTable":{"a":1},"topic":"T","queueId":99999999999999999999}',
    b"brokerClusterName=\nlistenPort=abc\nflushDiskType=NOPE\n\x00=1\n",
)


def random_ext(rnd: random.Random, keys: list[str]) -> dict[str, str] | None:
    """Some of `keys`, each with a random garbage or plausible value (or no extFields at all)."""
    if rnd.random() < 0.1:
        return None
    pool = GARBAGE_VALUES + PLAUSIBLE_VALUES
    return {k: rnd.choice(pool) for k in keys if rnd.random() < 0.5}


# -- frames: sound ones with bad contents, and broken ones ------------------------------------------

_PREFIX = struct.Struct(">iI")
_FIXED = struct.Struct(">hBhiii")  # the ROCKETMQ binary header's fixed part
REQUEST_CODES = tuple(int(c) for c in RequestCode)
_JSON_MEMBER_GARBAGE: tuple[object, ...] = (
    None, True, 1.5, -1, 2**31, 2**64, 10**30, "x", "", "99999999999999999999999", [], [1], {}, {"a": 1},
)


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return _PREFIX.pack(4 + len(header) + len(body), serialize_type << 24 | len(header)) + header + body


def sound_frame(rnd: random.Random, opaque: int, keys: list[str], code: int | None = None) -> bytes:
    """A frame with correct lengths, a usable opaque and flag 0, and anything else wrong.

    A server must answer each of these (or hold it as a long poll) and keep the connection.
    """
    kind = rnd.random()
    if code is None:
        code = rnd.choice(REQUEST_CODES) if rnd.random() < 0.9 else rnd.randrange(-(2**31), 2**31)
    body = rnd.choice(GARBAGE_BODIES)
    if kind < 0.6:  # a plausible request: real code, garbage extFields and body
        return frame(orjson.dumps({"code": code, "opaque": opaque, "flag": 0, "language": "JAVA",
                                   "version": 401, "extFields": random_ext(rnd, keys)}), body)
    if kind < 0.85:  # members of the wrong type or range (opaque and flag excepted)
        header: dict[str, object] = {"code": code, "opaque": opaque, "flag": 0}
        for member in ("code", "version", "language", "remark", "extFields", "serializeTypeCurrentRPC"):
            if rnd.random() < 0.4:
                header[member] = rnd.choice(_JSON_MEMBER_GARBAGE)
        return frame(json.dumps(header).encode(), body)  # json: integers beyond 64 bits too
    # ROCKETMQ binary: the fixed part is sound, what follows is random.
    fixed = _FIXED.pack(rnd.randrange(-(2**15), 2**15), rnd.randrange(256), rnd.randrange(-(2**15), 2**15),
                        opaque, 0, rnd.choice((0, 1, 5, 2**30, -1)))
    return frame(fixed + rnd.randbytes(rnd.randrange(0, 64)), body, 1)


def broken_bytes(rnd: random.Random, opaque: int, keys: list[str]) -> bytes:
    """Bytes that break the framing (or the header past answering): the server closes on them."""
    good = sound_frame(rnd, opaque, keys)
    kind = rnd.randrange(10)
    if kind == 0:  # truncated anywhere
        return good[:rnd.randrange(1, len(good))]
    if kind == 1:  # oversized length
        length = rnd.choice((16 * 1024 * 1024 - 3, 16 * 1024 * 1024 + 1, 2**31 - 1))
        return struct.pack(">i", length) + good[4:]
    if kind == 2:  # negative or tiny length
        return struct.pack(">i", rnd.choice((-1, -(2**31), 0, 3))) + good[4:]
    if kind == 3:  # header length past the frame
        word = rnd.choice((0, 1)) << 24 | rnd.randrange(len(good), 2**24)
        return good[:4] + struct.pack(">I", word) + good[8:]
    if kind == 4:  # unknown serialize type
        return good[:4] + bytes([rnd.randrange(2, 256)]) + good[5:]
    if kind == 5:  # not JSON
        return frame(rnd.choice((b"{", b"{not json", b"\xff\xfe", b"[]", b"null", b"1")))
    if kind == 6:  # an opaque or flag that fits nothing
        bad = rnd.choice(('"99999999999999999999999"', "2147483648", "-2147483649", "1.5", "[]", '"x"'))
        member = rnd.choice(("opaque", "flag"))
        other = "flag" if member == "opaque" else "opaque"
        return frame(b'{"code":105,"%s":%s,"%s":0}' % (member.encode(), bad.encode(), other.encode()))
    if kind == 7:  # random bytes
        return rnd.randbytes(rnd.randrange(1, 200))
    if kind == 8:  # bit flips in a sound frame (may or may not break it)
        data = bytearray(good)
        for _ in range(rnd.randrange(1, 6)):
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        return bytes(data)
    return good[:8] + rnd.randbytes(max(0, len(good) - 8))  # a sound prefix before garbage
