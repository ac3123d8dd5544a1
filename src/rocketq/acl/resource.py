"""PlainAccessValidator.parse, sans-I/O: which resources a request needs, and what was signed.

Codes not listed need no resource (only a valid signature, and ``admin`` for ``ADMIN_CODES``).
rocketq also maps what RocketMQ 5.x added to the same table (SEND_BATCH_MESSAGE like
SEND_MESSAGE_V2) and LITE_PULL_MESSAGE like PULL_MESSAGE, whose header it shares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rocketq.acl.errors import AclError
from rocketq.acl.model import PUB, RETRY_PREFIX, SUB, AccessRequest, retry_topic
from rocketq.acl.signature import ACCESS_KEY, SIGNATURE, signed_head
from rocketq.codec.bodies.client import HeartbeatData
from rocketq.codec.codes import RequestCode
from rocketq.codec.command import RemotingCommand

__all__ = ["parse_request", "remote_ip"]

Needs = dict[str, int]


def remote_ip(remote_addr: str) -> str:
    """The host part of ``ip:port`` (``[v6]:port`` too), as parse's whiteRemoteAddress."""
    host, sep, _ = remote_addr.rpartition(":")
    if not sep:
        return remote_addr
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _put(needs: Needs, resource: str | None, perm: int) -> None:
    if resource is not None:
        needs[resource] = perm


def _send(topic_key: str, group_key: str) -> Callable[[dict[str, str], RemotingCommand, Needs], None]:
    def need(ext: dict[str, str], cmd: RemotingCommand, needs: Needs) -> None:
        topic = ext.get(topic_key)
        if topic is not None and topic.startswith(RETRY_PREFIX):
            group = ext.get(group_key)
            _put(needs, None if group is None else retry_topic(group), SUB)
        else:
            _put(needs, topic, PUB)
    return need


def _group(key: str) -> Callable[[dict[str, str], RemotingCommand, Needs], None]:
    def need(ext: dict[str, str], cmd: RemotingCommand, needs: Needs) -> None:
        group = ext.get(key)
        _put(needs, None if group is None else retry_topic(group), SUB)
    return need


def _pull(ext: dict[str, str], cmd: RemotingCommand, needs: Needs) -> None:
    _put(needs, ext.get("topic"), SUB)
    group = ext.get("consumerGroup")
    if group is not None:
        needs[RETRY_PREFIX + group] = SUB


def _query(ext: dict[str, str], cmd: RemotingCommand, needs: Needs) -> None:
    _put(needs, ext.get("topic"), SUB)


def _offset(ext: dict[str, str], cmd: RemotingCommand, needs: Needs) -> None:
    group = ext.get("consumerGroup")
    if group is not None:
        needs[RETRY_PREFIX + group] = SUB
    _put(needs, ext.get("topic"), SUB)


def _heartbeat(ext: dict[str, str], cmd: RemotingCommand, needs: Needs) -> None:
    data = HeartbeatData.from_json(cmd.body_bytes())
    for consumer in data.consumer_data_set:
        needs[retry_topic(consumer.group_name)] = SUB
        for sub in consumer.subscription_data_set:
            needs[sub.topic] = SUB


_NEEDS: Final[dict[int, Callable[[dict[str, str], RemotingCommand, Needs], None]]] = {
    RequestCode.SEND_MESSAGE: _send("topic", "producerGroup"),
    RequestCode.SEND_MESSAGE_V2: _send("b", "a"),
    RequestCode.SEND_BATCH_MESSAGE: _send("b", "a"),
    RequestCode.CONSUMER_SEND_MSG_BACK: _group("group"),
    RequestCode.PULL_MESSAGE: _pull,
    RequestCode.LITE_PULL_MESSAGE: _pull,
    RequestCode.QUERY_MESSAGE: _query,
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _group("consumerGroup"),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _group("consumerGroup"),
    RequestCode.UPDATE_CONSUMER_OFFSET: _offset,
    RequestCode.RECALL_MESSAGE: _send("topic", "producerGroup"),  # 5.3.2: PUB on the topic
}


def parse_request(cmd: RemotingCommand, remote_addr: str, ip: str | None = None) -> AccessRequest:
    """What ``cmd`` from ``remote_addr`` needs (``ip``: its host part, when the caller knows it);
    ``AclError`` when its header or body is unreadable."""
    req = AccessRequest(cmd.code, remote_ip(remote_addr) if ip is None else ip)
    ext = cmd.fields()
    if ext is None:
        return req  # a white-listed peer may still pass
    req.access_key = ext.get(ACCESS_KEY)
    req.signature = ext.get(SIGNATURE)
    need = _NEEDS.get(cmd.code)
    if need is not None:
        try:
            need(ext, cmd, req.needs)
        except Exception as e:
            raise AclError(str(e) or type(e).__name__) from None
    req.head = signed_head(ext)
    req.body = cmd.body
    return req
