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
