"""AdminClient: RocketMQ's MQAdminExt (what ``mqadmin`` calls) as an asyncio Python API.

::

    from rocketq.admin import AdminClient

    async with AdminClient("127.0.0.1:9876") as admin:
        await admin.create_topic("Orders", cluster="DefaultCluster", write_queue_nums=8)
        for row in await admin.examine_consumer_progress("OrderProcessors"):
            print(row.mq, row.diff)

The blocking twin is :class:`rocketq.admin.SyncAdminClient`. Operations raise the
``rocketq.errors`` class of what went wrong: ``RemotingConnectError`` when a server cannot be
reached, the class of the response code when a server refuses (``TopicNotExist``,
``NoPermission``, ...), ``InvalidArgument`` for bad input.
"""

from __future__ import annotations

from typing import Any

from rocketq.admin.acl import AclAdmin, AuthAdmin
from rocketq.admin.brokers import BrokerAdmin
from rocketq.admin.controllers import ControllerAdmin
from rocketq.admin.groups import GroupAdmin
from rocketq.admin.messages import MessageAdmin
from rocketq.admin.topics import TopicAdmin
from rocketq.admin.trace import TraceAdmin
from rocketq.client.api import parse_tags
from rocketq.client.message import MessageExt, MessageQueue
from rocketq.errors import RemotingError, ServerError

__all__ = ["AdminClient"]

# MessageTrack.trackType values (RocketMQ's TrackType).
CONSUMED = "CONSUMED"
CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
NOT_CONSUME_YET = "NOT_CONSUME_YET"
UNKNOWN = "UNKNOWN"


class AdminClient(TopicAdmin, GroupAdmin, MessageAdmin, BrokerAdmin, TraceAdmin, AclAdmin, AuthAdmin,
                  ControllerAdmin):
    """Every admin operation, over one connection per server (made on first use).

    ``AdminClient(namesrv_addr=None, *, timeout=5.0)``: ``namesrv_addr`` is ``"host:port;host:port"``
    (default: env NAMESRV_ADDR); ``timeout`` (seconds) bounds each request.
    """

    async def message_track_detail(self, msg: MessageExt) -> list[dict[str, Any]]:
        """Whether each group consuming the message's topic has consumed it (RocketMQ's MessageTrack).

        A group has consumed the message once its committed offset of the message's queue is past
        it; a message whose tag the group's subscription leaves out is CONSUMED_BUT_FILTERED. Each
        entry: ``consumerGroup``, ``trackType``, ``online`` and, for an error, ``exceptionDesc``.
        """
        broker = next(
            (
                b.broker_name
                for b in (await self.examine_topic_route_info(msg.topic)).broker_datas
                if b.master_addr and b.master_addr == f"{msg.store_host[0]}:{msg.store_host[1]}"
            ),
            None,
        )
        tracks = []
        for group in await self.query_topic_consume_by_who(msg.topic):
            track: dict[str, Any] = {"consumerGroup": group, "trackType": UNKNOWN, "online": False}
            sub_string = None
            try:
                cc = await self.examine_consumer_connection_info(group)
                track["online"] = True
                sub = cc.subscription_table.get(msg.topic)
                sub_string = sub.sub_string if sub is not None else None
            except ServerError:
                pass
            try:
                stats = await self.examine_consume_stats(group, msg.topic)
            except (ServerError, RemotingError) as exc:
                track["exceptionDesc"] = str(exc)
                tracks.append(track)
                continue
            wrapper = None
            for mq, w in stats.offset_table.items():
                if mq.queue_id == msg.queue_id and (broker is None or mq.broker_name == broker):
                    wrapper = w
                    break
            if wrapper is not None:
                tags = parse_tags(sub_string)
                if wrapper.consumer_offset <= msg.queue_offset:
                    track["trackType"] = NOT_CONSUME_YET
                elif tags is not None and msg.tags not in tags:
                    track["trackType"] = CONSUMED_BUT_FILTERED
                else:
                    track["trackType"] = CONSUMED
            tracks.append(track)
        return tracks

    async def message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (what a consumer of it would be assigned from)."""
        return await self.fetch_subscribe_queues(topic)
