"""QUERY/UPDATE_CONSUMER_OFFSET, GET_CONSUMER_LIST_BY_GROUP (RocketMQ ConsumerManageProcessor) and the
orderly-consumption queue locks LOCK_BATCH_MQ / UNLOCK_BATCH_MQ."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.codec.bodies import LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketq.errors import ProtocolError
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.consumer")

# RocketMQ's accessMessageInMemoryMaxRatio: data further behind the commit-log tail than this share of
# physical memory is "on disk", where a new group does not get offset 0 for free.
ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


_MEMORY_WINDOW = _total_memory() * ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO // 100


class ConsumerManageProcessor:
    def __init__(self, controller: BrokerController, lock_manager: RebalanceLockManager) -> None:
        self._ctl = controller
        self._locks = lock_manager  # the controller's: the send path reads the same locks

    def query_consumer_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        offset = ctl.offset_manager.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset >= 0:
            return request.make_response(ResponseCode.SUCCESS, None, {"offset": str(offset)})
        if h.set_zero_if_not_found is False:
            return request.make_response(ResponseCode.QUERY_NOT_FOUND,
                                         "Not found, do not set to zero, maybe this group boot first")
        store = ctl.store
        min_offset = store.get_min_offset_in_queue(h.topic, h.queue_id)
        if min_offset <= 0 and self._first_message_in_memory(h.topic, h.queue_id):
            # PROTOCOL.md §7 rule 8: a new group on a young queue starts at 0, as the Java broker does.
            return request.make_response(ResponseCode.SUCCESS, None, {"offset": "0"})
        return request.make_response(ResponseCode.QUERY_NOT_FOUND,
                                     "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def _first_message_in_memory(self, topic: str, queue_id: int) -> bool:
        """checkInMemByConsumeOffset(topic, queueId, 0): an empty queue counts as in memory."""
        store = self._ctl.store
        if store.get_max_offset_in_queue(topic, queue_id) <= 0:
            return True
        phy = self._phy_offset_of(topic, queue_id, 0)
        if phy is None:
            return True
        return int(store.max_phy_offset) - phy < _MEMORY_WINDOW

    def _phy_offset_of(self, topic: str, queue_id: int, offset: int) -> int | None:
        """The commit-log offset of one consume-queue entry, None when it cannot be read.

        The store facade has no call for this, so the consume queue is read directly; any failure means
        "assume in memory", which is also the Java answer for young data.
        """
        store = self._ctl.store
        lookup = getattr(store, "get_commit_log_offset_in_queue", None)
        try:
            if lookup is not None:
                value = lookup(topic, queue_id, offset)
            else:
                cq = store.consume_queues.get((topic, queue_id))
                ents = None if cq is None else cq.entries(offset, 1)
                value = None if ents is None or len(ents) == 0 else int(ents["phys"][0])
        except Exception:
            return None
        return None if value is None or value < 0 else int(value)

    def update_consumer_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext(request.ext_fields)
        self._ctl.offset_manager.commit_offset(channel_address(channel), h.consumer_group, h.topic,
                                               h.queue_id, h.commit_offset)
        return request.make_response(ResponseCode.SUCCESS)

    def get_consumer_list_by_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext(request.ext_fields)
        info = self._ctl.consumer_manager.get_consumer_group_info(h.consumer_group)
        if info is not None:
            client_ids = info.get_all_client_id()
            if client_ids:
                return request.make_response(ResponseCode.SUCCESS, None, None,
                                             orjson.dumps({"consumerIdList": client_ids}))
            log.warning("getAllClientId failed, %s %s", h.consumer_group, channel_address(channel))
        else:
            log.warning("getConsumerGroupInfo failed, %s %s", h.consumer_group, channel_address(channel))
        return request.make_response(ResponseCode.SYSTEM_ERROR,
                                     f"no consumer for this group, {h.consumer_group}")

    def lock_batch_mq(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """LOCK_BATCH_MQ (41): lock the queues an orderly consumer was assigned; answer the ones it holds."""
        try:
            body = LockBatchRequestBody.from_json(request.body_bytes())
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad lock batch body: {exc}")
        if not body.consumer_group or not body.client_id:
            return request.make_response(ResponseCode.INVALID_PARAMETER,
                                         "lock batch body needs consumerGroup and clientId")
        locked = self._locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(ResponseCode.SUCCESS, None, None,
                                     LockBatchResponseBody(lock_ok_mq_set=tuple(locked)).to_json())

    def unlock_batch_mq(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """UNLOCK_BATCH_MQ (42): release queues (rebalanced away or shutting down)."""
        try:
            body = UnlockBatchRequestBody.from_json(request.body_bytes())
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad unlock batch body: {exc}")
        if body.consumer_group and body.client_id:
            self._locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(ResponseCode.SUCCESS)
