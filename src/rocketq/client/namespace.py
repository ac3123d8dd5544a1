"""Namespaces: RocketMQ 4.x's NamespaceUtil, the one place topics and groups are (un)wrapped.

A client with ``namespace="ns"`` speaks of ``T`` and ``G`` in its API while the wire and the broker
see ``ns%T``, ``ns%G``, ``%RETRY%ns%G`` and ``%DLQ%ns%G``. System topics (TopicValidator's set and
``rmq_sys_*``) and system groups (``CID_RMQ_SYS_*``) are never wrapped, and a name that already
carries the namespace is kept as it is, so wrapping twice is harmless. The clients call
``wrap``/``unwrap`` at their API boundary only (``ClientConfig.with_namespace`` /
``without_namespace``); nothing below that boundary knows namespaces exist.
"""

from __future__ import annotations

from typing import Final

from rocketq.codec.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)

__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX",
    "NAMESPACE_SEPARATOR",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SYSTEM_TOPICS",
    "is_already_wrapped",
    "is_system_resource",
    "namespace_of",
    "strip_namespace",
    "unwrap",
    "wrap",
    "wrap_retry",
]

NAMESPACE_SEPARATOR: Final = "%"
SYSTEM_GROUP_PREFIX: Final = "CID_RMQ_SYS_"


def is_system_resource(resource: str) -> bool:
    return (resource in SYSTEM_TOPICS or resource.startswith(SYSTEM_TOPIC_PREFIX)
            or resource.startswith(SYSTEM_GROUP_PREFIX))


def _split_prefix(resource: str) -> tuple[str, str]:
    """(``%RETRY%`` / ``%DLQ%`` / "", the rest)."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix):]
    return "", resource


def is_already_wrapped(resource: str, namespace: str | None) -> bool:
    if not namespace or not resource or is_system_resource(resource):
        return False
    return _split_prefix(resource)[1].startswith(namespace + NAMESPACE_SEPARATOR)


def wrap(namespace: str | None, resource: str) -> str:
    """``T`` -> ``ns%T``, ``%RETRY%G`` -> ``%RETRY%ns%G`` (NamespaceUtil.wrapNamespace)."""
    if not namespace or not resource or is_system_resource(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    if rest.startswith(namespace + NAMESPACE_SEPARATOR):
        return resource
    return f"{prefix}{namespace}{NAMESPACE_SEPARATOR}{rest}"


def wrap_retry(namespace: str | None, group: str) -> str:
    """``%RETRY%ns%G``: the retry topic of a consumer group (wrapNamespaceAndRetry)."""
    return RETRY_GROUP_TOPIC_PREFIX + wrap(namespace, group)


def strip_namespace(resource: str) -> str:
    """Whatever namespace ``resource`` carries, removed (NamespaceUtil.withoutNamespace(String)):
    what Java's trace hooks record, since a trace names topics as their users know them."""
    if not resource or is_system_resource(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    index = rest.find(NAMESPACE_SEPARATOR)
    if index > 0:
        return prefix + rest[index + 1:]
    return resource


def unwrap(namespace: str | None, resource: str) -> str:
    """``ns%T`` -> ``T``; a name of another namespace, or of none, is returned as it is
    (NamespaceUtil.withoutNamespace(String, String))."""
    if not namespace or not resource:
        return resource
    if _split_prefix(resource)[1].startswith(namespace + NAMESPACE_SEPARATOR):
        return strip_namespace(resource)
    return resource


def namespace_of(resource: str) -> str:
    """The namespace a wire name carries, or "" (getNamespaceFromResource)."""
    if not resource or is_system_resource(resource):
        return ""
    rest = _split_prefix(resource)[1]
    index = rest.find(NAMESPACE_SEPARATOR)
    return rest[:index] if index > 0 else ""
