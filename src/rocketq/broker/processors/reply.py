"""ReplyMessageProcessor: SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325).

A replier answers a request (see docs/request-reply.md) by sending a message whose properties name
the requester's client id (REPLY_TO_CLIENT). The broker does not route it through a consume queue:
it pushes it with PUSH_REPLY_MESSAGE_TO_CLIENT (326) over the connection that client id
registered by heartbeat (the producer table, as RocketMQ's ProducerManager.findChannel), and the
send is answered SUCCESS only when the requester took it. With ``storeReplyMessageEnable`` (the
default) the reply is also appended to the store, so it can be queried afterwards.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Any

from rocketq.broker.processors.send_wire import P_KEYS, P_TAGS, P_UNIQ, index_keys
from rocketq.broker.topic_manager import PERM_WRITE
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import SendMessageRequestHeader
from rocketq.codec.message import tags_code
from rocketq.codec.properties import MessageConst, append_properties, get_property, needle
from rocketq.errors import MessageIllegal, NoPermission, RocketQError, TopicNotExist
from rocketq.store.model import MessageToStore

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController

__all__ = ["ReplyMessageProcessor"]

log = logging.getLogger("rocketq.broker.reply")

_V2 = int(RequestCode.SEND_REPLY_MESSAGE_V2)
# RocketMQ's Broker2Client.callClient waits this long for the requester to take the reply.
PUSH_TIMEOUT = 10.0
_REPLY_TO = MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT
_P_REPLY_TO = needle(_REPLY_TO)


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


class ReplyMessageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self._ctl = controller
        self._rand = random.Random()

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        ext = request.ext_fields
        h = (SendMessageRequestHeader.from_ext_v2(ext) if request.code == _V2
             else SendMessageRequestHeader.from_ext(ext))
        ctl = self._ctl
        bc = ctl.broker_config
        region = {"MSG_REGION": bc.region_id, "TRACE_ON": "true" if bc.trace_on else "false"}
        cfg = ctl.topic_manager.select_topic_config(h.topic)
        if cfg is None:
            raise TopicNotExist(f"topic[{h.topic}] not exist, apply first please!")
        if not bc.broker_permission & PERM_WRITE or not cfg.perm & PERM_WRITE:
            raise NoPermission(f"the topic[{h.topic}] sending message is forbidden")
        max_size = ctl.store_config.max_message_size
        body = request.body_bytes()  # one copy, shared by the push and the store
        if len(body) > max_size:
            raise MessageIllegal(f"the message body size over max value, MAX: {max_size}")
        queue_id = h.queue_id
        if queue_id < 0:
            queue_id = self._rand.randrange(max(1, cfg.write_queue_nums))
        props = h.properties or ""

        pushed, remark = await self._push(body, channel, h, props)
        if pushed:
            response = request.make_response(ResponseCode.SUCCESS, None, {
                **region, "msgId": "0", "queueId": str(queue_id), "queueOffset": "0"})
        else:
            response = request.make_response(ResponseCode.SYSTEM_ERROR, remark, region)
        if bc.store_reply_message_enable:
            await self._store(body, channel, h, props, queue_id, response)
        return response

    async def _push(self, body: bytes, channel: Any, h: SendMessageRequestHeader,
                    props: str) -> tuple[bool, str]:
        """Hand the reply to the requester's connection: (taken, remark when not)."""
        sender = get_property(props, _P_REPLY_TO)
        if not sender:
            log.warning("%s is null, can not reply message", _REPLY_TO)
            return False, f"reply message properties[{_REPLY_TO}] is null"
        target = self._ctl.producer_manager.find_channel(sender)
        if target is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return False, remark
        ip, _, port = str(channel.remote_address).rpartition(":")
        now = str(int(time.time() * 1000))
        push_props = append_properties(props, (MessageConst.PROPERTY_PUSH_REPLY_TIME, now))
        fields = {
            "producerGroup": h.producer_group,
            "topic": h.topic,
            "defaultTopic": h.default_topic,
            "defaultTopicQueueNums": str(h.default_topic_queue_nums),
            "queueId": str(h.queue_id),
            "sysFlag": str(h.sys_flag),
            "bornTimestamp": str(h.born_timestamp),
            "flag": str(h.flag),
            "properties": push_props,
            "reconsumeTimes": str(h.reconsume_times or 0),
            "unitMode": "true" if h.unit_mode else "false",
            "bornHost": f"{ip.strip('[]')}:{port}",
            "storeHost": _host(self._ctl.store_host),
            "storeTimestamp": now,
        }
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body)
        remark = f"push reply message to {sender} fail."
        try:
            answer = await target.invoke(push, PUSH_TIMEOUT)
        except RocketQError as exc:
            log.warning("push reply message to <%s> fail. %s: %s", sender, target.remote_address, exc)
            return False, remark
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, answer.remark)
            return False, remark
        return True, ""

    async def _store(self, body: bytes, channel: Any, h: SendMessageRequestHeader, props: str,
                     queue_id: int, response: RemotingCommand) -> None:
        """Append the reply too; a stored reply's answer carries its real msgId and offset (a
        failed append is only logged, as in RocketMQ: the push decided the answer)."""
        ctl = self._ctl
        ip, _, port = str(channel.remote_address).rpartition(":")
        uniq = get_property(props, P_UNIQ) or ""
        put = MessageToStore(
            h.topic, queue_id, body, h.flag, props,
            tags_code(get_property(props, P_TAGS)),
            index_keys(uniq, get_property(props, P_KEYS)) if uniq else (),
            h.sys_flag, h.born_timestamp, (ip.strip("[]") or "127.0.0.1", int(port or 0)),
            h.reconsume_times or 0,
        )
        result = await ctl.store.put_message(put)
        if not result.ok:
            log.warning("process reply message, store putMessage failed: %s", result.status.name)
            return
        ctl.stats.on_put(result.msg_num)
        if response.code == ResponseCode.SUCCESS:
            ext = response.ext_fields
            assert ext is not None
            ext["msgId"] = f"{result.msg_id_prefix}{result.wrote_offset:016X}"
            ext["queueOffset"] = str(result.logical_offset)
