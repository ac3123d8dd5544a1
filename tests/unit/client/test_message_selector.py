"""MessageSelector and the subscription data it becomes (FilterAPI.build on the client)."""

from __future__ import annotations

import pytest

import rocketq
import rocketq.aio
from rocketq.client.consumer.subscription import MessageSelector, build_subscription
from rocketq.errors import FilterExpressionError, InvalidArgument


def test_exported_from_both_facades() -> None:
    assert rocketq.MessageSelector is MessageSelector
    assert rocketq.aio.MessageSelector is MessageSelector


def test_sql92_subscription_data() -> None:
    sub = build_subscription("T", MessageSelector.by_sql("region = 'eu' AND amount > 100"))
    assert sub.expression_type == "SQL92"
    assert sub.sub_string == "region = 'eu' AND amount > 100"
    # no tags: the client has nothing to re-check, the broker filters (as Java's client)
    assert sub.tags_set == () and sub.code_set == ()
    assert sub.sub_version > 0
    doc = sub.to_obj()
    assert doc["expressionType"] == "SQL92" and doc["subString"] == "region = 'eu' AND amount > 100"


def test_by_tag_is_the_plain_string() -> None:
    a = build_subscription("T", MessageSelector.by_tag("A || B"))
    b = build_subscription("T", "A || B")
    assert (a.tags_set, a.code_set, a.expression_type) == (b.tags_set, b.code_set, "TAG")
    assert build_subscription("T", MessageSelector.by_tag(None)).sub_string == "*"


def test_malformed_sql_fails_with_its_position() -> None:
    with pytest.raises(FilterExpressionError) as info:
        build_subscription("T", MessageSelector.by_sql("region = 'eu' AND amount >"))
    assert info.value.position == len("region = 'eu' AND amount >")
    assert isinstance(info.value, InvalidArgument)
    with pytest.raises(FilterExpressionError, match="column 7"):
        build_subscription("T", MessageSelector.by_sql("a = 1 b"))  # Java would ignore " b"; we refuse


def test_unknown_type_and_wrong_argument() -> None:
    with pytest.raises(InvalidArgument):
        build_subscription("T", MessageSelector("XPATH", "/a"))
    with pytest.raises(InvalidArgument):
        build_subscription("T", 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", [rocketq.aio.PushConsumer, rocketq.aio.LitePullConsumer])
def test_consumers_refuse_a_bad_expression_at_subscribe(cls: type) -> None:
    consumer = cls("SelectorGroup", namesrv_addr="127.0.0.1:9")
    with pytest.raises(FilterExpressionError) as info:
        consumer.subscribe("T", MessageSelector.by_sql("a BETWEEN 9 AND 1"))
    assert info.value.position == len("a BETWEEN ")
    consumer.subscribe("T", MessageSelector.by_sql("a BETWEEN 1 AND 9"))
