"""White-list patterns as RemoteAddressStrategyFactory reads them."""

from __future__ import annotations

import pytest

from rocketq.acl.address import address_matcher
from rocketq.acl.errors import AclError
from rocketq.acl.resource import remote_ip


@pytest.mark.parametrize(("pattern", "inside", "outside"), [
    ("", [], ["1.2.3.4"]),
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["8.8.8.8"], []),
    ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2"]),
    ("192.168.0.1,10.0.0.1", ["10.0.0.1", "192.168.0.1"], ["10.0.0.2"]),
    ("192.168.0.{1,2}", ["192.168.0.2"], ["192.168.0.3"]),
    ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
    ("192.168.1.1-100", ["192.168.1.100"], ["192.168.1.101"]),
    ("192.168.*", ["192.168.77.3"], ["192.169.0.1"]),
    ("10.*.*.*", ["10.1.2.3"], ["11.1.2.3"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
    ("2001:db8:0:0:0:0:0:*", ["2001:db8::ff"], ["2001:db9::1"]),
])
def test_pattern(pattern: str, inside: list[str], outside: list[str]) -> None:
    match = address_matcher(pattern)
    assert all(match(a) for a in inside)
    assert not any(match(a) for a in outside)


@pytest.mark.parametrize("pattern", ["1.2.3", "192.168.1.300", "192.168.1.100-1", "192.168.*.5", "abc"])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AclError):
        address_matcher(pattern)


def test_the_host_of_a_remote_address() -> None:
    assert remote_ip("10.0.0.1:5000") == "10.0.0.1"
    assert remote_ip("[::1]:5000") == "::1"
    assert remote_ip("host") == "host"
