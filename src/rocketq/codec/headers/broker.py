"""Broker request/response headers: send, pull, query, offsets, clients, transactions, admin.

Field names are the snake_case of the Java field (the extFields key) unless ``Key`` says
otherwise; a field without a default is ``@CFNotNull`` in Java and required here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

from rocketq.codec.headers._compiler import BoundaryType, CommandHeader, Key, Long, header

__all__ = [
    "CheckTransactionStateRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "GetProducerConnectionListRequestHeader",
    "GetSubscriptionGroupConfigRequestHeader",
    "GetTopicConfigRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageResponseHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
]


# -- send -----------------------------------------------------------------------------------------


@header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10, long names) and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (310/320, a..n)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    broker_name: Annotated[str | None, Key("bname")] = None

    V2_KEYS: ClassVar[Mapping[str, str]] = {
        "producer_group": "a",
        "topic": "b",
        "default_topic": "c",
        "default_topic_queue_nums": "d",
        "queue_id": "e",
        "sys_flag": "f",
        "born_timestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsume_times": "j",
        "unit_mode": "k",
        "max_reconsume_times": "l",
        "batch": "m",
        "broker_name": "n",
    }

    @classmethod
    def from_ext_v2(cls, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
        raise NotImplementedError  # replaced by @header

    def to_ext_v2(self) -> dict[str, str]:
        raise NotImplementedError  # replaced by @header


@header
class SendMessageResponseHeader(CommandHeader):
    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None
    # Read by the Java producer without a null check: a broker always sends both.
    msg_region: Annotated[str | None, Key("MSG_REGION")] = None
    trace_on: Annotated[bool | None, Key("TRACE_ON")] = None


# -- pull / query -----------------------------------------------------------------------------------


@header
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    request_source: int | None = None
    proxy_froward_client_id: str | None = None  # sic: RocketMQ's spelling
    broker_name: Annotated[str | None, Key("bname")] = None


@header
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long
    offset_delta: Long | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


@header
class QueryMessageRequestHeader(CommandHeader):
    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long
    # Not a Java header field but an extra extField the client adds for msgId (UNIQ_KEY) lookups.
    unique_key_query: Annotated[bool, Key("_UNIQUE_KEY_QUERY")] = False


@header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


@header
class ViewMessageRequestHeader(CommandHeader):
    offset: Long
    topic: str | None = None


# -- offsets --------------------------------------------------------------------------------------


@header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    # Tri-state on purpose: only an explicit false answers QUERY_NOT_FOUND for a fresh queue.
    set_zero_if_not_found: bool | None = None


@header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: Long


@header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long


@header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    committed: bool = True


@header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: Long


@header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int


@header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: Long


@header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    topic: str
    queue_id: int


@header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Long


@header
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    timestamp: Long
    boundary_type: BoundaryType = BoundaryType.LOWER


@header
class SearchOffsetResponseHeader(CommandHeader):
    offset: Long


# -- clients and consumers ------------------------------------------------------------------------


@header
class UnregisterClientRequestHeader(CommandHeader):
    client_id: Annotated[str, Key("clientID")]
    producer_group: str | None = None
    consumer_group: str | None = None


@header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumer_group: str


@header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumer_group: str


@header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumer_group: str


@header
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str


# -- transactions ---------------------------------------------------------------------------------


@header
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    msg_id: str
    topic: str | None = None
    from_transaction_check: bool = False
    transaction_id: str | None = None
    # RpcRequestHeader.bname, which a Java 4.9.8 producer sends too
    broker_name: Annotated[str | None, Key("bname")] = None


@header
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: Long
    commit_log_offset: Long
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    broker_name: Annotated[str | None, Key("bname")] = None


# -- admin (broker) -------------------------------------------------------------------------------


@header
class CreateTopicRequestHeader(CommandHeader):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    # @CFNotNull in Java but always defaulted there too; a missing value means false.
    order: bool = False
    attributes: str | None = None
    force: bool = False


@header
class DeleteTopicRequestHeader(CommandHeader):
    topic: str


@header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str


@header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str
    topic: str | None = None


@header
class GetTopicConfigRequestHeader(CommandHeader):
    topic: str


@header
class GetSubscriptionGroupConfigRequestHeader(CommandHeader):
    group: str


@header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    group_name: str
    clean_offset: bool = False
