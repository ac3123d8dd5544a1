"""What every ``rocketq admin`` command shares: the result type, tables, JSON, times, argument types.

A command is ``async def handler(admin, args) -> Result``. ``Result.data`` is what ``--json``
prints (plain JSON values, RocketMQ's member names); ``Result.views`` is what a human sees: rich
tables and lines. Every cell goes through :func:`cell`, which makes it literal text, so a topic,
key or body can never be taken for rich markup.
"""

from __future__ import annotations

import argparse
import base64
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from rocketq.cli.argtypes import non_negative, positive

if TYPE_CHECKING:
    from rocketq.admin import AdminClient
    from rocketq.client.message import MessageExt
    from rocketq.codec.bodies import MessageQueue

__all__ = [
    "Adder",
    "Handler",
    "Result",
    "bool_arg",
    "cell",
    "format_ts",
    "kv_table",
    "message_obj",
    "message_view",
    "non_negative",
    "parse_timestamp",
    "positive",
    "table",
]

Handler = Callable[["AdminClient", argparse.Namespace], Awaitable["Result"]]
# add(name, handler, help) -> the command's parser, with the common options already on it.
Adder = Callable[[str, Handler, str], argparse.ArgumentParser]

# QUERY_MESSAGE's "no upper bound" (Java's Long.MAX_VALUE).
MAX_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Result:
    data: Any
    views: Sequence[RenderableType] = field(default_factory=tuple)
    exit_code: int = 0


def printable(text: str) -> str:
    """Control characters (an ESC in a message body, say) shown as escapes, never sent to the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" for c in text)


def cell(value: object) -> Text:
    """A table cell or line shown literally (no markup, no emoji codes, no control characters)."""
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text("true" if value else "false")
    return Text(printable(str(value)))


def table(columns: Sequence[str], rows: Iterable[Sequence[object]], title: str | None = None) -> Table:
    t = Table(title=cell(title) if title else None, show_lines=False, header_style="bold")
    for name in columns:
        t.add_column(cell(name), overflow="fold")
    for row in rows:
        t.add_row(*(cell(v) for v in row))
    return t


def kv_table(
    mapping: Mapping[str, object], title: str | None = None, key: str = "Key", value: str = "Value"
) -> Table:
    return table((key, value), sorted(mapping.items()), title)


def format_ts(ms: int | None) -> str:
    """Local time with milliseconds, as mqadmin prints; empty for 0/unknown."""
    if not ms or ms <= 0:
        return ""
    try:
        return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def parse_timestamp(text: str) -> int:
    """mqadmin's time argument: ``now``, epoch milliseconds, ``yyyy-MM-dd#HH:mm:ss:SSS``, or ISO 8601."""
    t = text.strip()
    if t == "now":
        return int(time.time() * 1000)
    if t.lstrip("-").isdigit():
        return int(t)
    candidates = [t]
    if "#" in t:
        day, _, clock = t.partition("#")
        parts = clock.split(":")
        if len(parts) == 4:  # HH:mm:ss:SSS
            clock = ":".join(parts[:3]) + "." + parts[3]
        candidates.insert(0, f"{day}T{clock}")
    for c in candidates:
        try:
            return int(datetime.fromisoformat(c).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(
        f"'{text}' is not a time: use now, epoch milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or ISO 8601"
    )


def timestamp_arg(text: str) -> int:
    return parse_timestamp(text)


def bool_arg(text: str) -> bool:
    """mqadmin's ``true|false`` option values."""
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"'{text}' is not true or false")


def mq_dict(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def body_text(body: bytes) -> str:
    return body.decode("utf-8", "replace")


def message_obj(msg: MessageExt, *, with_body: bool = True) -> dict[str, Any]:
    """A stored message as ``--json`` shows it (the body as UTF-8 text, and base64 when it is not)."""
    out: dict[str, Any] = {
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "topic": msg.topic,
        "tags": msg.tags,
        "keys": msg.keys,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": f"{msg.born_host[0]}:{msg.born_host[1]}",
        "storeHost": f"{msg.store_host[0]}:{msg.store_host[1]}",
        "sysFlag": msg.sys_flag,
        "bodyCRC": msg.body_crc,
        "storeSize": msg.store_size,
        "properties": dict(msg.properties),
        "bodyLength": len(msg.body),
    }
    if with_body:
        try:
            out["body"] = msg.body.decode("utf-8")
        except UnicodeDecodeError:
            out["body"] = None
            out["bodyBase64"] = base64.b64encode(msg.body).decode()
    return out


def message_view(msg: MessageExt, *, print_body: bool = True) -> Table:
    """The ``queryMsgById`` block: one message, field by field."""
    rows: list[tuple[str, object]] = [
        ("Msg Id", msg.msg_id),
        ("Offset Msg Id", msg.offset_msg_id),
        ("Topic", msg.topic),
        ("Tags", msg.tags),
        ("Keys", msg.keys),
        ("Queue ID", msg.queue_id),
        ("Queue Offset", msg.queue_offset),
        ("CommitLog Offset", msg.commit_log_offset),
        ("Reconsume Times", msg.reconsume_times),
        ("Born Timestamp", format_ts(msg.born_timestamp)),
        ("Store Timestamp", format_ts(msg.store_timestamp)),
        ("Born Host", f"{msg.born_host[0]}:{msg.born_host[1]}"),
        ("Store Host", f"{msg.store_host[0]}:{msg.store_host[1]}"),
        ("System Flag", msg.sys_flag),
        ("Properties", dict(msg.properties)),
    ]
    if print_body:
        rows.append(("Message Body", body_text(msg.body)))
    return table(("Field", "Value"), rows)
