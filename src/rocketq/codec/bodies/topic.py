"""Topic configuration bodies: TopicConfig, DataVersion, the topic-config wrapper and the
REGISTER_BROKER body in its JSON and compressed forms (PROTOCOL.md §2.2 REGISTER_BROKER)."""

from __future__ import annotations

import dataclasses
import struct
import time
import zlib
from typing import Any, Final

import orjson

from rocketq.codec.bodies._schema import JavaEnum, JsonBody, body, loads_lenient
from rocketq.codec.codes import V5_0_0
from rocketq.errors import ProtocolError

__all__ = [
    "DataVersion",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
]

# Brokers from MQVersion.V5_0_0 on append topic-queue mappings to the compressed body.
_V5_0_0: Final = V5_0_0
# Upper bound on an inflated REGISTER_BROKER body; a real one is a few MiB even with 100k topics.
_MAX_INFLATED: Final = 256 * 1024 * 1024
_INT: Final = struct.Struct(">i")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicFilterType(JavaEnum):
    SINGLE_TAG = 0
    MULTI_TAG = 1


@body
class TopicConfig(JsonBody):
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6  # PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = dataclasses.field(default_factory=dict)

    def encode(self) -> str:
        """Java's ``TopicConfig.encode()``: space-separated, the form used in compressed bodies."""
        attrs = orjson.dumps(self.attributes).decode()
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
            f"{self.topic_filter_type.name} {attrs}"
        )

    @classmethod
    def decode(cls, text: str) -> TopicConfig:
        parts = text.split(" ")
        if len(parts) < 5:
            raise ProtocolError(f"bad encoded topic config: {text!r}")
        try:
            read, write, perm = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            raise ProtocolError(f"bad encoded topic config: {text!r}") from None
        attributes: dict[str, str] = {}
        if len(parts) >= 6:
            # Java ignores attributes it cannot parse (a value may contain the separator).
            try:
                parsed = orjson.loads(" ".join(parts[5:]))
                if isinstance(parsed, dict):
                    attributes = {str(k): str(v) for k, v in parsed.items()}
            except orjson.JSONDecodeError:
                pass
        return cls(parts[0], read, write, perm, TopicFilterType.parse(parts[4]), 0, False, attributes)


@body
class DataVersion(JsonBody):
    state_version: int = 0
    timestamp: int = dataclasses.field(default_factory=_now_ms)
    counter: int = 0

    def next_version(self, state_version: int | None = None) -> DataVersion:
        """Java's ``nextVersion()``: bump the counter and take the current time."""
        return DataVersion(
            self.state_version if state_version is None else state_version, _now_ms(), self.counter + 1
        )


@body
class TopicConfigSerializeWrapper(JsonBody):
    """Also Java's TopicConfigAndMappingSerializeWrapper: the mapping members ride along."""

    topic_config_table: dict[str, TopicConfig] = dataclasses.field(default_factory=dict)
    data_version: DataVersion = dataclasses.field(default_factory=DataVersion)
    topic_queue_mapping_info_map: dict[str, Any] | None = None
    topic_queue_mapping_detail_map: dict[str, Any] | None = None
    mapping_data_version: DataVersion | None = None


def _inflate(data: bytes | bytearray | memoryview) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, _MAX_INFLATED)
    except zlib.error as e:
        raise ProtocolError(f"bad compressed register body: {e}") from None
    if inflater.unconsumed_tail:
        raise ProtocolError("compressed register body inflates beyond the limit")
    return out


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def chunk(self) -> bytes:
        if self.pos + 4 > len(self.buf):
            raise ProtocolError("compressed register body truncated")
        (n,) = _INT.unpack_from(self.buf, self.pos)
        start = self.pos + 4
        if n < 0 or start + n > len(self.buf):
            raise ProtocolError("compressed register body truncated")
        self.pos = start + n
        return self.buf[start : self.pos]

    def count(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise ProtocolError("compressed register body truncated")
        n: int = _INT.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        if n < 0:
            raise ProtocolError(f"negative count {n} in compressed register body")
        return n

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.buf)


@body
class RegisterBrokerBody(JsonBody):
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = dataclasses.field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: tuple[str, ...] = ()

    def encode(self, compress: bool = False) -> bytes:
        """The request body: JSON, or Java's zlib stream of length-prefixed parts."""
        if not compress:
            return self.to_json()
        wrapper = self.topic_config_serialize_wrapper
        out = bytearray()

        def put(chunk: bytes) -> None:
            out.extend(_INT.pack(len(chunk)))
            out.extend(chunk)

        put(wrapper.data_version.to_json())
        out.extend(_INT.pack(len(wrapper.topic_config_table)))
        for config in wrapper.topic_config_table.values():
            put(config.encode().encode())
        put(orjson.dumps(list(self.filter_server_list)))
        mappings = wrapper.topic_queue_mapping_info_map or {}
        out.extend(_INT.pack(len(mappings)))
        for info in mappings.values():
            put(orjson.dumps(info))
        return zlib.compress(bytes(out), 9)

    @classmethod
    def decode(
        cls, data: bytes | bytearray | memoryview, compressed: bool = False, broker_version: int = _V5_0_0
    ) -> RegisterBrokerBody:
        if not compressed:
            return cls.from_json(data)
        reader = _Reader(_inflate(data))
        data_version = DataVersion.from_json(reader.chunk())
        table: dict[str, TopicConfig] = {}
        for _ in range(reader.count()):
            try:
                text = reader.chunk().decode()
            except UnicodeDecodeError:
                raise ProtocolError("topic config in register body is not UTF-8") from None
            config = TopicConfig.decode(text)
            table[config.topic_name] = config
        servers = loads_lenient(reader.chunk())
        if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
            raise ProtocolError("filter server list in register body is not a list of strings")
        mappings: dict[str, Any] | None = None
        if broker_version >= _V5_0_0 and not reader.at_end:
            mappings = {}
            for _ in range(reader.count()):
                info = loads_lenient(reader.chunk())
                if not isinstance(info, dict):
                    raise ProtocolError("topic queue mapping in register body is not an object")
                mappings[str(info.get("topic"))] = info
        wrapper = TopicConfigSerializeWrapper(table, data_version, mappings)
        return cls(wrapper, tuple(servers))
