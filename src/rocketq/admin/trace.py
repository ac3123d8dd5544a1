"""Message traces as mqadmin's ``queryMsgTraceById`` and the dashboard show them (RocketMQ's
TraceView): the trace messages whose keys name a message id, decoded, one view per record of it."""

from __future__ import annotations

from dataclasses import dataclass

from rocketq.admin._base import AdminBase
from rocketq.client.message import MessageExt
from rocketq.client.trace import RMQ_SYS_TRACE_TOPIC, TraceType, decode_traces
from rocketq.errors import RocketQError

__all__ = ["TraceAdmin", "TraceView", "trace_views"]

MAX_TRACE_MESSAGES = 64  # what queryMsgTraceById asks the index for


@dataclass(frozen=True, slots=True)
class TraceView:
    """One step of a message's life: ``msg_type`` is Pub, SubBefore, SubAfter or EndTransaction."""

    msg_type: str
    msg_id: str
    group_name: str
    client_host: str  # who wrote the trace (the trace message's born host)
    timestamp: int  # ms
    cost_time: int  # ms
    status: str  # "success" / "failed"
    topic: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str = ""
    offset_msg_id: str | None = None
    retry_times: int = 0
    request_id: str = ""
    transaction_state: str | None = None


def trace_views(msg_id: str, trace_msg: MessageExt) -> list[TraceView]:
    """The records of ``trace_msg`` (its body inflated, as every lookup hands it out) about
    ``msg_id`` (TraceView.decodeFromTraceTransData)."""
    host = f"{trace_msg.born_host[0]}:{trace_msg.born_host[1]}"
    views = []
    for ctx in decode_traces(trace_msg.body.decode("utf-8", "replace")):
        bean = ctx.beans[0]
        if bean.msg_id != msg_id:
            continue
        views.append(TraceView(
            msg_type=ctx.trace_type.value, msg_id=bean.msg_id, group_name=ctx.group_name, client_host=host,
            timestamp=ctx.timestamp, cost_time=ctx.cost_time, status="success" if ctx.success else "failed",
            topic=bean.topic, tags=bean.tags, keys=bean.keys, store_host=bean.store_host,
            offset_msg_id=bean.offset_msg_id, retry_times=bean.retry_times, request_id=ctx.request_id,
            transaction_state=bean.transaction_state,
        ))
    return views


class TraceAdmin(AdminBase):
    async def query_msg_trace_by_id(self, msg_id: str, trace_topic: str | None = None) -> list[TraceView]:
        """``queryMsgTraceById``: every trace record of ``msg_id`` in ``trace_topic`` (default
        RMQ_SYS_TRACE_TOPIC), oldest first. An empty list when there is none (or no trace topic)."""
        from rocketq.admin.messages import MessageAdmin

        topic = trace_topic or RMQ_SYS_TRACE_TOPIC
        assert isinstance(self, MessageAdmin)
        try:
            found = await self.query_message(topic, msg_id, MAX_TRACE_MESSAGES)
        except RocketQError:
            found = []
        views = [v for m in found for v in trace_views(msg_id, m)]
        order = {t.value: i for i, t in enumerate(TraceType)}
        views.sort(key=lambda v: (v.timestamp or 0, order.get(v.msg_type, 9)))
        return views
