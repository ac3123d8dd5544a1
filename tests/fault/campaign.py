"""What every campaign test shares: the one-line figures, server RSS, and the garbage it sends.

Each campaign test prints ``CAMPAIGN <name> key=value ...`` (``pytest -s -m slow tests/fault -k
campaign`` collects them into the table of issue 9); the default run does the same with a bounded
sample.
"""

from __future__ import annotations

import random
from pathlib import Path

from rocketq.codec.headers._compiler import CommandHeader, _specs


def report(name: str, **figures: object) -> str:
    """Print one campaign line (the lead collects them into a table) and return it."""
    line = " ".join([f"CAMPAIGN {name}", *(f"{k}={v}" for k, v in figures.items())])
    print(line, flush=True)
    return line


def rss_kib(pid: int) -> int:
    """VmRSS of a process in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


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
    "T" * 300, "\u0661\u0662",
)
PLAUSIBLE_VALUES = ("0", "1", "3", "-1", "TopicTest", "DefaultCluster", "broker-a", "127.0.0.1:1",
                    "true", "false", "*", "TAG", "SINGLE_TAG", "G", "%RETRY%G")

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
