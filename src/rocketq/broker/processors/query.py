"""QueryMessageProcessor: QUERY_MESSAGE (by key / UNIQ_KEY through the index) and VIEW_MESSAGE_BY_ID.

Both answer with raw stored records (PROTOCOL.md §3.1), handed to the transport as slices of the
mapped commit log, never copied.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import QueryMessageRequestHeader, ViewMessageRequestHeader
from rocketq.errors import InvalidParameter, SystemError_

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.query")


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
