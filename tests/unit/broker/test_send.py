"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE against an in-process broker over the wire."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from tests.harness import wait_until
from tests.wire import (
    BrokerOptions,
    batch_body,
    create_topic,
    decode_pull,
    get_all_topic_config,
    get_max_offset,
    in_process_cluster,
    invoke,
    message_properties,
    pull,
    send_batch,
    send_header,
    send_message,
)

from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import decode_offset_msg_id, tags_code
from rocketq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(60)

OFFSET_MSG_ID = re.compile(r"^[0-9A-F]{32}$")


async def test_send_v2_round_trip(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        props = message_properties(tags="TagA", keys=["k1", "k2"], uniq_key="AB" * 16)
        r = await send_message(client, addr, "SendT", b"hello", properties=props, queue_id=1)
        assert r.code == ResponseCode.SUCCESS, r.remark
        ext = r.ext_fields
        assert ext is not None
        assert OFFSET_MSG_ID.match(ext["msgId"])
        host, port, offset = decode_offset_msg_id(ext["msgId"])
        assert f"{host}:{port}" == addr and offset == 0
        assert ext["queueId"] == "1" and ext["queueOffset"] == "0"
        assert ext["transactionId"] == "AB" * 16
        assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"

        msgs = decode_pull(await pull(client, addr, "G", "SendT", 1, 0))
        assert len(msgs) == 1
        m = msgs[0]
        assert (m.topic, m.body, m.queue_id, m.queue_offset) == ("SendT", b"hello", 1, 0)
        assert m.properties["TAGS"] == "TagA" and m.properties["KEYS"] == "k1 k2"
        assert m.properties["UNIQ_KEY"] == "AB" * 16
        assert m.properties["CLUSTER"] == "DefaultCluster"
        assert m.offset_msg_id == ext["msgId"]
        assert f"{m.born_host[0]}" == "127.0.0.1"
        # The stored string is the client's, with the broker's entries appended (not re-encoded).
        raw = broker.store.look_message_by_offset(offset)
        assert raw is not None
        assert props in bytes(raw).decode("utf-8", "replace")


async def test_send_v1_long_names_and_broker_adds_uniq_key(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        props = message_properties(tags="T1", uniq_key=None, trailing_separator=True)
        r = await send_message(client, addr, "SendV1", b"v1", properties=props, v2=False)
        assert r.code == 0, r.remark
        uniq = r.ext_fields["transactionId"]  # type: ignore[index]
        assert re.match(r"^[0-9A-F]{32}$", uniq)
        m = decode_pull(await pull(client, addr, "G", "SendV1", 0, 0))[0]
        assert m.properties["UNIQ_KEY"] == uniq
        assert m.properties["TAGS"] == "T1"


async def test_second_send_gets_next_offsets_and_tags_code(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        for i in range(3):
            r = await send_message(client, addr, "Seq", f"m{i}".encode(), tags="TagX")
            assert r.ext_fields["queueOffset"] == str(i)  # type: ignore[index]
        assert await get_max_offset(client, addr, "Seq", 0) == 3
        # tagsCode in the consume queue drives broker-side filtering.
        r = await pull(client, addr, "G", "Seq", 0, 0, subscription="TagX")
        assert len(decode_pull(r)) == 3
        r = await pull(client, addr, "G", "Seq", 0, 0, subscription="Other")
        assert decode_pull(r) == []
        assert tags_code("TagX") != 0


async def test_batch_round_trip(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        messages = [(f"b{i}".encode(), {"tags": "BT", "keys": f"key{i}"}) for i in range(5)]
        r = await send_batch(client, addr, "BatchT", messages, queue_id=2)
        assert r.code == 0, r.remark
        ids = r.ext_fields["msgId"].split(",")  # type: ignore[index]
        assert len(ids) == 5 and all(OFFSET_MSG_ID.match(i) for i in ids)
        assert r.ext_fields["queueOffset"] == "0" and r.ext_fields["queueId"] == "2"  # type: ignore[index]
        msgs = decode_pull(await pull(client, addr, "G", "BatchT", 2, 0))
        assert [m.body for m in msgs] == [f"b{i}".encode() for i in range(5)]
        assert [m.queue_offset for m in msgs] == list(range(5))
        assert [m.offset_msg_id for m in msgs] == ids
        assert len({m.properties["UNIQ_KEY"] for m in msgs}) == 5
        assert [m.properties["KEYS"] for m in msgs] == [f"key{i}" for i in range(5)]
        assert len({m.born_timestamp for m in msgs}) == 1


async def test_batch_the_cpp_way_code_10_with_batch_flag(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        r = await send_batch(client, addr, "CppBatch", [b"x", b"y"], code=RequestCode.SEND_MESSAGE)
        assert r.code == 0, r.remark
        assert len(r.ext_fields["msgId"].split(",")) == 2  # type: ignore[index]
        msgs = decode_pull(await pull(client, addr, "G", "CppBatch", 0, 0))
        assert [m.body for m in msgs] == [b"x", b"y"]


async def test_cpp_batch_flag_is_the_digit_one(tmp_path: Path) -> None:
    """The C++ client's booleans are "0"/"1": batch "1" on code 10 is a batch."""
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        body, _ = batch_body([b"c1", b"c2", b"c3"])
        ext = send_header("Cpp1", properties="WAIT\x01true\x02", v2=False)
        ext.update(batch="1", unitMode="0", reconsumeTimes="0")
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, ext, body), 5)
        assert r.code == 0, r.remark
        assert len(r.ext_fields["msgId"].split(",")) == 3  # type: ignore[index]
        msgs = decode_pull(await pull(client, addr, "G", "Cpp1", 0, 0))
        assert [m.body for m in msgs] == [b"c1", b"c2", b"c3"]


async def test_batch_inner_message_without_uniq_key_gets_one(tmp_path: Path) -> None:
    from rocketq.codec.message import BatchItem, encode_batch_body

    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        body = encode_batch_body([BatchItem(0, b"a", "TAGS\x01t\x02"), BatchItem(0, b"b", "")])
        ext = send_header("NoUniq", properties="", batch=True)
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body), 5)
        assert r.code == 0, r.remark
        msgs = decode_pull(await pull(client, addr, "G", "NoUniq", 0, 0))
        assert all(len(m.properties["UNIQ_KEY"]) == 32 for m in msgs)
        assert msgs[0].properties["TAGS"] == "t"


async def test_batch_messages_get_the_request_properties_and_cluster(tmp_path: Path) -> None:
    """As RocketMQ's batch encoder: the request's own properties, CLUSTER put, follow every
    message's own (a separator added where one lacks its trailing one); a UNIQ_KEY there is not
    spread over the messages, each keeps its own."""
    from rocketq.codec.message import BatchItem, encode_batch_body

    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        body = encode_batch_body([BatchItem(0, b"a", "TAGS\x01t\x02UNIQ_KEY\x01" + "A1" * 16 + "\x02"),
                                  BatchItem(0, b"b", "UNIQ_KEY\x01" + "B2" * 16 + "\x02TAGS\x01u")])
        header_props = "WAIT\x01true\x02hdr\x01v\x02UNIQ_KEY\x01" + "C3" * 16
        ext = send_header("BProps", properties=header_props, batch=True)
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body), 5)
        assert r.code == 0, r.remark
        msgs = decode_pull(await pull(client, addr, "G", "BProps", 0, 0))
        assert [m.properties["CLUSTER"] for m in msgs] == ["DefaultCluster"] * 2
        assert [m.properties["hdr"] for m in msgs] == ["v", "v"]
        assert [m.properties["TAGS"] for m in msgs] == ["t", "u"]
        assert [m.properties["UNIQ_KEY"] for m in msgs] == ["A1" * 16, "B2" * 16]
        # the tags code of the consume queue is still the message's own
        assert [m.tags for m in msgs] == ["t", "u"]


async def test_auto_create_from_tbw102(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        r = await send_message(client, addr, "AutoT", b"x", default_topic_queue_nums=4)
        assert r.code == 0, r.remark
        cfg = (await get_all_topic_config(client, addr))["AutoT"]
        # min(header 4, TBW102's 8) queues, TBW102's perm without INHERIT.
        assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (4, 4, 6)
        r = await send_message(client, addr, "AutoT16", b"x", default_topic_queue_nums=16)
        cfg = (await get_all_topic_config(client, addr))["AutoT16"]
        assert cfg.write_queue_nums == 8


async def test_auto_create_off_answers_topic_not_exist(tmp_path: Path) -> None:
    opts = BrokerOptions(broker={"auto_create_topic_enable": False})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        r = await send_message(client, broker.address, "NoSuchTopic", b"x")
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        assert "NoSuchTopic" in (r.remark or "") and "not exist" in (r.remark or "")
        assert "TBW102" not in await get_all_topic_config(client, broker.address)


@pytest.mark.parametrize(
    ("change", "code", "remark_part"),
    [
        ({"b": None}, ResponseCode.INVALID_PARAMETER, "<b>"),
        ({"e": "zero"}, ResponseCode.INVALID_PARAMETER, "<e>"),
        ({"g": None}, ResponseCode.INVALID_PARAMETER, "<g>"),
        ({"b": "bad topic!"}, ResponseCode.INVALID_PARAMETER, "illegal characters"),
        ({"b": "T" * 128}, ResponseCode.INVALID_PARAMETER, "longer than"),
        ({"b": ""}, ResponseCode.INVALID_PARAMETER, "blank"),
        ({"e": "99"}, ResponseCode.INVALID_PARAMETER, "queueId[99] is illegal"),
        ({"b": "SCHEDULE_TOPIC_XXXX"}, ResponseCode.NO_PERMISSION, "forbidden"),
        ({"b": "SELF_TEST_TOPIC"}, ResponseCode.NO_PERMISSION, "forbidden"),
        ({"i": "DELAY\x01abc"}, ResponseCode.MESSAGE_ILLEGAL, "DELAY"),
        ({"i": "TIMER_DELAY_SEC\x01999999999"}, ResponseCode.MESSAGE_ILLEGAL, "max delay"),  # 3 days at most
    ],
)
async def test_bad_send_requests(tmp_path: Path, change: dict[str, str | None], code: int,
                                 remark_part: str) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Good", read=4, write=4)).code == 0
        ext = send_header("Good", properties=message_properties())
        for k, v in change.items():
            if v is None:
                ext.pop(k, None)
            else:
                ext[k] = v
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x"), 5)
        assert r.code == code, r.remark
        assert remark_part in (r.remark or ""), r.remark
        # The broker keeps serving this client and another one.
        assert (await send_message(client, addr, "Good", b"ok")).code == 0
        async with RemotingClient() as other:
            assert (await send_message(other, addr, "Good", b"ok")).code == 0


async def test_retry_topic_length_up_to_255(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        # The group is auto-created (autoCreateSubscriptionGroup), the 127-char limit does not apply.
        r = await send_message(client, broker.address, "%RETRY%" + "g" * 120, b"x")
        assert r.code == 0, r.remark
        r = await send_message(client, broker.address, "%RETRY%" + "g" * 249, b"x")
        assert r.code == ResponseCode.INVALID_PARAMETER, r.remark


async def test_retry_topic_for_unknown_group(tmp_path: Path) -> None:
    opts = BrokerOptions(broker={"auto_create_subscription_group": False})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        r = await send_message(client, broker.address, "%RETRY%nogroup", b"x")
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, r.remark
        assert "nogroup" in (r.remark or "")


async def test_body_over_max_message_size(tmp_path: Path) -> None:
    opts = BrokerOptions(store={"mapped_file_size_commit_log": 16 * 1024 * 1024})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        big = b"z" * (4 * 1024 * 1024 + 1)
        r = await send_message(client, addr, "Big", big)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "max" in (r.remark or "")
        r = await send_message(client, addr, "Big", b"z" * (4 * 1024 * 1024))
        assert r.code == 0, r.remark


async def test_corrupt_batch_body(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        good, _ = batch_body([b"one", b"two"])
        for body in (good[:-3], good[:10], b"\x00\x00\x00\x05" + good[4:], b"", good + b"\x01"):
            ext = send_header("CB", properties=message_properties(), batch=True)
            request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body)
            r = await client.invoke(addr, request, 5)
            assert r.code == ResponseCode.MESSAGE_ILLEGAL, (body[:12], r.remark)
            assert "batch" in (r.remark or "")
        assert (await send_batch(client, addr, "CB", [b"ok"])).code == 0


async def test_batch_refuses_retry_topic_and_delay(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await send_batch(client, broker.address, "%RETRY%g", [b"x"])
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "retry" in (r.remark or "")
        body, _ = batch_body([b"x"])
        ext = send_header("BD", properties=message_properties(extra={"DELAY": "2"}), batch=True)
        r = await client.invoke(broker.address,
                                RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body), 5)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "DELAY" in (r.remark or "")


async def test_negative_queue_id_picks_a_random_queue(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Rnd", read=4, write=4)).code == 0
        seen = set()
        for _ in range(40):
            r = await send_message(client, addr, "Rnd", b"x", queue_id=-1)
            seen.add(int(r.ext_fields["queueId"]))  # type: ignore[index]
        assert seen <= {0, 1, 2, 3} and len(seen) > 1


async def test_multi_tag_topic_sets_sys_flag(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "Multi", filter_type="MULTI_TAG")).code == 0
        assert (await send_message(client, addr, "Multi", b"x", tags="a")).code == 0
        m = decode_pull(await pull(client, addr, "G", "Multi", 0, 0))[0]
        assert m.sys_flag & 0x2


async def test_read_only_topic_refuses_sends(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await create_topic(client, addr, "RO", perm=4)).code == 0
        r = await send_message(client, addr, "RO", b"x")
        assert r.code == ResponseCode.NO_PERMISSION


async def test_retry_topic_to_dlq_after_max_reconsume(tmp_path: Path) -> None:
    from tests.wire import heartbeat

    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        assert (await heartbeat(client, addr, "c1", consumer_groups={"GR": ["TopicR"]})).code == 0
        retry = "%RETRY%GR"
        r = await send_message(client, addr, retry, b"again", reconsume_times=3, max_reconsume_times=16)
        assert r.code == 0, r.remark
        r = await send_message(client, addr, retry, b"dead", reconsume_times=17, max_reconsume_times=16)
        assert r.code == 0, r.remark
        dlq = decode_pull(await pull(client, addr, "G", "%DLQ%GR", 0, 0))
        assert [m.body for m in dlq] == [b"dead"]
        # An orderly group that holds queue locks sends every retry to the DLQ.
        lock = orjson.dumps({"clientId": "c1", "consumerGroup": "GR",
                             "mqSet": [{"topic": "TopicR", "brokerName": "broker-a", "queueId": 0}]})
        assert (await invoke(client, addr, RequestCode.LOCK_BATCH_MQ, body=lock)).code == 0
        r = await send_message(client, addr, retry, b"orderly", reconsume_times=1, max_reconsume_times=16)
        assert r.code == 0, r.remark
        dlq = decode_pull(await pull(client, addr, "G", "%DLQ%GR", 0, 0))
        assert [m.body for m in dlq] == [b"dead", b"orderly"]
        # RocketMQ marks the DLQ copy DELAY=-1 so it is never staged.
        assert dlq[0].properties["DELAY"] == "-1"
        retried = decode_pull(await pull(client, addr, "G", retry, 0, 0))
        assert [m.body for m in retried] == [b"again"]


async def test_oneway_send_gets_no_response_but_is_stored(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        ext = send_header("OneWay", properties=message_properties())
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x", oneway=True)
        await client.invoke_oneway(addr, request)
        await wait_until(lambda: broker.store.get_max_offset_in_queue("OneWay", 0) == 1)


async def test_sync_flush_send(tmp_path: Path) -> None:
    opts = BrokerOptions(store={"flush_disk_type": "SYNC_FLUSH"})
    async with in_process_cluster(tmp_path, opts, with_namesrv=False) as (_, broker, client):
        addr = broker.address
        r = await send_message(client, addr, "SyncT", b"durable")
        assert r.code == 0, r.remark
        r = await send_batch(client, addr, "SyncT", [b"a", b"b"])
        assert r.code == 0, r.remark
        # WAIT=false skips the group-commit wait but still stores.
        props = message_properties(wait=False)
        assert (await send_message(client, addr, "SyncT", b"nowait", properties=props)).code == 0
        assert await get_max_offset(client, addr, "SyncT", 0) == 4


async def test_unknown_request_code(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await invoke(client, broker.address, 9999)
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert r.remark == " request type 9999 not supported"


def test_joined_msg_ids_matches_the_per_record_ids() -> None:
    import random

    from rocketq.broker.processors.send import joined_msg_ids
    from rocketq.store.model import PutMessageResult, PutMessageStatus

    rnd = random.Random(7)
    for n in (1, 31, 32, 100, 1000):
        offsets = sorted(rnd.randrange(0, 1 << 62) for _ in range(n))
        for prefix in ("7F00000100002A9F", "00000000000000000000000000000001" + "00002A9F"):
            r = PutMessageResult(PutMessageStatus.PUT_OK, offsets[0], 1, 0, n, 1, offsets, prefix)
            assert joined_msg_ids(r) == r.msg_ids_text


async def test_large_batch_ids(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path, with_namesrv=False) as (_, broker, client):
        r = await send_batch(client, broker.address, "Large", [b"m%d" % i for i in range(100)])
        ids = r.ext_fields["msgId"].split(",")  # type: ignore[index]
        got = []
        offset = 0
        while len(got) < 100:
            msgs = decode_pull(await pull(client, broker.address, "G", "Large", 0, offset))
            got += [m.offset_msg_id for m in msgs]
            offset += len(msgs)
        assert ids == got


def test_store_errors_answer_the_code_they_declare() -> None:
    """One mapping: a store error names its PutMessageStatus and code; the send processor's
    table answers that status with that code."""
    from rocketq.broker.processors.send import _FAILED
    from rocketq.errors import CreateMappedFileFailed, DiskFull, MessageTooLarge, StoreClosed
    from rocketq.store.model import PutMessageStatus

    for cls in (StoreClosed, DiskFull, MessageTooLarge, CreateMappedFileFailed):
        assert _FAILED[PutMessageStatus[cls.put_status]][0] == cls.code, cls
