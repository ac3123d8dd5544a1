"""MQClientAPI: response decoding (send, pull headers, errors) and each RPC against a scripted server.

Decoding pulled records and the pull wrapper are tested in test_pull_api.py."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from tests.harness import free_port
from tests.wire import pull_answer, stored_record

from rocketq.client.api import (
    MQClientAPI,
    broker_error,
    parse_pull_response,
    parse_tags,
    process_send_response,
    vip_address,
)
from rocketq.client.config import ClientConfig
from rocketq.client.message import MessageQueue, PullStatus, SendStatus
from rocketq.codec.bodies import (
    HeartbeatData,
    LockBatchRequestBody,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import (
    BoundaryType,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketq.codec.message import MessageExt, MessageSysFlag
from rocketq.errors import (
    MQBrokerError,
    ProtocolError,
    QueryNotFound,
    RemotingConnectError,
    SystemBusy,
    SystemError_,
    TopicNotExist,
)
from rocketq.remoting import Channel, RemotingClient, RemotingServer

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(("code", "status"), [
    (ResponseCode.SUCCESS, PullStatus.FOUND),
    (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
    (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
    (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
])
def test_pull_statuses_leave_the_records_undecoded(code: int, status: PullStatus) -> None:
    r = parse_pull_response(pull_answer(code, b"records", nextBeginOffset="7", suggestWhichBrokerId="1"))
    assert r.status is status and r.next_begin_offset == 7 and (r.min_offset, r.max_offset) == (0, 9)
    assert r.suggest_which_broker_id == 1
    assert bytes(r.message_binary) == (b"records" if status is PullStatus.FOUND else b"")


def test_pull_error_answers_carry_code_broker_and_topic() -> None:
    with pytest.raises(SystemBusy) as e:
        parse_pull_response(pull_answer(ResponseCode.SYSTEM_BUSY), "1.2.3.4:5", "T")
    assert (e.value.code, e.value.broker_addr, e.value.topic) == (ResponseCode.SYSTEM_BUSY, "1.2.3.4:5", "T")
    assert str(e.value) == "CODE: 2  DESC:   TOPIC: T  BROKER: 1.2.3.4:5"
    with pytest.raises(ProtocolError) as bad:
        parse_pull_response(RemotingCommand.response(0, None, None), "1.2.3.4:5")
    assert bad.value.broker_addr == "1.2.3.4:5"
    with pytest.raises(ProtocolError):
        parse_pull_response(pull_answer(0, minOffset="x"))


def test_send_response_mapping() -> None:
    ext = {"msgId": "OFF", "queueId": "2", "queueOffset": "11", "MSG_REGION": "R", "TRACE_ON": "true"}
    for code, status in ((0, SendStatus.SEND_OK), (10, SendStatus.FLUSH_DISK_TIMEOUT),
                         (11, SendStatus.SLAVE_NOT_AVAILABLE), (12, SendStatus.FLUSH_SLAVE_TIMEOUT)):
        r = process_send_response(RemotingCommand.response(code, None, ext), "b", "T", "UNIQ")
        assert r.status is status and r.msg_id == "UNIQ" and r.offset_msg_id == "OFF"
        assert r.message_queue == MessageQueue("T", "b", 2) and r.queue_offset == 11 and r.region_id == "R"
    mq = MessageQueue("T", "b", 2)
    same = process_send_response(RemotingCommand.response(0, None, ext), "b", "T", "U", None, mq)
    assert same.message_queue is mq
    with pytest.raises(TopicNotExist):
        process_send_response(RemotingCommand.response(17, "no topic", {}), "b", "T", "U")
    with pytest.raises(ProtocolError):
        process_send_response(RemotingCommand.response(0, None, {"queueId": "1"}), "b", "T", "U")


def test_helpers() -> None:
    assert isinstance(broker_error(RemotingCommand.response(1, "x")), SystemError_)
    err = broker_error(RemotingCommand.response(777, "odd"), "1.2.3.4:5", "T")
    assert isinstance(err, MQBrokerError) and err.code == 777
    assert (err.remark, err.broker_addr, err.topic) == ("odd", "1.2.3.4:5", "T")
    assert str(err) == "CODE: 777  DESC: odd  TOPIC: T  BROKER: 1.2.3.4:5"
    assert parse_tags("*") is None and parse_tags(None) is None and parse_tags(" ") is None
    assert parse_tags("A || B ||C") == {"A", "B", "C"}
    assert vip_address("10.0.0.1:10911") == "10.0.0.1:10909" and vip_address("junk") == "junk"


# -- RPCs against a scripted server -------------------------------------------------------------------


class Scripted:
    """Answers each request code with a canned response and remembers what it got."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", [0])
        self.requests: list[RemotingCommand] = []
        self.answers: dict[int, Any] = {}

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.bound_ports[0]}"

    def on(self, code: int, response: Any) -> None:
        self.answers[int(code)] = response
        self.server.register_processor(code, self._handle)

    def _handle(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        self.requests.append(request)
        answer = self.answers[request.code]
        resp = answer(request) if callable(answer) else answer
        if resp is None:
            return None
        out = request.make_response(resp.code, resp.remark, resp.ext_fields, resp.body)
        out.version = resp.version
        return out


@pytest.fixture
async def scripted() -> AsyncIterator[Scripted]:
    s = Scripted()
    await s.server.start()
    try:
        yield s
    finally:
        await s.server.stop(grace=0.1)


@pytest.fixture
async def api() -> AsyncIterator[MQClientAPI]:
    client = RemotingClient(connect_timeout=1.0)
    try:
        yield MQClientAPI(client, ClientConfig(client_ip="127.0.0.1", mq_client_api_timeout=2000))
    finally:
        await client.close()


def _version(cmd: RemotingCommand, version: int) -> RemotingCommand:
    cmd.version = version
    return cmd


async def test_route_lookup_fails_over_between_name_servers(scripted: Scripted, api: MQClientAPI) -> None:
    route = TopicRouteData()
    scripted.on(RequestCode.GET_ROUTEINFO_BY_TOPIC, RemotingCommand.response(0, None, None, route.to_json()))
    dead = f"127.0.0.1:{free_port()}"
    api.update_name_server_address_list(f"{dead};{scripted.addr}")
    for _ in range(3):  # whichever one it starts with, it ends up on the live one
        assert await api.get_topic_route_info_from_name_server("T") == route
    assert scripted.requests[0].ext_fields == {"topic": "T", "acceptStandardJsonOnly": "true"}
    scripted.answers[RequestCode.GET_ROUTEINFO_BY_TOPIC] = RemotingCommand.response(17, "No topic route info")
    with pytest.raises(TopicNotExist):
        await api.get_topic_route_info_from_name_server("T")
    api.update_name_server_address_list([dead])
    with pytest.raises(RemotingConnectError):
        await api.get_topic_route_info_from_name_server("T")


async def test_offsets_and_queries(scripted: Scripted, api: MQClientAPI) -> None:
    mq = MessageQueue("T", "b", 1)
    scripted.on(RequestCode.GET_MAX_OFFSET, RemotingCommand.response(0, None, {"offset": "42"}))
    scripted.on(RequestCode.GET_MIN_OFFSET, RemotingCommand.response(0, None, {"offset": "3"}))
    scripted.on(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, RemotingCommand.response(0, None, {"offset": "7"}))
    scripted.on(RequestCode.GET_EARLIEST_MSG_STORETIME,
                RemotingCommand.response(0, None, {"timestamp": "99"}))
    scripted.on(RequestCode.QUERY_CONSUMER_OFFSET, RemotingCommand.response(ResponseCode.QUERY_NOT_FOUND))
    scripted.on(RequestCode.UPDATE_CONSUMER_OFFSET, RemotingCommand.response(0))
    a = scripted.addr
    assert await api.get_max_offset(a, mq) == 42 and await api.get_min_offset(a, mq) == 3
    assert await api.search_offset(a, mq, 123) == 7 and await api.get_earliest_msg_storetime(a, mq) == 99
    # 4.x knows no boundaryType; LOWER is 5.x's default when it is absent
    assert scripted.requests[-2].ext_fields == {"topic": "T", "queueId": "1", "timestamp": "123"}
    await api.search_offset(a, mq, 123, boundary_type=BoundaryType.UPPER)
    assert scripted.requests[-1].ext_fields["boundaryType"] == "UPPER"  # type: ignore[index]
    q = QueryConsumerOffsetRequestHeader("G", "T", 1)
    assert await api.query_consumer_offset(a, q) == -1
    scripted.answers[RequestCode.QUERY_CONSUMER_OFFSET] = RemotingCommand.response(0, None, {"offset": "5"})
    assert await api.query_consumer_offset(a, q) == 5
    scripted.answers[RequestCode.QUERY_CONSUMER_OFFSET] = RemotingCommand.response(0, None, {})
    with pytest.raises(ProtocolError):
        await api.query_consumer_offset(a, q)
    await api.update_consumer_offset(a, UpdateConsumerOffsetRequestHeader("G", "T", 1, 8))
    await api.update_consumer_offset_oneway(a, UpdateConsumerOffsetRequestHeader("G", "T", 1, 9))
    for _ in range(100):
        if sum(r.code == RequestCode.UPDATE_CONSUMER_OFFSET for r in scripted.requests) == 2:
            break
        await asyncio.sleep(0.01)
    updates = [r for r in scripted.requests if r.code == RequestCode.UPDATE_CONSUMER_OFFSET]
    assert [u.ext_fields["commitOffset"] for u in updates] == ["8", "9"]  # type: ignore[index]
    assert updates[1].is_oneway
    scripted.answers[RequestCode.GET_MAX_OFFSET] = RemotingCommand.response(1, "boom")
    with pytest.raises(SystemError_):
        await api.get_max_offset(a, mq)


async def test_client_and_group_rpcs(scripted: Scripted, api: MQClientAPI) -> None:
    a = scripted.addr
    scripted.on(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                RemotingCommand.response(0, None, None, orjson.dumps({"consumerIdList": ["c2", "c1"]})))
    scripted.on(RequestCode.HEART_BEAT, lambda req: RemotingCommand(0, version=479, flag=1))
    scripted.on(RequestCode.UNREGISTER_CLIENT, RemotingCommand.response(0))
    scripted.on(RequestCode.LOCK_BATCH_MQ, RemotingCommand.response(0, None, None, orjson.dumps(
        {"lockOKMQSet": [{"topic": "T", "brokerName": "b", "queueId": 1}]})))
    scripted.on(RequestCode.UNLOCK_BATCH_MQ, RemotingCommand.response(0))
    scripted.on(RequestCode.CONSUMER_SEND_MSG_BACK, RemotingCommand.response(0))
    assert await api.get_consumer_id_list_by_group(a, "G") == ["c2", "c1"]
    assert await api.send_heartbeat(a, HeartbeatData("cid")) == 479
    await api.unregister_client(a, "cid", producer_group="PG")
    body = LockBatchRequestBody("G", "cid", False, (MessageQueue("T", "b", 1), MessageQueue("T", "b", 2)))
    assert await api.lock_batch_mq(a, body) == {MessageQueue("T", "b", 1)}
    await api.unlock_batch_mq(a, UnlockBatchRequestBody("G", "cid", False, body.mq_set))
    await api.unlock_batch_mq(a, UnlockBatchRequestBody("G", "cid", False, body.mq_set), oneway=True)
    msg = MessageExt(topic="T", body=b"x", properties={"UNIQ_KEY": "U"}, commit_log_offset=1234)
    await api.consumer_send_message_back(a, "b", msg, "G", 3, max_consume_retry_times=16)
    back = next(r for r in scripted.requests if r.code == RequestCode.CONSUMER_SEND_MSG_BACK)
    assert back.ext_fields == {"offset": "1234", "group": "G", "delayLevel": "3", "originMsgId": "U",
                               "originTopic": "T", "unitMode": "false", "maxReconsumeTimes": "16"}
    unreg = next(r for r in scripted.requests if r.code == RequestCode.UNREGISTER_CLIENT)
    assert unreg.ext_fields == {"clientID": "cid", "producerGroup": "PG"}
    scripted.answers[RequestCode.GET_CONSUMER_LIST_BY_GROUP] = RemotingCommand.response(1, "no consumer")
    with pytest.raises(SystemError_):
        await api.get_consumer_id_list_by_group(a, "G")


async def test_pull_view_and_query(scripted: Scripted, api: MQClientAPI) -> None:
    a = scripted.addr
    two = stored_record(0, "A") + stored_record(1, "B")
    scripted.on(RequestCode.PULL_MESSAGE, lambda req: pull_answer(0, two))
    one = stored_record(0, "A")
    scripted.on(RequestCode.LITE_PULL_MESSAGE, lambda req: _version(pull_answer(0, one), 413))
    big = b"q" * 9000
    compressed = stored_record(5, body=zlib.compress(big), sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    scripted.on(RequestCode.VIEW_MESSAGE_BY_ID, RemotingCommand.response(0, None, None, compressed))
    scripted.on(RequestCode.QUERY_MESSAGE, RemotingCommand.response(ResponseCode.QUERY_NOT_FOUND))
    header = PullMessageRequestHeader("G", "T", 0, 0, 32, 0x4, 0, 0, 0, subscription="B")
    r = await api.pull_message(a, header, 2.0)
    assert r.status is PullStatus.FOUND and bytes(r.message_binary) == two
    lite = PullMessageRequestHeader("G", "T", 0, 0, 32, 0x4 | 0x10, 0, 0, 0, subscription="*")
    assert bytes((await api.pull_message(a, lite, 2.0)).message_binary) == two
    # the broker announced V4_9_4: a 4.x broker knows no 361, so lite pulls stay on 11
    assert [q.code for q in scripted.requests] == [11, 11]
    assert scripted.requests[1].ext_fields["sysFlag"] == "20"  # type: ignore[index]
    assert api.broker_versions[a] == 401 and not api.supports_lite_pull(a)
    # an answer announcing V5_0_0 lets the next lite pull use 5.0's own code
    scripted.answers[RequestCode.PULL_MESSAGE] = lambda req: _version(pull_answer(0, two), 413)
    await api.pull_message(a, header, 2.0)
    assert bytes((await api.pull_message(a, lite, 2.0)).message_binary) == one
    assert [q.code for q in scripted.requests[2:]] == [11, 361]
    # a 5.x-announcing broker that refuses 361 is asked again with 11, now and from then on
    refused = RemotingCommand.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "type 361 not supported")
    scripted.answers[RequestCode.LITE_PULL_MESSAGE] = lambda req: _version(refused, 413)
    for _ in range(2):
        assert bytes((await api.pull_message(a, lite, 2.0)).message_binary) == two
    assert [q.code for q in scripted.requests[4:]] == [361, 11, 11] and not api.supports_lite_pull(a)
    assert (await api.view_message(a, 500)).body == big
    query = QueryMessageRequestHeader("T", "k", 32, 0, 1)
    assert await api.query_message(a, query) == []
    found = RemotingCommand.response(0, None, {}, compressed + stored_record(6))
    scripted.answers[RequestCode.QUERY_MESSAGE] = found
    assert [m.body for m in await api.query_message(a, query)] == [big, b"m6"]
    scripted.answers[RequestCode.VIEW_MESSAGE_BY_ID] = RemotingCommand.response(22, "gone")
    with pytest.raises(QueryNotFound):
        await api.view_message(a, 500)
