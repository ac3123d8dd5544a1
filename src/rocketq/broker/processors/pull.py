"""PULL_MESSAGE / LITE_PULL_MESSAGE (RocketMQ PullMessageProcessor).

The hot path of consumption: one header decode, a few dict probes for permissions and the subscription, one
store read, one response whose body is the list of memoryview slices the store returned (written with
writelines, never joined). A pull that finds nothing and may be suspended is parked in the hold service and
answered later (long polling).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rocketq.broker.client_manager import BROADCASTING
from rocketq.broker.filter import Subscription, build_subscription, is_tag_type, not_supported
from rocketq.broker.long_polling import PullRequest
from rocketq.broker.message_filter import record_filter_for
from rocketq.codec.codes import ResponseCode
from rocketq.codec.headers import PullMessageRequestHeader
from rocketq.errors import SubscriptionParseFailed
from rocketq.remoting.channel import channel_address

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.codec.command import RemotingCommand

log = logging.getLogger("rocketq.broker.pull")

# PullSysFlag (PROTOCOL.md §4.6)
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL = 0x10

PERM_READ = 4
MASTER_ID = 0

SUCCESS = int(ResponseCode.SUCCESS)
PULL_NOT_FOUND = int(ResponseCode.PULL_NOT_FOUND)
PULL_RETRY_IMMEDIATELY = int(ResponseCode.PULL_RETRY_IMMEDIATELY)
PULL_OFFSET_MOVED = int(ResponseCode.PULL_OFFSET_MOVED)

# Store status name -> response code (PROTOCOL.md §2.2). NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE
# depend on the request offset and are handled apart.
STATUS_CODES: dict[str, int] = {
    "FOUND": SUCCESS,
    "NO_MATCHED_MESSAGE": PULL_RETRY_IMMEDIATELY,
    "MESSAGE_WAS_REMOVING": PULL_RETRY_IMMEDIATELY,
    "OFFSET_TOO_SMALL": PULL_OFFSET_MOVED,
    "OFFSET_OVERFLOW_ONE": PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": PULL_OFFSET_MOVED,
    "OFFSET_FOUND_NULL": PULL_NOT_FOUND,
}
_EMPTY_QUEUE_STATUSES = frozenset({"NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE"})


def response_code_for(status_name: str, request_offset: int) -> int:
    """The pull response code for a store status (PROTOCOL.md §2.2 table)."""
    if status_name in _EMPTY_QUEUE_STATUSES:
        return PULL_OFFSET_MOVED if request_offset != 0 else PULL_NOT_FOUND
    code = STATUS_CODES.get(status_name)
    if code is None:
        raise ValueError(f"unknown store status {status_name}")
    return code


class PullMessageProcessor:
    """Answers PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) the same way."""

    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        # store status member -> (response code for offset 0, for any other offset, remark)
        self._status_table: dict[Any, tuple[int, int, str]] = {}
        # BrokerStats.on_get feeds getTransferredTps / msgGetTotalTodayNow.
        self._on_get = getattr(getattr(controller, "stats", None), "on_get", None)

    def _suggest(self, sgc: Any, result: Any, topic: str, queue_id: int) -> int:
        """slaveReadEnable: a consumer reading further back than memory holds goes to a slave
        (whichBrokerWhenConsumeSlowly); one that is caught up goes to the group's broker (the master)."""
        if result.message_count and self._ctl.store.suggest_pulling_from_slave(
                topic, queue_id, result.next_begin_offset):
            return int(sgc.which_broker_when_consume_slowly)
        return int(sgc.broker_id)

    # Handler signature of the remoting registry.
    def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        return self.process_request(request, channel, True)

    def execute_request_when_wakeup(self, pull_request: PullRequest) -> None:
        """Re-run a parked pull (message arrived or time is up) and answer it on its channel."""
        request = pull_request.request
        channel = pull_request.channel
        try:
            response = self.process_request(request, channel, False)
        except Exception as exc:
            remark = getattr(exc, "remark", None) or str(exc)
            code = getattr(exc, "code", ResponseCode.SYSTEM_ERROR)
            if not isinstance(exc, SubscriptionParseFailed):
                log.exception("process request wrapper exception, %s", channel_address(channel))
            response = request.make_response(int(code), remark)
        if response is not None:
            try:
                channel.send(response)
            except Exception:
                log.warning("processRequestWrapper response to %s failed", channel_address(channel),
                            exc_info=True)

    def process_request(self, request: RemotingCommand, channel: Any,
                        broker_allow_suspend: bool) -> RemotingCommand | None:
        h = PullMessageRequestHeader.from_ext(request.ext_fields)
        ctl = self._ctl
        bc = ctl.broker_config
        if not bc.broker_permission & PERM_READ:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{bc.broker_ip1}] pulling message is forbidden")

        group = h.consumer_group
        sgc = ctl.subscription_manager.find_subscription_group_config(group)
        if sgc is None:
            return request.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                         f"subscription group [{group}] does not exist")
        if not sgc.consume_enable:
            return request.make_response(ResponseCode.NO_PERMISSION,
                                         f"subscription group no permission, {group}")

        topic = h.topic
        topic_config = ctl.topic_manager.select_topic_config(topic)
        if topic_config is None:
            log.error("the topic %s not exist, consumer: %s", topic, channel_address(channel))
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST,
                                         f"topic[{topic}] not exist, apply first please!")
        if not topic_config.perm & PERM_READ:
            return request.make_response(ResponseCode.NO_PERMISSION,
                                         f"the topic[{topic}] pulling message is forbidden")
        queue_id = h.queue_id
        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            info = (f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                    f"[{topic_config.read_queue_nums}] consumer:[{channel_address(channel)}]")
            log.warning(info)
            return request.make_response(ResponseCode.INVALID_PARAMETER, info)

        sys_flag = h.sys_flag
        subscription: Subscription | None
        if sys_flag & FLAG_SUBSCRIPTION:
            if not is_tag_type(h.expression_type) and h.subscription and not bc.enable_property_filter:
                return request.make_response(ResponseCode.SYSTEM_ERROR, not_supported(h.expression_type))
            try:
                subscription = build_subscription(topic, h.subscription, h.expression_type, h.sub_version)
            except SubscriptionParseFailed as exc:
                log.warning("Parse the consumer's subscription[%s] failed, group: %s", h.subscription, group)
                return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, exc.remark)
        else:
            group_info = ctl.consumer_manager.get_consumer_group_info(group)
            if group_info is None:
                log.warning("the consumer's group info not exist, group: %s", group)
                return request.make_response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                             "the consumer's group info not exist")
            if not sgc.consume_broadcast_enable and group_info.message_model == BROADCASTING:
                return request.make_response(ResponseCode.NO_PERMISSION,
                                             f"the consumer group[{group}] can not consume by broadcast way")
            subscription = group_info.subscription_table.get(topic)
            if subscription is None:
                log.warning("the consumer's subscription not exist, group: %s, topic:%s", group, topic)
                return request.make_response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                             "the consumer's subscription not exist")
            if subscription.sub_version < h.sub_version:
                log.warning("The broker's subscription is not latest, group: %s %s", group,
                            subscription.sub_string)
                return request.make_response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                             "the consumer's subscription not latest")
            if not is_tag_type(subscription.expression_type):
                if subscription.expression is None:
                    return request.make_response(
                        ResponseCode.FILTER_DATA_NOT_EXIST,
                        "The broker's consumer filter data is not exist!Your expression may be wrong!")
                if not bc.enable_property_filter:
                    return request.make_response(ResponseCode.SYSTEM_ERROR,
                                                 not_supported(subscription.expression_type))

        if broker_allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and bc.broker_id == MASTER_ID:
            ctl.offset_manager.commit_offset(channel_address(channel), group, topic, queue_id,
                                             h.commit_offset)

        offset = h.queue_offset
        store = ctl.store
        if offset < 0:
            # The store's OFFSET_TOO_SMALL answer: the client moves to minOffset and carries on.
            min_offset = store.get_min_offset_in_queue(topic, queue_id)
            return request.make_response(PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", {
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": str(min_offset),
                "minOffset": str(min_offset),
                "maxOffset": str(store.get_max_offset_in_queue(topic, queue_id)),
            })

        max_nums = h.max_msg_nums
        if max_nums < 1:
            max_nums = 1
        max_bytes = h.max_msg_bytes
        if max_bytes is not None and max_bytes <= 0:
            max_bytes = None
        result = store.get_message(topic, queue_id, offset, max_nums,
                                   None if subscription is None else subscription.codes, max_bytes,
                                   record_filter_for(ctl, group, topic, subscription))

        status = result.status
        entry = self._status_table.get(status)
        if entry is None:
            name = status.name
            entry = (response_code_for(name, 0), response_code_for(name, 1), name)
            self._status_table[status] = entry
        code = entry[0] if offset == 0 else entry[1]
        remark = entry[2]

        if code == PULL_NOT_FOUND and broker_allow_suspend and sys_flag & FLAG_SUSPEND:
            polling_millis = h.suspend_timeout_millis
            if not bc.long_polling_enable:
                polling_millis = bc.short_polling_time_mills
            ctl.hold_service.suspend_pull_request(topic, queue_id, PullRequest(
                request, channel, topic, queue_id, offset, subscription, polling_millis,
                self.execute_request_when_wakeup))
            return None

        suggest = self._suggest(sgc, result, topic, queue_id) if bc.slave_read_enable else MASTER_ID
        if code == PULL_OFFSET_MOVED:
            if bc.is_slave:
                # A slave never corrects a consumer's offset (offsetCheckInSlave off): it may only lag.
                code = PULL_RETRY_IMMEDIATELY
                suggest = sgc.broker_id
                log.warning("PULL_OFFSET_MOVED:none correction. topic=%s, groupId=%s, requestOffset=%d, "
                            "suggestBrokerId=%d", topic, group, offset, suggest)
            else:
                log.info("PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, requestOffset=%d, "
                         "newOffset=%d, status=%s", topic, group, offset, result.next_begin_offset, remark)

        ext = {
            "suggestWhichBrokerId": str(suggest),
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        if code == SUCCESS:
            if self._on_get is not None:
                self._on_get(result.message_count)
            return request.make_response(SUCCESS, remark, ext, result.buffers)
        return request.make_response(code, remark, ext)
