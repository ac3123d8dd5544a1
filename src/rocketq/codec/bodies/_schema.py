"""The JSON body mapper: frozen dataclasses <-> fastjson-shaped JSON.

``@body`` makes a class a frozen slotted dataclass and derives, once, a plan of (attribute, JSON
key, encoder, decoder) from its annotations. Writing follows fastjson's defaults: compact,
members in alphabetical order, null members omitted, enums by name, map keys as strings.
Reading is tolerant the way real peers need it: C++ sends enum ordinals and numbers as strings,
older Java peers write fastjson's unquoted integer map keys, missing members take defaults.
Anything that still does not fit raises ``ProtocolError``.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Self, TypeVar

import orjson

from rocketq.codec import fastjson
from rocketq.errors import ProtocolError

__all__ = ["JavaEnum", "JsonBody", "Key", "body", "loads_lenient"]

_Enc = Callable[[Any], Any]
_Dec = Callable[[Any, str], Any]


@dataclass(frozen=True, slots=True)
class Key:
    """Annotated marker: the JSON member name when it is not the camelCase of the field name."""

    name: str


class JavaEnum(enum.Enum):
    """A Java enum: written by name, read by name or by ordinal (the value is the ordinal)."""

    @classmethod
    def parse(cls, value: object) -> Self:
        if isinstance(value, str):
            member = cls.__members__.get(value)
            if member is not None:
                return member
            if value.isdecimal():
                value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        raise ProtocolError(f"{value!r} is not a {cls.__name__}")


def loads_lenient(data: bytes | bytearray | memoryview | str) -> Any:
    """JSON, or fastjson's with bare integer map keys (``{0:"addr"}``, read as ``{"0": "addr"}``);
    ``ProtocolError`` on anything else."""
    return fastjson.loads(data, number_keys_as_text=True)


# -- scalar codecs ------------------------------------------------------------------------------------


def _dec_str(v: Any, where: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    raise ProtocolError(f"{where}: expected a string, got {type(v).__name__}")


def _dec_int(v: Any, where: str) -> int:
    if type(v) is int:
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            pass
    raise ProtocolError(f"{where}: expected an integer, got {v!r}")


def _dec_float(v: Any, where: str) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    raise ProtocolError(f"{where}: expected a number, got {v!r}")


def _dec_bool(v: Any, where: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if type(v) is int and v in (0, 1):
        return v == 1
    raise ProtocolError(f"{where}: expected a boolean, got {v!r}")


def _dec_any(v: Any, where: str) -> Any:
    return v


def _identity(v: Any) -> Any:
    return v


# -- composite codecs ---------------------------------------------------------------------------------


def _codec(tp: Any) -> tuple[_Enc | None, _Dec]:
    """(encoder or None for identity, decoder) of an annotation."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _codec(tp.__origin__)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported body field type {tp!r}")
        enc, dec = _codec(args[0])

        def dec_optional(v: Any, where: str) -> Any:
            return None if v is None else dec(v, where)

        if enc is None:
            return None, dec_optional
        inner = enc
        return (lambda v: None if v is None else inner(v)), dec_optional
    if tp is Any:
        return None, _dec_any
    if tp is str:
        return None, _dec_str
    if tp is bool:
        return None, _dec_bool
    if tp is int:
        return None, _dec_int
    if tp is float:
        return None, _dec_float
    if isinstance(tp, type) and issubclass(tp, JavaEnum):
        enum_cls = tp

        def dec_enum(v: Any, where: str) -> Any:
            try:
                return enum_cls.parse(v)
            except ProtocolError as e:
                raise ProtocolError(f"{where}: {e}") from None

        return (lambda v: v.name), dec_enum
    if isinstance(tp, type) and issubclass(tp, JsonBody):
        body_cls = tp
        return (lambda v: v.to_obj()), (lambda v, where: body_cls.from_obj(v, where))
    if origin is tuple:
        targs = typing.get_args(tp)
        if len(targs) != 2 or targs[1] is not Ellipsis:
            raise TypeError(f"only tuple[T, ...] is supported, not {tp!r}")
        item_enc, item_dec = _codec(targs[0])

        def dec_tuple(v: Any, where: str) -> tuple[Any, ...]:
            if v is None:
                return ()
            if not isinstance(v, list):
                raise ProtocolError(f"{where}: expected an array")
            return tuple(item_dec(x, f"{where}[{i}]") for i, x in enumerate(v))

        if item_enc is None:
            return list, dec_tuple
        ienc = item_enc
        return (lambda v: [ienc(x) for x in v]), dec_tuple
    if origin is dict:
        ktype, vtype = typing.get_args(tp)
        key_dec: _Dec
        if ktype is str:
            key_dec = _dec_str
        elif ktype is int:
            key_dec = _dec_int
        elif isinstance(ktype, type) and issubclass(ktype, JsonBody):
            # fastjson's object keys are not JSON: such a class writes and reads itself.
            def key_dec(k: Any, where: str) -> Any:
                raise ProtocolError(f"{where}: object map keys cannot come from JSON")
        else:
            raise TypeError(f"map keys must be str, int or a body, not {ktype!r}")
        val_enc, val_dec = _codec(vtype)

        def dec_dict(v: Any, where: str) -> dict[Any, Any]:
            if v is None:
                return {}
            if not isinstance(v, dict):
                raise ProtocolError(f"{where}: expected an object")
            return {key_dec(k, where): val_dec(x, f"{where}.{k}") for k, x in v.items()}

        venc = val_enc or _identity
        if ktype is int:
            return (lambda v: {str(k): venc(x) for k, x in v.items()}), dec_dict
        return (lambda v: {k: venc(x) for k, x in v.items()}), dec_dict
    raise TypeError(f"unsupported body field type {tp!r}")


@dataclass(frozen=True, slots=True)
class _Member:
    attr: str
    key: str
    encode: _Enc | None
    decode: _Dec
    required: bool


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _json_key(tp: Any, attr: str) -> str:
    if typing.get_origin(tp) is Annotated:
        for meta in tp.__metadata__:
            if isinstance(meta, Key):
                return meta.name
    return _camel(attr)


class JsonBody:
    """Base of every JSON body: ``to_json``/``from_json`` over a plan built by ``@body``."""

    __slots__ = ()
    _members: typing.ClassVar[tuple[_Member, ...]] = ()

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in self._members:
            value = getattr(self, m.attr)
            if value is None:
                continue
            out[m.key] = value if m.encode is None else m.encode(value)
        return out

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_obj())

    @classmethod
    def from_obj(cls, obj: Any, where: str | None = None) -> Self:
        where = where or cls.__name__
        if not isinstance(obj, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(obj).__name__}")
        values: dict[str, Any] = {}
        for m in cls._members:
            raw = obj.get(m.key)
            if raw is None:
                if m.required:
                    raise ProtocolError(f"{where}: member <{m.key}> is missing")
                continue  # the dataclass default applies
            values[m.attr] = m.decode(raw, f"{where}.{m.key}")
        return cls(**values)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        return cls.from_obj(loads_lenient(data))


_B = TypeVar("_B", bound=JsonBody)


@typing.dataclass_transform(frozen_default=True)
def body(cls: type[_B] | None = None, *, order: bool = False) -> Any:
    """Make a class a frozen slotted dataclass and build its JSON plan (members sorted by key)."""

    def wrap(c: type[_B]) -> type[_B]:
        c = dataclass(frozen=True, slots=True, order=order)(c)
        hints = typing.get_type_hints(c, include_extras=True)
        members = []
        for f in dataclasses.fields(c):  # type: ignore[arg-type]  # a dataclass by now
            tp = hints[f.name]
            enc, dec = _codec(tp)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            members.append(_Member(f.name, _json_key(tp, f.name), enc, dec, required))
        c._members = tuple(sorted(members, key=lambda m: m.key))
        return c

    return wrap if cls is None else wrap(cls)
