"""Tag subscription parsing and matching (broker/filter.py)."""

from __future__ import annotations

import pytest

from rocketq.broker.filter import (
    build_subscription,
    check_expression,
    parse_tags,
    subscription_from_heartbeat,
)
from rocketq.codec.message import tags_code
from rocketq.errors import SubscriptionParseFailed


def test_star_matches_everything() -> None:
    for expr in ("*", "", None):
        sub = build_subscription("t", expr)
        assert sub.codes is None and sub.sub_string == "*"
        assert sub.is_matched(0) and sub.is_matched(12345)


def test_tags_become_java_hash_codes() -> None:
    sub = build_subscription("t", "TagA || TagB ||TagC")
    assert sub.tags == ("TagA", "TagB", "TagC")
    # Java "TagA".hashCode() == 2598919
    assert 2598919 in sub.codes  # type: ignore[operator]
    assert sub.is_matched(tags_code("TagB"))
    assert not sub.is_matched(tags_code("TagD"))
    assert not sub.is_matched(0)  # an untagged message does not match a tag subscription


def test_unknown_tags_code_matches() -> None:
    # RocketMQ: a consume-queue entry without a tagsCode (null) passes every filter.
    assert build_subscription("t", "a").is_matched(None)


@pytest.mark.parametrize("bad", ["||", " || ", "|| ||"])
def test_split_error(bad: str) -> None:
    with pytest.raises(SubscriptionParseFailed):
        parse_tags(bad)


def test_sql92_subscription_carries_its_compiled_expression() -> None:
    sub = build_subscription("t", "a > 5", "SQL92")
    assert sub.expression is not None and sub.codes is None
    assert sub.expression.matches_properties({"a": "6"})
    # the broker parses as leniently as Java: trailing input is ignored
    assert build_subscription("t", "a > 5 junk", "SQL92").expression is not None


def test_sql92_parse_failures() -> None:
    with pytest.raises(SubscriptionParseFailed) as exc:
        build_subscription("t", "a >", "SQL92")
    assert exc.value.code == 23
    assert "parse the consumer's subscription failed" in exc.value.remark
    with pytest.raises(SubscriptionParseFailed, match="can't be null"):
        build_subscription("t", "", "SQL92")
    with pytest.raises(SubscriptionParseFailed, match="column 4"):
        check_expression("SQL92", "a >")
    with pytest.raises(SubscriptionParseFailed):
        check_expression("XPATH", "a")
    check_expression("SQL92", "a > 5")
    check_expression("TAG", "||")  # Java does not check TAG expressions here
    check_expression(None, "*")


def test_heartbeat_sql92_that_does_not_compile_is_kept_without_expression() -> None:
    good = subscription_from_heartbeat("t", "a IS NULL", [], "SQL92", 3)
    assert good.expression is not None and good.expression_type == "SQL92"
    bad = subscription_from_heartbeat("t", "a = = 1", [], "SQL92", 3)
    assert bad.expression is None and bad.expression_type == "SQL92"


def test_non_ascii_tag() -> None:
    sub = build_subscription("t", "标签")
    assert sub.is_matched(tags_code("标签"))


def test_heartbeat_subscription_recomputes_codes_from_tags() -> None:
    sub = subscription_from_heartbeat("t", "a || b", ["a", "b"], "TAG", 7)
    assert sub.codes == frozenset({tags_code("a"), tags_code("b")})
    assert sub.sub_version == 7
    star = subscription_from_heartbeat("t", "*", [], "TAG", 1)
    assert star.codes is None
    no_tags_set = subscription_from_heartbeat("t", "x||y", [], None, 1)
    assert no_tags_set.codes == frozenset({tags_code("x"), tags_code("y")})
    class_filter = subscription_from_heartbeat("t", "a", ["a"], "TAG", 1, class_filter_mode=True)
    assert class_filter.codes is None
    sql = subscription_from_heartbeat("t", "a > 1", [], "SQL92", 1)
    assert sql.expression_type == "SQL92"
