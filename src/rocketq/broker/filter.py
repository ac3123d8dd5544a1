"""Tag subscriptions as the broker filters them (RocketMQ FilterAPI + ExpressionMessageFilter).

A subscription string is `*` (everything) or tags joined by `||`. The broker filters on the consume queue's
tagsCode, which is Java `String.hashCode()` of the message's TAGS, so a subscription becomes a set of hash
codes; the client re-checks the tag strings because two tags can share a hash. SQL92 needs the property
filter, which this broker does not have yet: such a subscription fails to parse with a clear remark.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rocketq.codec.message import java_string_hash
from rocketq.errors import SubscriptionParseFailed

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"

SQL92_NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    return not expression_type or expression_type == EXPRESSION_TAG


@dataclass(frozen=True, slots=True)
class Subscription:
    """One consumer subscription to one topic, ready to filter consume-queue entries.

    `codes` is None for `*` (and for class-filter mode): every entry matches.
    """

    topic: str
    sub_string: str
    tags: tuple[str, ...]
    codes: frozenset[int] | None
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False

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
        if expression_type == EXPRESSION_SQL92:
            raise SubscriptionParseFailed(SQL92_NOT_SUPPORTED)
        raise SubscriptionParseFailed(f"parse the consumer's subscription failed: unknown expression type "
                                      f"[{expression_type}]")
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
    agree with the tagsCode the store computed. A SQL92 subscription is kept (with no codes) so that the
    group still shows it; pulls against it are refused.
    """
    if not is_tag_type(expression_type):
        return Subscription(topic=topic, sub_string=sub_string or "", tags=(), codes=None,
                            sub_version=sub_version, expression_type=expression_type or EXPRESSION_TAG,
                            class_filter_mode=class_filter_mode)
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
    """CHECK_CLIENT_CONFIG: accept any well-formed TAG expression; refuse SQL92 (no property filter)."""
    if is_tag_type(expression_type):
        parse_tags(expression)
        return
    if expression_type == EXPRESSION_SQL92:
        raise SubscriptionParseFailed(SQL92_NOT_SUPPORTED)
    raise SubscriptionParseFailed(f"unknown expression type [{expression_type}]")
