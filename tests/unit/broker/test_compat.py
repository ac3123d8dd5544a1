"""compatibilityMode=4.9: the request table of a 4.9.8 broker, strict about newer header fields."""

from __future__ import annotations

from typing import Any

from rocketq.broker.compat import ADDED_AFTER_4_9_8, strict_4_9_register
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.remoting.endpoint import handles_runs


class Sends:
    @handles_runs("process_many")
    def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS)

    def process_many(self, requests: list[RemotingCommand], channel: Any) -> list[RemotingCommand]:
        return [self.process(r, channel) for r in requests]


def ok(request: RemotingCommand, channel: Any) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS)


def test_newer_codes_are_left_out_and_newer_fields_refused() -> None:
    table: dict[int, Any] = {}
    register = strict_4_9_register(table.__setitem__)
    sends = Sends()
    for code, handler in [(RequestCode.LITE_PULL_MESSAGE, ok), (RequestCode.GET_TOPIC_CONFIG, ok),
                          (RequestCode.PULL_MESSAGE, ok), (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ok),
                          (RequestCode.GET_CONSUMER_LIST_BY_GROUP, ok),
                          (RequestCode.SEND_MESSAGE_V2, sends.process)]:
        register(int(code), handler)
    assert set(table) == {RequestCode.PULL_MESSAGE, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                          RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.SEND_MESSAGE_V2}
    assert table[RequestCode.SEND_MESSAGE_V2] == sends.process  # its batch path stays registered

    def answer(code: int, **ext: str) -> RemotingCommand:
        return table[code](RemotingCommand.request(code, ext), None)  # type: ignore[no-any-return]

    assert answer(RequestCode.PULL_MESSAGE, topic="T", queueId="0").code == ResponseCode.SUCCESS
    # 4.9.8's PullMessageRequestHeader extends RpcRequestHeader: bname is known there, lo is not
    assert answer(RequestCode.PULL_MESSAGE, topic="T", bname="b").code == ResponseCode.SUCCESS
    refused = answer(RequestCode.PULL_MESSAGE, topic="T", bname="b", lo="true", maxMsgBytes="1")
    assert refused.code == ResponseCode.SYSTEM_ERROR and "lo, maxMsgBytes" in (refused.remark or "")
    # GetConsumerListByGroupRequestHeader gained bname only in 5.x
    newer_bname = answer(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="G", bname="b")
    assert newer_bname.code == ResponseCode.SYSTEM_ERROR and "bname" in (newer_bname.remark or "")
    newer = answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, boundaryType="LOWER")
    assert newer.code == ResponseCode.SYSTEM_ERROR
    assert answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp="1").code == ResponseCode.SUCCESS


def test_the_5x_only_codes_we_know_are_listed() -> None:
    for code in (RequestCode.LITE_PULL_MESSAGE, RequestCode.GET_TOPIC_CONFIG,
                 RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, RequestCode.REGISTER_TOPIC_IN_NAMESRV):
        assert code in ADDED_AFTER_4_9_8
    for code in (RequestCode.PULL_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.HEART_BEAT,
                 RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.CONSUME_MESSAGE_DIRECTLY):
        assert code not in ADDED_AFTER_4_9_8
