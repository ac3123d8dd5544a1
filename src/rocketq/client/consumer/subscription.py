"""Subscriptions and consumer options: what push and lite-pull consumers share besides rebalancing.

``build_subscription`` is RocketMQ's FilterAPI.build: a TAG expression (a plain string, or
``MessageSelector.by_tag``) is ``"*"`` or ``"A || B"``, whose tags become the tag set and their
Java hash codes the code set the broker filters with; a SQL92 one (``MessageSelector.by_sql``) is
sent as it is, with expressionType SQL92, and the broker evaluates it on message properties (it
needs enablePropertyFilter=true). The client does not filter SQL92 results again, as Java's does
not. A malformed expression of either kind is refused at the call site, before anything is sent:
SQL92 with ``FilterExpressionError`` (an ``InvalidArgument``) saying where.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from rocketq.client.config import ClientConfig
from rocketq.client.consumer.types import DEFAULT_CONSUMER_GROUP, ConsumerConfig
from rocketq.client.producer.validators import check_topic
from rocketq.codec.bodies import ConsumeFromWhere, MessageModel, SubscriptionData
from rocketq.codec.message import MessageConst, MessageExt, java_string_hash
from rocketq.errors import InvalidArgument, InvalidMessage
from rocketq.filter import EXPRESSION_SQL92, EXPRESSION_TAG, compile_sql92, is_tag_type

if TYPE_CHECKING:
    from rocketq.client.instance import MQClientInstance

__all__ = ["SUB_ALL", "MessageSelector", "build_subscription", "check_client_in_broker",
           "check_subscribe_topic", "reset_retry_topic", "split_options"]

SUB_ALL = "*"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """Which messages of a topic a consumer wants (RocketMQ's MessageSelector).

    ``MessageSelector.by_tag("A || B")`` is the same as subscribing with the plain string;
    ``MessageSelector.by_sql("region = 'eu' AND amount > 100")`` selects by message properties
    (RocketMQ's SQL92 subset; the ``TAGS`` property is the tag), filtered by the broker.
    """

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        return cls(EXPRESSION_SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None = SUB_ALL) -> MessageSelector:
        return cls(EXPRESSION_TAG, tag or SUB_ALL)

_C = TypeVar("_C", bound=ConsumerConfig)


def check_subscribe_topic(topic: str) -> None:
    """A topic name a consumer may subscribe to; ``InvalidArgument`` otherwise."""
    try:
        check_topic(topic)
    except InvalidMessage as e:
        raise InvalidArgument(str(e)) from None


def build_subscription(topic: str, sub_expression: str | MessageSelector | None) -> SubscriptionData:
    """SubscriptionData of a TAG expression or a selector; ``InvalidArgument`` if a tag expression
    names no tag, ``FilterExpressionError`` if a SQL92 one does not parse."""
    if isinstance(sub_expression, MessageSelector):
        if sub_expression.expression_type == EXPRESSION_SQL92:
            compile_sql92(sub_expression.expression)  # raises with the position; the broker compiles its own
            return SubscriptionData(topic=topic, sub_string=sub_expression.expression,
                                    sub_version=int(time.time() * 1000), expression_type=EXPRESSION_SQL92)
        if sub_expression.expression_type != EXPRESSION_TAG:
            raise InvalidArgument(f"unknown expression type {sub_expression.expression_type!r}")
        sub_expression = sub_expression.expression
    if sub_expression is not None and not isinstance(sub_expression, str):
        raise InvalidArgument(
            f"the subscription expression must be a string or a MessageSelector, not "
            f"{type(sub_expression).__name__}"
        )
    now = int(time.time() * 1000)
    expr = (sub_expression or "").strip()
    if not expr or expr == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=now)
    tags = tuple(dict.fromkeys(t.strip() for t in expr.split("||") if t.strip()))
    if not tags:
        raise InvalidArgument(f"subString split error: {sub_expression!r} names no tag (use '*' for all)")
    return SubscriptionData(
        topic=topic,
        sub_string=expr,
        tags_set=tags,
        code_set=tuple(java_string_hash(t) for t in tags),
        sub_version=now,
    )


async def check_client_in_broker(client: MQClientInstance, group: str,
                                 subscriptions: Iterable[SubscriptionData],
                                 on_failure: Callable[[], Awaitable[None]]) -> None:
    """MQClientInstance.checkClientInBroker, run by ``start()``: ask a broker of each topic
    subscribed by SQL92 whether it can filter so (enablePropertyFilter). If not (or if it cannot be
    asked), ``on_failure`` (the consumer's shutdown) runs and ``MQClientError`` with the broker's
    answer is raised: the consumer fails at start as a Java one does, not at every pull."""
    for sub in list(subscriptions):
        if is_tag_type(sub.expression_type):
            continue
        addr = client.find_broker_addr_by_topic(sub.topic)
        if addr is None:
            continue
        try:
            await client.api.check_client_in_broker(addr, group, client.client_id, sub)
        except BaseException:
            await on_failure()
            raise


def reset_retry_topic(msgs: Sequence[MessageExt], retry_topic: str) -> list[MessageExt]:
    """Messages pulled from %RETRY%<group> shown under the topic they were first sent to."""
    out = []
    for m in msgs:
        original = m.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
        if original and m.topic == retry_topic:
            m = dataclasses.replace(m, topic=original)
        out.append(m)
    return out


def _enum_option(enum_type: Any, value: Any) -> Any:
    if isinstance(value, str):
        try:
            return enum_type[value.upper()]
        except KeyError:
            raise InvalidArgument(f"{value!r} is not a {enum_type.__name__}") from None
    return value


def split_options(
    cls: type[_C],
    consumer_group: str | None,
    namesrv_addr: str | None,
    config: _C | None,
    config_base: ClientConfig | None,
    fields: Mapping[str, Any],
) -> _C:
    """The consumer config from a constructor's arguments (any ClientConfig or ``cls`` field)."""
    options = dict(fields)
    for key, enum_type in (("message_model", MessageModel), ("consume_from_where", ConsumeFromWhere)):
        if key in options:
            options[key] = _enum_option(enum_type, options[key])
    if namesrv_addr is not None:
        options["namesrv_addr"] = namesrv_addr
    if consumer_group is not None:
        options["consumer_group"] = consumer_group
    if config is not None:
        return dataclasses.replace(config, **options) if options else config
    if config_base is not None:
        base = {f.name: getattr(config_base, f.name) for f in dataclasses.fields(ClientConfig)}
        options = {**base, **options}
    options.setdefault("consumer_group", DEFAULT_CONSUMER_GROUP)
    try:
        return cls(**options)
    except TypeError as e:
        raise InvalidArgument(f"bad consumer option: {e}") from None
