"""MessageQueueSelector: pick the queue of an ordered message from an argument (an order id).

A selector is anything with ``select(mqs, msg, arg) -> MessageQueue``, or a plain callable with
that signature. The hash selector hashes strings and ints the way Java's ``hashCode()`` does, so
a Python and a Java producer send the same order id to the same queue, in every process (Python's
own ``hash()`` of a str changes per process).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from rocketq.client.message import Message
from rocketq.codec.bodies import MessageQueue
from rocketq.codec.message import java_string_hash
from rocketq.errors import InvalidArgument

__all__ = [
    "MessageQueueSelector",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SelectorLike",
    "java_hash_code",
    "select_queue",
]


@runtime_checkable
class MessageQueueSelector(Protocol):
    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


SelectorLike: TypeAlias = (
    MessageQueueSelector | Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
)


def _to_int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def java_hash_code(arg: Any) -> int:
    """``arg.hashCode()`` as Java computes it for String, Integer/Long and Boolean."""
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(value ^ (value >>> 32))
        return _to_int32(v ^ (v >> 32))
    return hash(arg)


class SelectMessageQueueByHash:
    """``abs(arg.hashCode() % n)``: the same order id always lands in the same queue."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[abs(java_hash_code(arg)) % len(mqs)]


class SelectMessageQueueByRandom:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[self._rng.randrange(len(mqs))]


def select_queue(selector: SelectorLike, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    select = getattr(selector, "select", None)
    mq = select(mqs, msg, arg) if select is not None else selector(mqs, msg, arg)  # type: ignore[operator]
    if not isinstance(mq, MessageQueue):
        raise InvalidArgument(f"the message queue selector returned {mq!r}, not a MessageQueue")
    return mq
