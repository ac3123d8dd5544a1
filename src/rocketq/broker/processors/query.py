"""QueryMessageProcessor: QUERY_MESSAGE (by key / UNIQ_KEY through the index), VIEW_MESSAGE_BY_ID
and QUERY_CONSUME_QUEUE (``mqadmin queryCq``: raw consume-queue entries).

The message queries answer with raw stored records (PROTOCOL.md §3.1), handed to the transport as
slices of the mapped commit log, never copied.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.broker.processors.admin import subscription_json
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import (
    CommandHeader,
    Long,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
    header,
)
from rocketq.errors import InvalidParameter, SystemError_

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.query")

# An admin asks for a screenful; the cap keeps one request from walking a whole queue.
MAX_QUERY_CONSUME_QUEUE_COUNT = 1000


@header
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    index: Long
    count: int
    consumer_group: str | None = None


class QueryMessageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller

    def query_message(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(request.ext_fields)
        max_num = h.max_num
        if h.unique_key_query:
            # A unique key names one message, but a retried one is stored several times.
            max_num = self._ctl.broker_config.default_query_max_num
        if max_num <= 0:
            raise InvalidParameter(f"maxNum must be positive: {max_num}")
        result = self._ctl.store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = {
            "indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
            "indexLastUpdatePhyoffset": str(result.index_last_update_phyoffset),
        }
        if result.buffers:
            return request.make_response(ResponseCode.SUCCESS, None, ext, list(result.buffers))
        return request.make_response(ResponseCode.QUERY_NOT_FOUND,
                                     "can not find message, maybe time range not correct", ext)

    def view_message_by_id(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext(request.ext_fields)
        if h.offset < 0:
            raise InvalidParameter(f"the commit log offset {h.offset} is negative")
        record = self._ctl.store.look_message_by_offset(h.offset)
        if record is None:
            raise SystemError_(f"can not find message by the offset, {h.offset}")
        return request.make_response(ResponseCode.SUCCESS, None, None, [record])

    def query_consume_queue(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """QueryConsumeQueueResponseBody: ``count`` entries from ``index`` with the queue's bounds."""
        h = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        cq = ctl.store.consume_queues.get((h.topic, h.queue_id))
        if cq is None:
            raise SystemError_(f"{h.queue_id}@{h.topic} is not exist!")
        body: dict[str, object] = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
        if h.consumer_group is not None:
            sub = ctl.consumer_manager.find_subscription_data(h.consumer_group, h.topic)
            if sub is None:
                body["filterData"] = f"{h.consumer_group}@{h.topic} is not online!"
            else:
                body["subscriptionData"] = subscription_json(h.topic, sub)
        count = max(0, min(h.count, MAX_QUERY_CONSUME_QUEUE_COUNT))
        queue_data = []
        for index in range(max(h.index, cq.min_offset), min(h.index + count, cq.max_offset)):
            entry = cq.entry(index)
            if entry is None:
                break
            phys, size, tags = entry
            queue_data.append({"eval": False, "physicOffset": phys, "physicSize": size, "tagsCode": tags})
        body["queueData"] = queue_data
        remark = None if queue_data or h.index < cq.max_offset else (
            f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!")
        return request.make_response(ResponseCode.SUCCESS, remark, None, orjson.dumps(body))
