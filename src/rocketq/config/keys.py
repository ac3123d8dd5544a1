"""Key spelling: RocketMQ's camelCase keys and rocketq's snake_case field names, both ways.

camel -> snake: "_" before an upper-case letter that follows a lower-case letter or digit, and
before the last capital of an upper-case run that starts a word ("checkCRCOnRecover" ->
check_crc_on_recover); then lower-case. snake -> camel: every segment after the first is
capitalised, except the acronyms RocketMQ spells in capitals (brokerIP1, checkCRCOnRecover, useTLS,
vipChannelEnabled's VIP). A field whose key follows neither rule names it with ``key=`` in its
declaration; tests check that every field of every config class round-trips.
"""

from __future__ import annotations

import re

__all__ = ["camel_to_snake", "compact_key", "snake_to_camel"]

_ACRONYMS = {"ip": "IP", "crc": "CRC", "tls": "TLS", "vip": "VIP"}
_UPPER_RUN = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_START = re.compile(r"([a-z0-9])([A-Z])")
_SEGMENT = re.compile(r"([a-z]+)(\d*)")


def camel_to_snake(key: str) -> str:
    """``mappedFileSizeCommitLog`` -> ``mapped_file_size_commit_log``; snake or UPPER_SNAKE pass through."""
    return _WORD_START.sub(r"\1_\2", _UPPER_RUN.sub(r"\1_\2", key)).lower()


def snake_to_camel(name: str) -> str:
    """``broker_ip1`` -> ``brokerIP1``, ``flush_disk_type`` -> ``flushDiskType``."""
    first, *rest = name.split("_")
    out = [first]
    for seg in rest:
        m = _SEGMENT.fullmatch(seg)
        if m and m.group(1) in _ACRONYMS:
            out.append(_ACRONYMS[m.group(1)] + m.group(2))
        else:
            out.append(seg[:1].upper() + seg[1:])
    return "".join(out)


def compact_key(key: str) -> str:
    """The key without its section, case or separators: what no respelling can get around."""
    return re.sub(r"[^0-9a-z]", "", key.rpartition(".")[2].lower())
