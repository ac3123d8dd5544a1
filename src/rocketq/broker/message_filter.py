"""The pull-time record filter (MessageFilter.isMatchedByCommitLog, retry topics included).

Tag codes are matched on the consume queue by the store; what is left to decide per stored record is a
SQL92 subscription's expression on the record's properties. The store calls the predicate built here for
each candidate record and never decodes a record itself.

With filterSupportRetry, a pull from a group's retry topic filters each message with the group's SQL92
expression for the topic it was first sent to (its RETRY_TOPIC property), as Java does; a message whose
original topic has no SQL92 subscription in the group passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocketq.broker.filter import Subscription, is_tag_type
from rocketq.codec.properties import MessageConst, get_property_bytes, needle
from rocketq.codec.record import properties_span
from rocketq.store.reader import RecordFilter

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
_RETRY_TOPIC_KEY = needle(MessageConst.PROPERTY_RETRY_TOPIC).encode()



def record_filter_for(ctl: BrokerController, group: str, topic: str,
                      subscription: Subscription | None) -> RecordFilter | None:
    """The predicate a pull passes to the store, or None when the consume queue decides alone."""
    if subscription is None or subscription.class_filter_mode:
        return None
    if ctl.broker_config.filter_support_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return _retry_filter(ctl, topic[len(RETRY_GROUP_TOPIC_PREFIX):])
    if is_tag_type(subscription.expression_type) or subscription.expression is None:
        return None
    return subscription.expression.select_records


def _retry_filter(ctl: BrokerController, group: str) -> RecordFilter | None:
    info = ctl.consumer_manager.get_consumer_group_info(group)
    if info is None:
        return None
    table = info.subscription_table
    if not any(s.expression is not None for s in table.values()):
        return None  # no SQL92 subscription in the group: nothing to decide per record

    def matches(record: bytes) -> bool:
        p0, p1 = properties_span(record)
        real = get_property_bytes(record, _RETRY_TOPIC_KEY, p0, p1)
        sub = table.get(real.decode("utf-8", "replace")) if real is not None else None
        return sub is None or sub.expression is None or sub.expression.matches_record(record)

    def select_retried(buf: memoryview, offsets: Sequence[int], limit: int) -> list[int]:
        """Record by record: each may need another expression (or none)."""
        out: list[int] = []
        for j, at in enumerate(offsets):
            size = int.from_bytes(buf[at:at + 4], "big")
            if matches(bytes(buf[at:at + size])):
                out.append(j)
                if len(out) >= limit:
                    break
        return out
    return select_retried
