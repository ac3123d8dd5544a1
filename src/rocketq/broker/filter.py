"""Subscriptions as the broker filters them (RocketMQ FilterAPI, ConsumerFilterManager, MessageFilter).

A TAG subscription string is `*` (everything) or tags joined by `||`. The broker filters on the consume
queue's tagsCode, which is Java `String.hashCode()` of the message's TAGS, so a subscription becomes a set of
hash codes; the client re-checks the tag strings because two tags can share a hash.

A SQL92 subscription carries its compiled expression (`rocketq.filter`), evaluated on each stored record's
properties at pull time when the broker runs with enablePropertyFilter=true; the client does not re-check.
One from a heartbeat whose expression does not compile is kept without one (Java's ConsumerFilterManager
does not register it), and pulls against it answer FILTER_DATA_NOT_EXIST.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rocketq.codec.message import java_string_hash
from rocketq.errors import SubscriptionParseFailed
from rocketq.filter import EXPRESSION_SQL92, EXPRESSION_TAG, FilterExpression, compile_sql92, is_tag_type

__all__ = [
    "EXPRESSION_SQL92", "EXPRESSION_TAG", "SUB_ALL", "Subscription", "build_subscription", "check_expression",
    "compile_expression", "is_tag_type", "not_supported", "subscription_from_heartbeat",
]

SUB_ALL = "*"


def not_supported(expression_type: str | None) -> str:
    """The remark of a pull or CHECK_CLIENT_CONFIG refused because enablePropertyFilter is off."""
    return f"The broker does not support consumer to filter message by {expression_type}"


def compile_expression(expression_type: str | None, expression: str | None) -> FilterExpression:
    """FilterFactory.get(type).compile(expr), parsing as leniently as Java's SelectorParser."""
    if expression_type != EXPRESSION_SQL92:
        raise SubscriptionParseFailed(f"unknown expression type [{expression_type}]")
    return compile_sql92(expression or "", strict=False)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One consumer subscription to one topic, ready to filter consume-queue entries.

    `codes` is None for `*` (and for class-filter mode): every entry matches. `expression` is the compiled
    SQL92 selector of a SQL92 subscription (None if it did not compile).
    """

    topic: str
    sub_string: str
    tags: tuple[str, ...]
    codes: frozenset[int] | None
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False
    expression: FilterExpression | None = None

    def is_matched(self, tags_code: int | None) -> bool:
        """ExpressionMessageFilter.isMatchedByConsumeQueue for tag subscriptions."""
        codes = self.codes
        return codes is None or tags_code is None or tags_code in codes


def parse_tags(sub_string: str | None) -> tuple[str, ...]:
    """The tags of a TAG expression; () means everything. Raises SubscriptionParseFailed."""
    if sub_string is None or sub_string == SUB_ALL or not sub_string:
        return ()
    tags = tuple(dict.fromkeys(t.strip() for t in sub_string.split("||") if t.strip()))
    if not tags:
        raise SubscriptionParseFailed(f"parse the consumer's subscription failed: subString split error "
                                      f"[{sub_string}]")
    return tags


def tag_codes(tags: tuple[str, ...]) -> frozenset[int] | None:
    if not tags:
        return None
    return frozenset(java_string_hash(t) for t in tags)


@lru_cache(maxsize=4096)
def build_subscription(topic: str, sub_string: str | None, expression_type: str | None = None,
                       sub_version: int = 0) -> Subscription:
    """FilterAPI.build: a Subscription from a pull header's `subscription` / `expressionType`.

    Cached: a pull/lite-pull consumer sends the same expression with every request.
    """
    if not is_tag_type(expression_type):
        if not sub_string:
            raise SubscriptionParseFailed(f"Expression can't be null! {expression_type}")
        try:
            expression = compile_expression(expression_type, sub_string)
        except SubscriptionParseFailed as exc:
            raise SubscriptionParseFailed(f"parse the consumer's subscription failed: {exc.remark}") from None
        return Subscription(topic=topic, sub_string=sub_string, tags=(), codes=None, sub_version=sub_version,
                            expression_type=expression_type or EXPRESSION_SQL92, expression=expression)
    tags = parse_tags(sub_string)
    return Subscription(
        topic=topic,
        sub_string=SUB_ALL if not tags else (sub_string or SUB_ALL),
        tags=tags,
        codes=tag_codes(tags),
        sub_version=sub_version,
        expression_type=EXPRESSION_TAG,
    )


def subscription_from_heartbeat(topic: str, sub_string: str | None, tags_set: list[str] | tuple[str, ...],
                                expression_type: str | None, sub_version: int,
                                class_filter_mode: bool = False) -> Subscription:
    """A Subscription from a heartbeat's SubscriptionData.

    The codes are recomputed from the tags rather than trusted from the client's codeSet, so they always
    agree with the tagsCode the store computed. A SQL92 subscription is compiled here, once per heartbeat
    that changes it (the compile is cached); one that does not compile is kept without an expression.
    """
    if not is_tag_type(expression_type):
        try:
            expression: FilterExpression | None = compile_expression(expression_type, sub_string)
        except SubscriptionParseFailed:
            expression = None
        return Subscription(topic=topic, sub_string=sub_string or "", tags=(), codes=None,
                            sub_version=sub_version, expression_type=expression_type or EXPRESSION_TAG,
                            class_filter_mode=class_filter_mode, expression=expression)
    if class_filter_mode:
        tags: tuple[str, ...] = ()
    elif tags_set:
        tags = () if (sub_string or SUB_ALL) == SUB_ALL else tuple(dict.fromkeys(tags_set))
    else:
        try:
            tags = parse_tags(sub_string)
        except SubscriptionParseFailed:
            tags = ()
    return Subscription(
        topic=topic,
        sub_string=sub_string or SUB_ALL,
        tags=tags,
        codes=tag_codes(tags),
        sub_version=sub_version,
        expression_type=EXPRESSION_TAG,
        class_filter_mode=class_filter_mode,
    )


def check_expression(expression_type: str | None, expression: str | None) -> None:
    """CHECK_CLIENT_CONFIG with the property filter on: a SQL92 expression must compile.

    Raises SubscriptionParseFailed (a FilterExpressionError says where). TAG expressions are not
    checked, as in Java."""
    if not is_tag_type(expression_type):
        compile_expression(expression_type, expression)
