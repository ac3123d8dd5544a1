"""Channel.flush(): a frame whose latency matters is written at once, not at the end of the turn."""

from __future__ import annotations

import asyncio
from typing import Any

from rocketq.codec.command import RemotingCommand
from rocketq.remoting import Channel


class Transport:
    def __init__(self) -> None:
        self.writes: list[list[Any]] = []

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1)

    def writelines(self, parts: list[Any]) -> None:
        self.writes.append(list(parts))

    def is_closing(self) -> bool:
        return False


def _channel() -> tuple[Channel, Transport]:
    t = Transport()
    return Channel(t, object()), t  # type: ignore[arg-type]


async def test_send_waits_for_the_turn_and_flush_writes_now() -> None:
    ch, t = _channel()
    ch.send(RemotingCommand.request(10, None, {"a": "1"}))
    ch.send(RemotingCommand.request(10, None, {"a": "2"}))
    assert t.writes == []  # the sends of a turn share one write at its end
    ch.flush()
    assert len(t.writes) == 1
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(t.writes) == 1  # the scheduled write found nothing left


async def test_flush_leaves_a_corked_channel_to_its_read() -> None:
    ch, t = _channel()
    ch._corked = True  # inside a read of this connection, which writes everything at its end
    ch.send(RemotingCommand.request(10, None, {"a": "1"}))
    ch.flush()
    assert t.writes == []
    ch._corked = False
    ch._write_out()
    assert len(t.writes) == 1
