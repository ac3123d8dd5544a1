"""Raw-protocol helpers for tests: talk to a real broker / name server the way clients do.

Everything goes through `RemotingClient` + `RemotingCommand` with the wire names of
PROTOCOL.md §2.2, so a test exercises exactly what a Java/Go/C++ client would send. In-process
servers (`start_namesrv`, `start_broker`, `in_process_cluster`) bind 127.0.0.1 port 0.

Typical use::

    async with in_process_cluster(tmp_path) as (ns, broker, client):
        resp = await send_message(client, broker.address, "T", b"hello", tags="A")
        assert resp.code == 0
        msgs = decode_pull(await pull(client, broker.address, "G", "T", 0, 0))
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from tests.harness import wait_until

from rocketq.acl import RequestSigner, SessionCredentials
from rocketq.codec.bodies import TopicConfig, TopicConfigSerializeWrapper, TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand
from rocketq.codec.message import (
    BatchItem,
    MessageExt,
    UniqIdGenerator,
    decode_messages,
    encode_batch_body,
    encode_message,
    encode_properties,
)
from rocketq.remoting import RemotingClient

DEFAULT_TIMEOUT = 5.0
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_COMMIT_OFFSET = 0x1


def signed_client(creds: SessionCredentials | None) -> RemotingClient:
    """A client that signs every request with ``creds`` (ACL 1.0 / 2.0), or an unsigned one."""
    client = RemotingClient()
    if creds is not None:
        client.request_hook = RequestSigner(creds)
    return client

_uniq = UniqIdGenerator()


def new_uniq_key() -> str:
    return _uniq.next_id()


async def invoke(client: RemotingClient, addr: str, code: int, ext: Mapping[str, Any] | None = None,
                 body: bytes = b"", *, timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
    """One request/response; ext values are turned into strings as a Java client would."""
    fields = None if ext is None else {k: _text(v) for k, v in ext.items() if v is not None}
    return await client.invoke(addr, RemotingCommand.request(int(code), fields, body), timeout)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- send ------------------------------------------------------------------------------------------

def message_properties(*, tags: str | None = None, keys: str | Sequence[str] | None = None,
                       uniq_key: str | None = "auto", wait: bool | None = True,
                       extra: Mapping[str, str] | None = None, trailing_separator: bool = False) -> str:
    """A properties string as a Java producer builds it (no trailing \\x02 by default)."""
    props: dict[str, str] = {}
    if keys is not None:
        props["KEYS"] = keys if isinstance(keys, str) else " ".join(keys)
    if tags is not None:
        props["TAGS"] = tags
    if wait is not None:
        props["WAIT"] = "true" if wait else "false"
    if uniq_key == "auto":
        uniq_key = new_uniq_key()
    if uniq_key is not None:
        props["UNIQ_KEY"] = uniq_key
    props.update(extra or {})
    text = encode_properties(props)
    return text if trailing_separator else text.rstrip("\x02")


def send_header(topic: str, *, queue_id: int = 0, properties: str = "", v2: bool = True,
                producer_group: str = "PID_TEST", default_topic: str = "TBW102",
                default_topic_queue_nums: int = 4, sys_flag: int = 0, flag: int = 0,
                born_timestamp: int | None = None, reconsume_times: int | None = None,
                max_reconsume_times: int | None = None, batch: bool | None = None) -> dict[str, str]:
    """SEND_MESSAGE (V1 long names) or SEND_MESSAGE_V2 (a..n) extFields."""
    values = {
        "producerGroup": producer_group, "topic": topic, "defaultTopic": default_topic,
        "defaultTopicQueueNums": default_topic_queue_nums, "queueId": queue_id, "sysFlag": sys_flag,
        "bornTimestamp": int(time.time() * 1000) if born_timestamp is None else born_timestamp,
        "flag": flag, "properties": properties, "reconsumeTimes": reconsume_times, "unitMode": False,
        "maxReconsumeTimes": max_reconsume_times, "batch": batch,
    }
    if not v2:
        return {k: _text(v) for k, v in values.items() if v is not None}
    letters = dict(zip(
        ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
         "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch"),
        "abcdefghijklm", strict=True))
    return {letters[k]: _text(v) for k, v in values.items() if v is not None}


async def send_message(client: RemotingClient, addr: str, topic: str, body: bytes, *,
                       tags: str | None = None, keys: str | Sequence[str] | None = None,
                       queue_id: int = 0, properties: str | None = None, v2: bool = True,
                       extra_properties: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
                       **header: Any) -> RemotingCommand:
    """SEND_MESSAGE_V2 (or SEND_MESSAGE with v2=False) of one message; returns the response."""
    if properties is None:
        properties = message_properties(tags=tags, keys=keys, extra=extra_properties)
    ext = send_header(topic, queue_id=queue_id, properties=properties, v2=v2, **header)
    code = RequestCode.SEND_MESSAGE_V2 if v2 else RequestCode.SEND_MESSAGE
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), timeout)


def batch_body(messages: Iterable[bytes | tuple[bytes, Mapping[str, Any]]]) -> tuple[bytes, list[str]]:
    """A SEND_BATCH_MESSAGE body and the UNIQ_KEYs of its messages.

    Each message is a body, or (body, {"tags":..., "keys":..., "flag":...}).
    """
    items, uniqs = [], []
    for m in messages:
        body, opts = (m, {}) if isinstance(m, bytes | bytearray) else m
        uniq = new_uniq_key()
        uniqs.append(uniq)
        props = message_properties(tags=opts.get("tags"), keys=opts.get("keys"), uniq_key=uniq, wait=None)
        items.append(BatchItem(int(opts.get("flag", 0)), bytes(body), props))
    return encode_batch_body(items), uniqs


async def send_batch(client: RemotingClient, addr: str, topic: str,
                     messages: Iterable[bytes | tuple[bytes, Mapping[str, Any]]], *, queue_id: int = 0,
                     code: int = RequestCode.SEND_BATCH_MESSAGE, timeout: float = DEFAULT_TIMEOUT,
                     **header: Any) -> RemotingCommand:
    """SEND_BATCH_MESSAGE (320, V2 names); with code=SEND_MESSAGE it is sent the C++ way (10 + batch)."""
    body, _ = batch_body(messages)
    props = message_properties(uniq_key=new_uniq_key())
    v2 = code != RequestCode.SEND_MESSAGE
    ext = send_header(topic, queue_id=queue_id, properties=props, v2=v2, batch=True, **header)
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), timeout)


# -- pull / query ------------------------------------------------------------------------------------

async def pull(client: RemotingClient, addr: str, group: str, topic: str, queue_id: int, offset: int, *,
               max_nums: int = 32, subscription: str | None = "*", suspend_ms: int = 0,
               commit_offset: int = 0, sys_flag: int | None = None, code: int = RequestCode.PULL_MESSAGE,
               timeout: float = DEFAULT_TIMEOUT, expression_type: str = "TAG") -> RemotingCommand:
    """PULL_MESSAGE. With `subscription` the header carries it (the pull/lite-pull consumer way)."""
    if sys_flag is None:
        sys_flag = PULL_SUSPEND if suspend_ms else 0
        if subscription is not None:
            sys_flag |= PULL_SUBSCRIPTION
    ext: dict[str, Any] = {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
        "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": commit_offset,
        "suspendTimeoutMillis": suspend_ms, "subVersion": 0, "expressionType": expression_type,
    }
    if subscription is not None:
        ext["subscription"] = subscription
    return await invoke(client, addr, code, ext, timeout=max(timeout, suspend_ms / 1000 + 2))


def stored_record(i: int, tags: str | None = None, body: bytes | None = None, sys_flag: int = 0) -> bytes:
    """A stored message record of topic T at queue offset ``i`` (UNIQ_KEY ``U<i>``), as a pull
    answer carries it."""
    props = {"UNIQ_KEY": f"U{i}"}
    if tags:
        props["TAGS"] = tags
    return encode_message(MessageExt(topic="T", body=body or b"m%d" % i, properties=props, queue_offset=i,
                                     commit_log_offset=100 * i, sys_flag=sys_flag,
                                     store_host=("127.0.0.1", 10911)))


def pull_answer(code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
    """A PULL_MESSAGE response (next 3, min 0, max 9 unless ``ext`` says otherwise)."""
    fields = {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0", "maxOffset": "9"}
    fields.update(ext)
    return RemotingCommand.response(code, None, fields, memoryview(body))


def decode_pull(response: RemotingCommand) -> list[MessageExt]:
    """The messages in a PULL / QUERY / VIEW answer body ([] for none)."""
    body = response.body_bytes()
    return decode_messages(body) if body else []


def count_records(body: bytes) -> int:
    """Count stored records by walking TOTALSIZE fields (no decoding)."""
    n = pos = 0
    while pos + 4 <= len(body):
        (size,) = struct.unpack_from(">i", body, pos)
        if size <= 0:
            break
        pos += size
        n += 1
    return n


async def get_max_offset(client: RemotingClient, addr: str, topic: str, queue_id: int) -> int:
    resp = await invoke(client, addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext_fields["offset"])  # type: ignore[index]


async def query_message(client: RemotingClient, addr: str, topic: str, key: str, *, unique: bool = False,
                        max_num: int = 32, begin: int = 0, end: int | None = None) -> RemotingCommand:
    ext: dict[str, Any] = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin,
                           "endTimestamp": end if end is not None else int(time.time() * 1000) + 60_000}
    if unique:
        ext["_UNIQUE_KEY_QUERY"] = "true"
    return await invoke(client, addr, RequestCode.QUERY_MESSAGE, ext)


# -- admin ----------------------------------------------------------------------------------------

async def update_config(client: RemotingClient, addr: str, code: int, key: str, value: object) -> None:
    """UPDATE_BROKER_CONFIG or UPDATE_NAMESRV_CONFIG of one key, which must succeed."""
    r = await invoke(client, addr, code, body=f"{key}={_text(value)}\n".encode())
    assert r.code == ResponseCode.SUCCESS, r.remark


async def create_topic(client: RemotingClient, addr: str, topic: str, *, read: int = 4, write: int = 4,
                       perm: int = 6, order: bool = False, filter_type: str = "SINGLE_TAG",
                       attributes: str | None = None) -> RemotingCommand:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": read, "writeQueueNums": write,
           "perm": perm, "topicFilterType": filter_type, "topicSysFlag": 0, "order": order,
           "attributes": attributes}
    return await invoke(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)


async def get_all_topic_config(client: RemotingClient, addr: str) -> dict[str, TopicConfig]:
    resp = await invoke(client, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return dict(TopicConfigSerializeWrapper.from_json(resp.body_bytes()).topic_config_table)


async def get_route(client: RemotingClient, namesrv: str, topic: str) -> TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC; None when the name server answers TOPIC_NOT_EXIST."""
    resp = await invoke(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return TopicRouteData.from_json(resp.body_bytes())


async def create_routed_topic(namesrv: str, broker: str, topic: str, queues: int, *, order: bool = False,
                              timeout: float = 10.0) -> None:
    """Create ``topic`` with ``queues`` read and write queues, then wait until the name server
    routes all of them (clients started next see the whole topic at once)."""
    async with RemotingClient() as rc:
        resp = await create_topic(rc, broker, topic, read=queues, write=queues, order=order)
        assert resp.code == ResponseCode.SUCCESS, resp.remark

        async def routed() -> bool:
            route = await get_route(rc, namesrv, topic)
            return route is not None and route.queue_datas[0].read_queue_nums == queues

        await wait_until(routed, timeout=timeout)


async def heartbeat(client: RemotingClient, addr: str, client_id: str, *, producer_groups: Sequence[str] = (),
                    consumer_groups: Mapping[str, Sequence[str]] | None = None,
                    sql92: Mapping[str, str] | None = None) -> RemotingCommand:
    """HEART_BEAT with push-consumer data: consumer_groups maps group -> subscribed topics ('*', or the
    SQL92 expression `sql92` gives the topic)."""
    consumers = []
    sql92 = sql92 or {}
    for group, topics in (consumer_groups or {}).items():
        consumers.append({
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"classFilterMode": False, "topic": t, "subString": sql92.get(t, "*"),
                                     "tagsSet": [], "codeSet": [], "subVersion": int(time.time() * 1000),
                                     "expressionType": "SQL92" if t in sql92 else "TAG"} for t in topics],
        })
    body = orjson.dumps({"clientID": client_id,
                         "producerDataSet": [{"groupName": g} for g in producer_groups],
                         "consumerDataSet": consumers})
    return await invoke(client, addr, RequestCode.HEART_BEAT, {}, body)


# -- in-process servers -----------------------------------------------------------------------------

SMALL_STORE = {
    "mapped_file_size_commit_log": 4 * 1024 * 1024,
    "mapped_file_size_consume_queue": 1000 * 20,
    "max_hash_slot_num": 1000,
    "max_index_num": 4000,
}


@dataclass
class BrokerOptions:
    name: str = "broker-a"
    cluster: str = "DefaultCluster"
    broker: dict[str, Any] = field(default_factory=dict)
    store: dict[str, Any] = field(default_factory=dict)
    listen_port: int = 0


async def start_namesrv(tmp_path: Path, **config: Any) -> Any:
    """A NamesrvController on 127.0.0.1, a free port, its KV file under tmp_path."""
    from rocketq.config import NamesrvConfig
    from rocketq.namesrv.server import NamesrvController
    from rocketq.remoting.config import RemotingServerConfig

    ns_dir = tmp_path / "namesrv"
    ns_dir.mkdir(parents=True, exist_ok=True)
    cfg = NamesrvConfig(listen_port=0, kv_config_path=str(ns_dir / "kvConfig.json"),
                        config_store_path=str(ns_dir / "namesrv.properties"), **config)
    ctl = NamesrvController(cfg, RemotingServerConfig(listen_port=0))
    await ctl.start()
    return ctl


def broker_configs(tmp_path: Path, namesrv_addr: str | None,
                   opts: BrokerOptions | None = None) -> tuple[Any, ...]:
    from rocketq.config import BrokerConfig
    from rocketq.remoting.config import RemotingServerConfig
    from rocketq.store.config import MessageStoreConfig

    opts = opts or BrokerOptions()
    broker = BrokerConfig(broker_name=opts.name, broker_cluster_name=opts.cluster, namesrv_addr=namesrv_addr,
                          **opts.broker)
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path / f"store-{opts.name}"),
                               **{**SMALL_STORE, **opts.store})
    return broker, store, RemotingServerConfig(listen_port=opts.listen_port)


async def start_broker(tmp_path: Path, namesrv_addr: str | None, opts: BrokerOptions | None = None) -> Any:
    """A BrokerController on 127.0.0.1 port 0 with a small store under tmp_path/store-<name>."""
    from rocketq.broker.controller import BrokerController

    ctl = BrokerController(*broker_configs(tmp_path, namesrv_addr, opts))
    await ctl.start()
    return ctl


@contextlib.asynccontextmanager
async def in_process_cluster(tmp_path: Path, opts: BrokerOptions | None = None,
                             with_namesrv: bool = True) -> AsyncIterator[tuple[Any, Any, RemotingClient]]:
    """(name server or None, broker, client); everything is shut down on exit."""
    ns = await start_namesrv(tmp_path) if with_namesrv else None
    broker = None
    client = RemotingClient()
    try:
        broker = await start_broker(tmp_path, ns.address if ns is not None else None, opts)
        yield ns, broker, client
    finally:
        await client.close()
        if broker is not None:
            await broker.shutdown()
        if ns is not None:
            await ns.shutdown()


# -- pop (RocketMQ 5) ---------------------------------------------------------------------------------


async def pop(client: RemotingClient, addr: str, group: str, topic: str, *, queue_id: int = -1,
              max_nums: int = 32, invisible_ms: int = 60_000, poll_ms: int = 0, init_mode: int = 0,
              order: bool = False, exp: str | None = None, attempt_id: str | None = None,
              timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
    """POP_MESSAGE (200050) as MQClientAPIImpl.popMessageAsync sends it."""
    return await invoke(client, addr, RequestCode.POP_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": max_nums,
        "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
        "initMode": init_mode, "expType": "TAG" if exp else None, "exp": exp,
        "order": "true" if order else None, "attemptId": attempt_id,
    }, timeout=timeout + poll_ms / 1000)


def popped(response: RemotingCommand, broker_name: str) -> list[MessageExt]:
    """The messages of a pop answer with their POP_CK handle, built as processPopResponse does."""
    from rocketq.codec.pop import build_extra_info, parse_offset_info, retry_flag

    ext = response.ext_fields or {}
    starts = parse_offset_info(ext.get("startOffsetInfo"))
    out = []
    for m in decode_messages(response.body):
        if "POP_CK" not in m.properties:
            start = starts[f"{retry_flag(m.topic)}@{m.queue_id}"]
            m.properties["POP_CK"] = build_extra_info(
                start, int(ext["popTime"]), int(ext["invisibleTime"]), int(ext["reviveQid"]), m.topic,
                broker_name, m.queue_id, m.queue_offset)
        out.append(m)
    return out


def pop_topic_of(m: MessageExt, group: str) -> str:
    """The topic a popped message is acked on (its pop retry topic when it was retried)."""
    from rocketq.codec.pop import parse_extra_info

    return parse_extra_info(m.properties["POP_CK"]).real_topic(m.topic, group)


async def ack(client: RemotingClient, addr: str, group: str, m: MessageExt) -> RemotingCommand:
    """ACK_MESSAGE (200051) of one popped message."""
    from rocketq.codec.pop import parse_extra_info

    ck = m.properties["POP_CK"]
    info = parse_extra_info(ck)
    return await invoke(client, addr, RequestCode.ACK_MESSAGE, {
        "consumerGroup": group, "topic": pop_topic_of(m, group), "queueId": info.queue_id,
        "extraInfo": ck, "offset": info.queue_offset})


async def change_invisible(client: RemotingClient, addr: str, group: str, m: MessageExt,
                           invisible_ms: int) -> RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME (200053); on success the message's POP_CK is the new handle."""
    from rocketq.codec.pop import build_extra_info, parse_extra_info

    ck = m.properties["POP_CK"]
    info = parse_extra_info(ck)
    topic = pop_topic_of(m, group)
    r = await invoke(client, addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": group, "topic": topic, "queueId": info.queue_id, "extraInfo": ck,
        "offset": info.queue_offset, "invisibleTime": invisible_ms})
    if r.code == ResponseCode.SUCCESS:
        e = r.ext_fields or {}
        m.properties["POP_CK"] = build_extra_info(
            info.queue_offset or 0, int(e["popTime"]), int(e["invisibleTime"]), int(e["reviveQid"]), topic,
            info.broker_name, info.queue_id, info.queue_offset)
    return r
