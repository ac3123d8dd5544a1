"""White-list address patterns (RocketMQ's RemoteAddressStrategyFactory), sans-I/O.

A pattern is one of: blank (matches nothing), ``*`` / ``*.*.*.*`` / ``*:*:*:*:*:*:*:*`` (matches
everything), ``a,b,c`` (any of those addresses), ``192.168.0.{1,2,3}`` (the same, written
compactly), ``192.168.1.*`` or ``192.168.1.1-100`` or ``192.168.*`` (a range in the first part
that is not a plain number; later parts must be ``*``), or one address. IPv4 and IPv6 are
compared by value, so ``::1`` and ``0:0:0:0:0:0:0:1`` are one address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from rocketq.acl.errors import AclError

__all__ = ["AddressMatcher", "address_matcher"]

AddressMatcher = Callable[[str], bool]


def _never(_: str) -> bool:
    return False


def _always(_: str) -> bool:
    return True


def _canonical(addr: str) -> str | None:
    try:
        return str(ipaddress.ip_address(addr.strip()))
    except ValueError:
        return None


def _one_of(addrs: list[str], pattern: str) -> AddressMatcher:
    known: set[str] = set()
    for addr in addrs:
        canon = _canonical(addr)
        if canon is None:
            raise AclError(f"Netaddress examine Exception netaddress is {addr.strip()}")
        known.add(canon)

    def match(remote: str) -> bool:
        return remote in known or _canonical(remote) in known

    return match


def _range(pattern: str) -> AddressMatcher:
    """RangeRemoteAddressStrategy, IPv4 and IPv6: one part is ``*`` or ``lo-hi``, later parts ``*``."""
    v6 = ":" in pattern
    sep, width, top = (":", 8, 0xFFFF) if v6 else (".", 4, 255)
    parts = [p.strip() for p in pattern.split(sep)]
    if v6 and "::" in pattern:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    if len(parts) > width or len(parts) < 2:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    base = 16 if v6 else 10
    fixed: list[int] = []
    lo = hi = -1
    for i, part in enumerate(parts):
        if part == "*" or "-" in part:
            if part == "*":
                lo, hi = 0, top
            else:
                a, _, b = part.partition("-")
                try:
                    lo, hi = int(a, base), int(b, base)
                except ValueError:
                    raise AclError("RangeRemoteAddressStrategy netaddress examine scope Exception "
                                   f"value {part} ") from None
                if not (0 <= lo <= hi <= top):
                    raise AclError("RangeRemoteAddressStrategy netaddress examine scope Exception "
                                   f"start is {lo} , end is {hi}")
            if any(p != "*" for p in parts[i + 1:]):
                raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
            break
        try:
            value = int(part, base)
        except ValueError:
            raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}") from None
        if not 0 <= value <= top:
            raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
        fixed.append(value)
    n = len(fixed)

    def match(remote: str) -> bool:
        try:
            ip = ipaddress.ip_address(remote.strip())
        except ValueError:
            return False
        if (ip.version == 6) != v6:
            return False
        groups = [int(g, 16) for g in ip.exploded.split(":")] if v6 else [int(g) for g in str(ip).split(".")]
        return groups[:n] == fixed and lo <= groups[n] <= hi

    return match


def address_matcher(pattern: str | None) -> AddressMatcher:
    """The matcher for one white-list entry; ``AclError`` (Java's remark) when it is malformed."""
    if pattern is None or not pattern.strip():
        return _never
    pattern = pattern.strip()
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if pattern.endswith("}"):
        head, brace, tail = pattern.rpartition("{")
        if not brace or (":" not in pattern and head.count(".") != 3):
            raise AclError("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress")
        return _one_of([head + item for item in tail[:-1].split(",") if item.strip()], pattern)
    if "," in pattern:
        return _one_of([a for a in pattern.split(",") if a.strip()], pattern)
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return _one_of([pattern], pattern)
