"""QUERY_ASSIGNMENT (400): the broker-side rebalance of RocketMQ 5 push consumers that leave it to
the broker (``clientRebalance=false``), and the way such a consumer learns its group's PULL/POP mode
(RocketMQ's QueryAssignmentProcessor).

The answer is a QueryAssignmentResponseBody: ``{"messageQueueAssignments": [{"messageQueue": {...},
"mode": "PULL"|"POP", "attachments": {}}]}``. In PULL mode the topic's queues (from the name server's
route, else this broker's own) are divided among the group's online clients by the named strategy
(the broker knows AVG and AVG_BY_CIRCLE, as Java's); in POP mode with popShareQueueNum 0 every
client gets each broker's queue -1 (pop from all of them), else its own share plus that of the
popShareQueueNum clients after it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from rocketq.codec.bodies import TopicRouteData
from rocketq.codec.codes import RequestCode, ResponseCode
from rocketq.codec.command import RemotingCommand

if TYPE_CHECKING:
    from rocketq.broker.controller import BrokerController
    from rocketq.broker.pop.request_mode import MessageRequestModeManager

log = logging.getLogger("rocketq.broker.pop")

PERM_READ = 4
Mq = tuple[str, str, int]  # topic, brokerName, queueId (sorted as Java's MessageQueue.compareTo)


def allocate(strategy: str, cid: str, mq_all: Sequence[Mq], cid_all: Sequence[str]) -> list[Mq] | None:
    """AllocateMessageQueueAveragely / ...ByCircle; None for a strategy the broker does not know."""
    if cid not in cid_all or not mq_all:
        return []
    index, n, c = cid_all.index(cid), len(mq_all), len(cid_all)
    if strategy == "AVG_BY_CIRCLE":
        return [mq for i, mq in enumerate(mq_all) if i % c == index]
    if strategy != "AVG":
        return None
    mod = n % c
    size = 1 if n <= c else (n // c + 1 if mod > 0 and index < mod else n // c)
    start = index * size if mod > 0 and index < mod else index * size + mod
    return list(mq_all[start : start + min(size, n - start)])


def allocate_for_pop(
    strategy: str, cid: str, mq_all: Sequence[Mq], cid_all: Sequence[str], share: int
) -> list[Mq] | None:
    """allocate4Pop."""
    if share <= 0 or share >= len(cid_all) - 1:
        return sorted({(t, b, -1) for t, b, _ in mq_all})
    if len(cid_all) > len(mq_all):
        return [mq_all[cid_all.index(cid) % len(mq_all)]] if cid in cid_all else []
    mine = allocate(strategy, cid, mq_all, cid_all)
    if mine is None or cid not in cid_all:
        return mine
    index = cid_all.index(cid)
    for i in range(1, share + 1):
        more = allocate(strategy, cid_all[(index + i) % len(cid_all)], mq_all, cid_all)
        mine.extend(more or ())
    return mine


class QueryAssignmentProcessor:
    def __init__(self, controller: BrokerController, modes: MessageRequestModeManager) -> None:
        self._ctl = controller
        self._modes = modes

    async def query_assignment(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        try:
            raw = (
                request.body
                if isinstance(request.body, bytes | bytearray | memoryview)
                else b"".join(request.body)
            )
            body = orjson.loads(bytes(raw))
            topic, group, cid = str(body["topic"]), str(body["consumerGroup"]), str(body["clientId"])
            strategy, model = (
                str(body.get("strategyName") or "AVG"),
                str(body.get("messageModel") or "CLUSTERING"),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad QueryAssignmentRequestBody: {exc}")
        mode, share = self._modes.mode(topic, group)
        mq_all = sorted(await self._topic_queues(topic))
        assigned: list[Mq] | None
        if not mq_all:
            assigned = None
        elif model == "BROADCASTING":
            assigned = mq_all
        else:
            info = self._ctl.consumer_manager.get_consumer_group_info(group)
            cid_all = sorted(info.get_all_client_id()) if info is not None else []
            if not cid_all:
                assigned = None
            elif mode == "POP":
                assigned = allocate_for_pop(strategy, cid, mq_all, cid_all, share)
            else:
                assigned = allocate(strategy, cid, mq_all, cid_all)
        if assigned is None:
            return request.make_response(ResponseCode.SUCCESS, None, None, b"{}")
        answer = {
            "messageQueueAssignments": [
                {"attachments": {}, "messageQueue": {"brokerName": b, "queueId": q, "topic": t}, "mode": mode}
                for t, b, q in assigned
            ]
        }
        return request.make_response(ResponseCode.SUCCESS, None, None, orjson.dumps(answer))

    async def _topic_queues(self, topic: str) -> list[Mq]:
        """The readable queues of `topic` in every broker (the name server's route), else this one's."""
        ctl = self._ctl
        for addr in ctl.broker_config.namesrv_addr_list:
            try:
                response = await ctl.outer_api.client.invoke(
                    addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 3.0
                )
            except Exception as exc:
                log.info("route of %s from %s: %s", topic, addr, exc)
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                route = TopicRouteData.from_json(response.body_bytes())
                return [
                    (topic, qd.broker_name, q)
                    for qd in route.queue_datas
                    if qd.perm & PERM_READ
                    for q in range(qd.read_queue_nums)
                ]
        cfg = ctl.topic_manager.select_topic_config(topic)
        if cfg is None or not cfg.perm & PERM_READ:
            return []
        return [(topic, ctl.broker_name, q) for q in range(cfg.read_queue_nums)]
