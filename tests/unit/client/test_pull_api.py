"""PullAPIWrapper: decoding pulled records, the tag filter, headers, broker choice and suggestions.

The wrapper is driven against a recording stand-in for ``MQClientAPI.pull_message`` and a broker
table, so every header it builds and every address it picks is visible.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from tests.wire import pull_answer, stored_record

from rocketq.client.api import (
    PULL_SYS_FLAG_COMMIT_OFFSET,
    PULL_SYS_FLAG_SUBSCRIPTION,
    PULL_SYS_FLAG_SUSPEND,
    parse_pull_response,
)
from rocketq.client.config import ClientConfig
from rocketq.client.consumer.pull_api import (
    PullAPIWrapper,
    decode_pull_result,
    one_off_subscription,
    tag_filter,
)
from rocketq.client.consumer.subscription import build_subscription
from rocketq.client.instance import MQClientInstance
from rocketq.client.message import MessageQueue, PullResult, PullResultExt, PullStatus
from rocketq.codec.codes import ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.headers import PullMessageRequestHeader
from rocketq.codec.message import MessageExt, MessageSysFlag, encode_message
from rocketq.errors import BrokerNotFound, ProtocolError, SystemBusy

MQ = MessageQueue("T", "b", 1)


# -- decoding --------------------------------------------------------------------------------------


def decode(
    response: RemotingCommand, addr: str | None = None, tags: frozenset[str] | None = None, *,
    decompress: bool = True,
) -> PullResult:
    return decode_pull_result(parse_pull_response(response, addr), addr, tags, decompress=decompress)


def test_pull_found_decodes_filters_stamps_and_decompresses() -> None:
    big = b"z" * 5000
    body = stored_record(0, "A") + stored_record(1, "B") + stored_record(
        2, "A", zlib.compress(big), MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB)
    r = decode(pull_answer(0, body), "addr")
    assert r.status is PullStatus.FOUND and (r.next_begin_offset, r.min_offset, r.max_offset) == (3, 0, 9)
    assert [m.properties["UNIQ_KEY"] for m in r.messages] == ["U0", "U1", "U2"]
    assert r.messages[2].body == big
    assert all(m.properties["MIN_OFFSET"] == "0" and m.properties["MAX_OFFSET"] == "9" for m in r.messages)
    only_a = decode(pull_answer(0, body), "addr", frozenset({"A"}))
    assert [m.uniq_key for m in only_a.messages] == ["U0", "U2"]
    assert decode(pull_answer(0, body), None, frozenset({"C"})).messages == []
    raw = decode(pull_answer(0, body), None, decompress=False)
    assert raw.messages[2].body == zlib.compress(big)
    assert r.pull_status is r.status and r.msg_found_list is r.messages


@pytest.mark.parametrize(("code", "status"), [
    (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
    (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
    (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
])
def test_pull_statuses(code: int, status: PullStatus) -> None:
    r = decode(pull_answer(code, nextBeginOffset="7"))
    assert r.status is status and r.next_begin_offset == 7 and r.messages == []


def test_pull_errors_and_garbage() -> None:
    with pytest.raises(SystemBusy):
        decode(pull_answer(ResponseCode.SYSTEM_BUSY))
    with pytest.raises(ProtocolError):
        decode(RemotingCommand.response(0, None, None))
    with pytest.raises(ProtocolError):
        decode(pull_answer(0, minOffset="x"))
    with pytest.raises(ProtocolError) as e:
        garbage = b"\x00\x00\x00\x30garbage-garbage-garbage-garbage-garbage!"
        decode(pull_answer(0, garbage), "a:1")
    assert e.value.broker_addr == "a:1"
    partial = decode(pull_answer(0, stored_record(0) + stored_record(1) + b"\xff" * 20))
    assert [m.uniq_key for m in partial.messages] == ["U0", "U1"]


def test_tag_filter_of_a_subscription() -> None:
    assert tag_filter(build_subscription("T", "*")) is None
    assert tag_filter(build_subscription("T", "A || B")) == {"A", "B"}
    sub = one_off_subscription("T", "A")
    assert sub.sub_version == 0 and sub.sub_string == "A" and tag_filter(sub) == {"A"}


# -- the wrapper -----------------------------------------------------------------------------------


class RecordingAPI:
    """Stands in for MQClientAPI.pull_message: answers one canned response, keeps the headers."""

    def __init__(self, answer: RemotingCommand) -> None:
        self.config = ClientConfig()
        self.answer = answer
        self.calls: list[tuple[str, PullMessageRequestHeader, float]] = []

    async def pull_message(
        self, addr: str, header: PullMessageRequestHeader, timeout: float
    ) -> PullResultExt:
        self.calls.append((addr, header, timeout))
        return parse_pull_response(self.answer, addr, header.topic)


class Brokers(MQClientInstance):
    """A real MQClientInstance broker table; its route refresh installs ``after_refresh``."""

    def __init__(
        self, table: dict[str, dict[int, str]], after_refresh: dict[str, dict[int, str]] | None = None
    ) -> None:
        super().__init__(ClientConfig(client_ip="127.0.0.1"), "test@pull")
        self.broker_addr_table = table
        self.after_refresh = after_refresh
        self.refreshed: list[str] = []

    async def update_topic_route_info_from_name_server(
        self, topic: str, default_topic: str | None = None, default_topic_queue_nums: int = 4
    ) -> bool:
        self.refreshed.append(topic)
        if self.after_refresh is not None:
            self.broker_addr_table = self.after_refresh
        return True


def wrapper(answer: RemotingCommand, brokers: Brokers | None) -> tuple[PullAPIWrapper, RecordingAPI]:
    api = RecordingAPI(answer)
    return PullAPIWrapper(api, "G", brokers), api  # type: ignore[arg-type]


async def test_header_carries_the_subscription_only_with_its_flag() -> None:
    two = stored_record(0, "A") + stored_record(1, "B")
    pull, api = wrapper(pull_answer(0, two), Brokers({"b": {0: "m:1"}}))
    sub = build_subscription("T", "A")
    flags = PULL_SYS_FLAG_SUSPEND | PULL_SYS_FLAG_COMMIT_OFFSET
    addr, raw = await pull.pull_kernel(MQ, sub, 5, 32, flags, 3.0, commit_offset=4,
                                       suspend_timeout_millis=15000, max_msg_bytes=1024)
    r = pull.process_pull_result(MQ, raw, addr, tag_filter(sub))
    assert [m.uniq_key for m in r.messages] == ["U0"]  # the subscription's tags filter here
    addr, header, timeout = api.calls[0]
    assert (addr, timeout) == ("m:1", 3.0)
    assert header == PullMessageRequestHeader(
        consumer_group="G", topic="T", queue_id=1, queue_offset=5, max_msg_nums=32, sys_flag=flags,
        commit_offset=4, suspend_timeout_millis=15000, sub_version=sub.sub_version, subscription=None,
        expression_type="TAG", max_msg_bytes=1024, broker_name="b")
    await pull.pull(MQ, sub, 5, 32, PULL_SYS_FLAG_SUBSCRIPTION, 3.0, tags=frozenset())
    assert api.calls[1][1].subscription == "A"


async def test_the_brokers_suggestion_picks_the_next_node_and_a_slave_gets_no_commit_offset() -> None:
    brokers = Brokers({"b": {0: "m:1", 1: "s:1"}})
    pull, api = wrapper(pull_answer(0, stored_record(0), suggestWhichBrokerId="1"), brokers)
    sub = build_subscription("T", "*")
    flags = PULL_SYS_FLAG_SUSPEND | PULL_SYS_FLAG_COMMIT_OFFSET
    await pull.pull_kernel(MQ, sub, 0, 32, flags, 3.0, commit_offset=7)
    assert pull.recalculate_pull_from_which_node(MQ) == 0  # only a processed answer counts
    await pull.pull(MQ, sub, 0, 32, flags, 3.0)
    assert pull.recalculate_pull_from_which_node(MQ) == 1
    await pull.pull_kernel(MQ, sub, 1, 32, flags, 3.0, commit_offset=7)
    assert [c[0] for c in api.calls] == ["m:1", "m:1", "s:1"]
    assert api.calls[0][1].sys_flag == flags
    assert api.calls[2][1].sys_flag == PULL_SYS_FLAG_SUSPEND  # a slave cannot store the offset
    api.answer = pull_answer(ResponseCode.PULL_NOT_FOUND)  # suggests the master again
    await pull.pull(MQ, sub, 1, 32, flags, 3.0)
    assert pull.recalculate_pull_from_which_node(MQ) == 0 and MQ not in pull.pull_from_which_node_table


async def test_an_unknown_broker_refreshes_the_route_once() -> None:
    brokers = Brokers({}, after_refresh={"b": {0: "m:2"}})
    pull, api = wrapper(pull_answer(ResponseCode.PULL_NOT_FOUND), brokers)
    r = await pull.pull(MQ, build_subscription("T", "*"), 0, 32, 0, 3.0)
    assert r.status is PullStatus.NO_NEW_MSG and brokers.refreshed == ["T"] and api.calls[0][0] == "m:2"
    gone = Brokers({})
    pull, api = wrapper(pull_answer(0), gone)
    with pytest.raises(BrokerNotFound):
        await pull.pull(MQ, build_subscription("T", "*"), 0, 32, 0, 3.0)
    assert gone.refreshed == ["T"] and api.calls == []
    pull, _ = wrapper(pull_answer(0), None)
    with pytest.raises(BrokerNotFound):
        await pull.pull(MQ, build_subscription("T", "*"), 0, 32, 0, 3.0)


async def test_raw_pull_for_bulk_readers_and_errors_with_fields() -> None:
    body = stored_record(0) + stored_record(1)
    pull, _ = wrapper(pull_answer(0, body), None)
    addr, raw = await pull.pull_kernel(MQ, one_off_subscription("T"), 0, 32, PULL_SYS_FLAG_SUBSCRIPTION, 3.0,
                                       addr="x:1")
    assert addr == "x:1" and bytes(raw.message_binary) == body
    assert len(decode_pull_result(raw).messages) == 2
    pull, _ = wrapper(pull_answer(ResponseCode.SYSTEM_BUSY), None)
    with pytest.raises(SystemBusy) as e:
        await pull.pull(MQ, one_off_subscription("T"), 0, 32, 0, 3.0, addr="x:1")
    assert (e.value.broker_addr, e.value.topic) == ("x:1", "T")


def test_wrapper_follows_the_clients_decompress_setting() -> None:
    api: Any = RecordingAPI(pull_answer(0))
    api.config = ClientConfig(decode_decompress_body=False)
    assert PullAPIWrapper(api, "G").decompress is False


# -- timestamps --------------------------------------------------------------------------------------


def nearest_49(times: list[int], lo: int, ts: int) -> int:
    """RocketMQ 4.9's ConsumeQueue.getOffsetInQueueByTime: a binary search that stops at any
    message stored at ``ts``, else answers the nearer neighbour (the last message past the end)."""
    a, b, left, right = lo, len(times) - 1, -1, -1
    while a <= b:
        mid = (a + b) // 2
        if times[mid] == ts:
            return mid
        if times[mid] > ts:
            b, right = mid - 1, mid
        else:
            a, left = mid + 1, mid
    if left == -1:
        return right
    if right == -1:
        return left
    return right if abs(ts - times[left]) > abs(ts - times[right]) else left


class TimedQueue:
    """A stand-in MQClientAPI over one queue whose message i was stored at ``times[i]``."""

    config = ClientConfig()

    def __init__(self, times: list[int], lo: int, search: Any) -> None:
        self.times, self.lo, self.search, self.pulls = times, lo, search, 0

    async def search_offset(self, addr: str, mq: MessageQueue, ts: int, timeout: float) -> int:
        return int(self.search(self.times, self.lo, ts))

    async def pull_message(self, addr: str, header: PullMessageRequestHeader, t: float) -> PullResultExt:
        self.pulls += 1
        off, hi, lo = header.queue_offset, len(self.times), self.lo
        if off < lo:
            return PullResultExt(PullStatus.OFFSET_ILLEGAL, lo, lo, hi, 0, b"")
        if off >= hi:
            return PullResultExt(PullStatus.NO_NEW_MSG, off, lo, hi, 0, b"")
        end = min(off + header.max_msg_nums, hi)
        body = b"".join(
            encode_message(MessageExt(topic="T", body=b"x", queue_offset=i, store_timestamp=self.times[i]))
            for i in range(off, end))
        return PullResultExt(PullStatus.FOUND, end, lo, hi, 0, body)


def exact_lower(times: list[int], lo: int, ts: int) -> int:
    return next((i for i in range(lo, len(times)) if times[i] >= ts), len(times))


@pytest.mark.parametrize("search", [nearest_49, exact_lower], ids=["rocketmq-4.9", "exact"])
async def test_offset_at_or_after_holds_whatever_the_broker_guesses(search: Any) -> None:
    # 40 messages stored in one millisecond (more than a search window), gaps, and a head
    # already deleted (min offset 5)
    times = [1000 + 10 * i for i in range(30)] + [1400] * 40 + [1500 + 3 * i for i in range(30)]
    queue = TimedQueue(times, 5, search)
    wrapper = PullAPIWrapper(queue, "G")  # type: ignore[arg-type]
    for ts in [0, 1000, 1049, 1050, 1051, 1290, 1395, 1400, 1401, 1500, 1586, 1587, 1588, 10_000]:
        want = exact_lower(times, 5, ts)
        assert await wrapper.offset_at_or_after(MQ, "addr", ts, 1.0) == want, ts
    assert queue.pulls <= 14 * 4  # one pull each, a few more where 40 share a millisecond
