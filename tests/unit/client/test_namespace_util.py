"""NamespaceUtil's rules (rocketq.client.namespace), case for case with RocketMQ 4.9.8's tests."""

from __future__ import annotations

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.namespace import (
    is_already_wrapped,
    namespace_of,
    strip_namespace,
    unwrap,
    wrap,
    wrap_retry,
)

NS = "MQ_INST_XXX"


@pytest.mark.parametrize(("plain", "wire"), [
    ("TOPIC_XXX", "MQ_INST_XXX%TOPIC_XXX"),
    ("GID_XXX", "MQ_INST_XXX%GID_XXX"),
    ("%RETRY%GID_XXX", "%RETRY%MQ_INST_XXX%GID_XXX"),
    ("%DLQ%GID_XXX", "%DLQ%MQ_INST_XXX%GID_XXX"),
])
def test_wrap_and_unwrap_are_inverse(plain: str, wire: str) -> None:
    assert wrap(NS, plain) == wire
    assert wrap(NS, wire) == wire  # wrapping twice keeps one namespace
    assert unwrap(NS, wire) == plain
    assert strip_namespace(wire) == plain
    assert is_already_wrapped(wire, NS) and not is_already_wrapped(plain, NS)


@pytest.mark.parametrize("system", [
    "rmq_sys_topic", "RMQ_SYS_TRACE_TOPIC", "TBW102", "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT",
    "CID_RMQ_SYS_TRANS", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
])
def test_system_resources_are_never_wrapped(system: str) -> None:
    assert wrap(NS, system) == system
    assert strip_namespace(system) == system
    assert namespace_of(system) == ""


def test_unwrap_leaves_other_namespaces_alone() -> None:
    assert unwrap("MQ_INST_XXX1", "%RETRY%MQ_INST_XXX%GID_XXX") == "%RETRY%MQ_INST_XXX%GID_XXX"
    assert unwrap("other", "MQ_INST_XXX%T") == "MQ_INST_XXX%T"
    assert unwrap(None, "MQ_INST_XXX%T") == "MQ_INST_XXX%T"
    assert unwrap(NS, "T") == "T"


def test_no_namespace_is_identity() -> None:
    for name in ("T", "%RETRY%G", "a%b"):
        assert wrap(None, name) == name and wrap("", name) == name
    assert wrap(NS, "") == ""


def test_namespace_of_and_retry() -> None:
    assert namespace_of("TOPIC_XXX") == ""
    assert namespace_of("MQ_INST_XXX%TOPIC_XXX") == NS
    assert namespace_of("%RETRY%MQ_INST_XXX%GID_XXX") == NS
    assert namespace_of("%DLQ%MQ_INST_XXX%GID_XXX") == NS
    assert wrap_retry(NS, "GID_XXX") == "%RETRY%MQ_INST_XXX%GID_XXX"
    assert wrap_retry(None, "GID_XXX") == "%RETRY%GID_XXX"


def test_strip_namespace_needs_a_leading_name() -> None:
    # "%x" has its separator at index 0: not a namespace (Java checks index > 0).
    assert strip_namespace("%x") == "%x"
    assert strip_namespace("a%b%c") == "b%c"


def test_client_config_uses_the_same_rules() -> None:
    cfg = ClientConfig(namespace=NS)
    assert cfg.with_namespace("T") == "MQ_INST_XXX%T"
    assert cfg.with_namespace("RMQ_SYS_TRACE_TOPIC") == "RMQ_SYS_TRACE_TOPIC"
    assert cfg.without_namespace("%DLQ%MQ_INST_XXX%G") == "%DLQ%G"


# (namespace, resource, wrapNamespace, withoutNamespace(r, ns), withoutNamespace(r), getNamespaceFromResource,
#  isAlreadyWithNamespace) as RocketMQ 4.9.8's NamespaceUtil answers them (its class compiled from the
# release source and run once over these names).
TRACE, CID = "RMQ_SYS_TRACE_TOPIC", "CID_RMQ_SYS_TRANS"
JAVA_NAMESPACE_UTIL = [
    ('ns', 'T', 'ns%T', 'T', 'T', '', False),
    ('ns', 'ns%T', 'ns%T', 'T', 'T', 'ns', True),
    ('ns', '%RETRY%G', '%RETRY%ns%G', '%RETRY%G', '%RETRY%G', '', False),
    ('ns', '%DLQ%G', '%DLQ%ns%G', '%DLQ%G', '%DLQ%G', '', False),
    ('ns', '%RETRY%ns%G', '%RETRY%ns%G', '%RETRY%G', '%RETRY%G', 'ns', True),
    ('ns', '%DLQ%ns%G', '%DLQ%ns%G', '%DLQ%G', '%DLQ%G', 'ns', True),
    ('ns', 'other%T', 'ns%other%T', 'other%T', 'T', 'other', False),
    ('ns', '%x', 'ns%%x', '%x', '%x', '', False),
    ('ns', 'a%b%c', 'ns%a%b%c', 'a%b%c', 'b%c', 'a', False),
    ('ns', TRACE, TRACE, TRACE, TRACE, '', False),
    ('ns', 'rmq_sys_x', 'rmq_sys_x', 'rmq_sys_x', 'rmq_sys_x', '', False),
    ('ns', CID, CID, CID, CID, '', False),
    ('ns', 'TBW102', 'TBW102', 'TBW102', 'TBW102', '', False),
    ('ns', '%RETRY%other%G', '%RETRY%ns%other%G', '%RETRY%other%G', '%RETRY%G', 'other', False),
    ('ns', 'ns%', 'ns%', '', '', 'ns', True),
    ('ns', '%RETRY%', '%RETRY%ns%', '%RETRY%', '%RETRY%', '', False),
    ('MQ_INST_1', 'T', 'MQ_INST_1%T', 'T', 'T', '', False),
    ('MQ_INST_1', 'ns%T', 'MQ_INST_1%ns%T', 'ns%T', 'T', 'ns', False),
    ('MQ_INST_1', '%RETRY%G', '%RETRY%MQ_INST_1%G', '%RETRY%G', '%RETRY%G', '', False),
    ('MQ_INST_1', '%DLQ%G', '%DLQ%MQ_INST_1%G', '%DLQ%G', '%DLQ%G', '', False),
    ('MQ_INST_1', '%RETRY%ns%G', '%RETRY%MQ_INST_1%ns%G', '%RETRY%ns%G', '%RETRY%G', 'ns', False),
    ('MQ_INST_1', '%DLQ%ns%G', '%DLQ%MQ_INST_1%ns%G', '%DLQ%ns%G', '%DLQ%G', 'ns', False),
    ('MQ_INST_1', 'other%T', 'MQ_INST_1%other%T', 'other%T', 'T', 'other', False),
    ('MQ_INST_1', '%x', 'MQ_INST_1%%x', '%x', '%x', '', False),
    ('MQ_INST_1', 'a%b%c', 'MQ_INST_1%a%b%c', 'a%b%c', 'b%c', 'a', False),
    ('MQ_INST_1', TRACE, TRACE, TRACE, TRACE, '', False),
    ('MQ_INST_1', 'rmq_sys_x', 'rmq_sys_x', 'rmq_sys_x', 'rmq_sys_x', '', False),
    ('MQ_INST_1', CID, CID, CID, CID, '', False),
    ('MQ_INST_1', 'TBW102', 'TBW102', 'TBW102', 'TBW102', '', False),
    ('MQ_INST_1', '%RETRY%other%G', '%RETRY%MQ_INST_1%other%G', '%RETRY%other%G', '%RETRY%G', 'other', False),
    ('MQ_INST_1', 'ns%', 'MQ_INST_1%ns%', 'ns%', '', 'ns', False),
    ('MQ_INST_1', '%RETRY%', '%RETRY%MQ_INST_1%', '%RETRY%', '%RETRY%', '', False),
    ('a%b', 'T', 'a%b%T', 'T', 'T', '', False),
    ('a%b', 'ns%T', 'a%b%ns%T', 'ns%T', 'T', 'ns', False),
    ('a%b', '%RETRY%G', '%RETRY%a%b%G', '%RETRY%G', '%RETRY%G', '', False),
    ('a%b', '%DLQ%G', '%DLQ%a%b%G', '%DLQ%G', '%DLQ%G', '', False),
    ('a%b', '%RETRY%ns%G', '%RETRY%a%b%ns%G', '%RETRY%ns%G', '%RETRY%G', 'ns', False),
    ('a%b', '%DLQ%ns%G', '%DLQ%a%b%ns%G', '%DLQ%ns%G', '%DLQ%G', 'ns', False),
    ('a%b', 'other%T', 'a%b%other%T', 'other%T', 'T', 'other', False),
    ('a%b', '%x', 'a%b%%x', '%x', '%x', '', False),
    ('a%b', 'a%b%c', 'a%b%c', 'b%c', 'b%c', 'a', True),
    ('a%b', TRACE, TRACE, TRACE, TRACE, '', False),
    ('a%b', 'rmq_sys_x', 'rmq_sys_x', 'rmq_sys_x', 'rmq_sys_x', '', False),
    ('a%b', CID, CID, CID, CID, '', False),
    ('a%b', 'TBW102', 'TBW102', 'TBW102', 'TBW102', '', False),
    ('a%b', '%RETRY%other%G', '%RETRY%a%b%other%G', '%RETRY%other%G', '%RETRY%G', 'other', False),
    ('a%b', 'ns%', 'a%b%ns%', 'ns%', '', 'ns', False),
    ('a%b', '%RETRY%', '%RETRY%a%b%', '%RETRY%', '%RETRY%', '', False),
]


@pytest.mark.parametrize(("ns", "resource", "wrapped", "unwrapped", "stripped", "of", "already"),
                         JAVA_NAMESPACE_UTIL)
def test_same_answers_as_java(ns: str, resource: str, wrapped: str, unwrapped: str, stripped: str, of: str,
                              already: bool) -> None:
    assert wrap(ns, resource) == wrapped
    assert unwrap(ns, resource) == unwrapped
    assert strip_namespace(resource) == stripped
    assert namespace_of(resource) == of
    assert is_already_wrapped(resource, ns) is already
