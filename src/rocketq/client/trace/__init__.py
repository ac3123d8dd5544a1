"""Message trace (RocketMQ's msgTrace): see docs/trace.md.

``codec`` reads and writes the records (no I/O), ``dispatcher`` batches them into trace messages,
``hooks`` makes them from sends, consumptions and transaction ends, ``attach`` wires a dispatcher
into a producer or consumer that was built with ``enable_trace=True``.
"""

from rocketq.client.trace.codec import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    decode_traces,
    encode_trace,
)
from rocketq.client.trace.dispatcher import RMQ_SYS_TRACE_TOPIC, AsyncTraceDispatcher
from rocketq.client.trace.hooks import ConsumeMessageTraceHook, SendTraceHook, trace_end_transaction

__all__ = [
    "RMQ_SYS_TRACE_TOPIC",
    "AsyncTraceDispatcher",
    "ConsumeMessageTraceHook",
    "ConsumeReturnType",
    "MessageType",
    "SendTraceHook",
    "TraceBean",
    "TraceContext",
    "TraceType",
    "decode_traces",
    "encode_trace",
    "trace_end_transaction",
]
