"""Request-reply pieces without a broker: the reply message, the code a reply is sent with, the
pending-request table and the PUSH_REPLY_MESSAGE_TO_CLIENT decoding."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from rocketq import Message, MessageExt, RequestTimeout, create_reply_message
from rocketq.client.producer.config import ProducerConfig
from rocketq.client.producer.kernel import SendEncoder
from rocketq.client.producer.request import REQUEST_FUTURES, PendingRequest, complete_request
from rocketq.client.remoting_processor import _reply_message
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import MessageSysFlag
from rocketq.errors import CreateReplyMessageError, InvalidArgument

REQUEST_PROPS = {"CLUSTER": "C1", "CORRELATION_ID": "corr-1", "REPLY_TO_CLIENT": "1.2.3.4@9#1", "TTL": "3000",
                 "UNIQ_KEY": "U1", "TAGS": "t"}


def test_create_reply_message_copies_the_request_fields() -> None:
    request = MessageExt(topic="Req", body=b"ping", properties=dict(REQUEST_PROPS))
    reply = create_reply_message(request, b"pong")
    assert reply.topic == "C1_REPLY_TOPIC" and reply.body == b"pong"
    assert dict(reply.properties) == {"MSG_TYPE": "reply", "CORRELATION_ID": "corr-1",
                                      "REPLY_TO_CLIENT": "1.2.3.4@9#1", "TTL": "3000"}


def test_create_reply_message_of_a_message_never_stored() -> None:
    with pytest.raises(CreateReplyMessageError) as info:
        create_reply_message(Message("Req", b"ping"), b"pong")
    assert info.value.code == 10007 and "CLUSTER" in str(info.value)
    assert isinstance(info.value, InvalidArgument)


def test_a_reply_is_sent_with_send_reply_message_v2() -> None:
    enc = SendEncoder(ProducerConfig(producer_group="pg"))
    reply = create_reply_message(MessageExt(topic="Req", body=b"x", properties=dict(REQUEST_PROPS)), b"y")
    assert enc.single(reply).code == RequestCode.SEND_REPLY_MESSAGE_V2
    assert enc.single(Message("T", b"x")).code == RequestCode.SEND_MESSAGE_V2
    other = Message("T", b"x", properties={"MSG_TYPE": "other"})
    assert enc.single(other).code == RequestCode.SEND_MESSAGE_V2
    assert enc.batch([Message("T", b"x")]).code == RequestCode.SEND_BATCH_MESSAGE


async def test_a_pending_request_times_out_and_leaves_the_table() -> None:
    fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
    pending = PendingRequest("t-1", fut, "Req", 0.05)
    pending.start()
    assert REQUEST_FUTURES["t-1"] is pending
    with pytest.raises(RequestTimeout, match="timeout"):
        await fut
    assert "t-1" not in REQUEST_FUTURES


async def test_a_reply_completes_its_request_once() -> None:
    fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
    PendingRequest("r-1", fut, "Req", 30).start()
    reply = MessageExt(topic="C1_REPLY_TOPIC", body=b"pong", properties={"CORRELATION_ID": "r-1"})
    assert complete_request(reply)
    assert await fut is reply
    assert not complete_request(reply)  # a late duplicate finds nobody
    assert "r-1" not in REQUEST_FUTURES


async def test_a_failed_send_ends_the_request_with_its_error() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[MessageExt] = loop.create_future()
    pending = PendingRequest("f-1", fut, "Req", 30)
    pending.start()
    sent: asyncio.Future[object] = loop.create_future()
    sent.set_exception(ConnectionError("down"))
    pending.on_sent(sent)  # type: ignore[arg-type]
    with pytest.raises(ConnectionError):
        await fut
    await asyncio.sleep(0)
    assert "f-1" not in REQUEST_FUTURES


def test_push_reply_message_decodes_a_compressed_reply() -> None:
    props = "CORRELATION_ID\x01c\x02MSG_TYPE\x01reply\x02"
    ext = {"producerGroup": "pg", "topic": "C1_REPLY_TOPIC", "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "4", "queueId": "0",
           "sysFlag": str(MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB),
           "bornTimestamp": "111", "flag": "0", "properties": props, "reconsumeTimes": "0",
           "unitMode": "false", "bornHost": "10.0.0.1:5555", "storeHost": "10.0.0.2:10911",
           "storeTimestamp": "222"}
    cmd = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext, zlib.compress(b"pong" * 100))
    msg = _reply_message(cmd, 333)
    assert msg.body == b"pong" * 100 and not msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG
    assert msg.born_host == ("10.0.0.1", 5555) and msg.store_host == ("10.0.0.2", 10911)
    assert (msg.born_timestamp, msg.store_timestamp) == (111, 222)
    assert msg.properties == {"CORRELATION_ID": "c", "MSG_TYPE": "reply", "ARRIVE_TIME": "333"}
