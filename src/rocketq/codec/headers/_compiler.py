"""The header compiler: frozen dataclasses in, fast ``from_ext``/``to_ext`` out.

``@header`` turns a class into a frozen slotted dataclass and compiles, once at import, a
``from_ext`` and a ``to_ext`` for it (plain Python source run through ``exec``, the way
``dataclasses`` builds ``__init__``), so decoding a send header costs dict lookups and ``int()``
calls, with no per-call reflection.

Java's rules (PROTOCOL.md §1.5): the key is the Java field name; ints and longs parse as
Integer/Long.parseInt would; a boolean is true only for a case-insensitive ``"true"``; unknown
keys are ignored; a missing field that Java marks ``@CFNotNull`` (here: a field without a
default) raises ``HeaderError``. The compiled decoder is optimistic (``int()`` and plain
comparisons); whatever it does not like is re-decoded by the strict reference path, which also
writes the error texts. One leniency remains on the fast path: ``int()`` accepts surrounding
whitespace and ``_`` separators where Java would not.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Self, TypeVar

from rocketq.codec.command import clip_repr
from rocketq.errors import HeaderError

__all__ = ["BoundaryType", "CommandHeader", "Key", "Long", "header"]


@dataclass(frozen=True, slots=True)
class Key:
    """Annotated marker: the extFields key when it is not the camelCase of the field name."""

    name: str


class _LongMarker:
    __slots__ = ()

    def __repr__(self) -> str:
        return "LONG"


_LONG: Final = _LongMarker()
# A Java long: same Python type as int, wider range check.
Long = Annotated[int, _LONG]


class BoundaryType(enum.Enum):
    """SEARCH_OFFSET_BY_TIMESTAMP: Java maps "upper" (any case) to UPPER and anything else to LOWER."""

    LOWER = "lower"
    UPPER = "upper"

    @classmethod
    def parse(cls, value: str | None) -> BoundaryType:
        if value is not None and value.lower() == "upper":
            return cls.UPPER
        return cls.LOWER


# -- strict parsing (the reference path; the compiled fast path must agree with it) ---------------

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1
# Digits beyond any long (leading zeros included: Java's parser takes them, nobody sends 30).
_DIGITS_MAX: Final = 30


def _parse_number(value: object, key: str, lo: int, hi: int) -> int:
    """Integer.parseInt / Long.parseLong: optional sign, decimal digits, in range."""
    if isinstance(value, str):
        digits = value[1:] if value[:1] in ("-", "+") else value
        if not digits or not digits.isdecimal():
            raise HeaderError(f"the custom field <{key}> is not a number: {clip_repr(value)}")
        if len(digits) > _DIGITS_MAX:
            # Out of any Java range; and int() refuses past 4,300 digits with a ValueError.
            raise HeaderError(f"the custom field <{key}> is not a number: {clip_repr(value)} (out of range)")
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise HeaderError(f"the custom field <{key}> is not a number: {clip_repr(value)}")
    if not lo <= number <= hi:
        raise HeaderError(f"the custom field <{key}> is not a number: {clip_repr(value)} (out of range)")
    return number


def _parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.lower() == "true"


def _parse_strict(spec: _FieldSpec, key: str, value: object) -> Any:
    if spec.kind == "int":
        return _parse_number(value, key, _INT_MIN, _INT_MAX)
    if spec.kind == "long":
        return _parse_number(value, key, _LONG_MIN, _LONG_MAX)
    if spec.kind == "bool":
        return _parse_bool(value)
    if spec.kind == "boundary":
        return BoundaryType.parse(value if isinstance(value, str) else None)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise HeaderError(f"the custom field <{key}> is not a string: {clip_repr(value)}")


def _decode_strict(cls: type, specs: list[_FieldSpec], keys: Mapping[str, str], ext: Any) -> Any:
    """Field by field with Java's rules and error texts (errors and odd inputs land here)."""
    if ext is None:
        ext = {}
    elif not isinstance(ext, Mapping):
        raise HeaderError(f"extFields of {cls.__name__} is not a map")
    values = {}
    for spec in specs:
        key = keys[spec.name]
        value = ext.get(key)
        if value is None:
            if spec.required:
                raise HeaderError(f"the custom field <{key}> is null")
            values[spec.name] = spec.default
        else:
            values[spec.name] = _parse_strict(spec, key, value)
    return cls(**values)


# -- the base and the compiler -------------------------------------------------------------------


class CommandHeader:
    """Base of every typed header; ``from_ext``/``to_ext`` are generated per class by ``@header``."""

    __slots__ = ()

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None) -> Self:
        raise NotImplementedError(f"{cls.__name__} was not compiled with @header")

    def to_ext(self) -> dict[str, str]:
        raise NotImplementedError(f"{type(self).__name__} was not compiled with @header")


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    key: str
    kind: str  # "str" | "int" | "long" | "bool" | "boundary"
    optional: bool  # None allowed (a Java wrapper type that may be absent)
    required: bool  # @CFNotNull: missing -> HeaderError
    default: Any


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _analyze(tp: Any) -> tuple[Any, bool, str | None, bool]:
    """(base type, optional, key override, is long) of an annotation."""
    optional = False
    key: str | None = None
    is_long = False
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            for meta in tp.__metadata__:
                if isinstance(meta, Key):
                    key = meta.name
                elif meta is _LONG:
                    is_long = True
            tp = tp.__origin__
        elif origin is typing.Union or origin is types.UnionType:
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                raise TypeError(f"unsupported header field type {tp!r}")
            optional = True
            tp = args[0]
        else:
            return tp, optional, key, is_long


def _specs(cls: type) -> list[_FieldSpec]:
    hints = typing.get_type_hints(cls, include_extras=True)
    specs = []
    for f in dataclasses.fields(cls):
        base, optional, key, is_long = _analyze(hints[f.name])
        if base is str:
            kind = "str"
        elif base is bool:
            kind = "bool"
        elif base is int:
            kind = "long" if is_long else "int"
        elif base is BoundaryType:
            kind = "boundary"
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported header field type {base!r}")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default = None if required else f.default
        specs.append(_FieldSpec(f.name, key or _camel(f.name), kind, optional, required, default))
    return specs


def _mutable_twin(cls: type) -> type:
    """A mutable class with the frozen class's exact slot layout.

    A frozen dataclass sets every field through ``object.__setattr__`` (about 100 ns each: 1.6 us
    for a send header). The decoder instead fills a twin with plain slot stores and then retags
    it with ``__class__ = cls``, which CPython allows between identical layouts; the result is
    an ordinary, frozen instance of ``cls``.
    """
    twin = type(f"_{cls.__name__}Builder", (CommandHeader,), {"__slots__": cls.__dict__["__slots__"]})
    probe: Any = object.__new__(twin)
    probe.__class__ = cls  # fails at import, not per call, if the layouts ever differ
    return twin


def _fast_lines(spec: _FieldSpec, key: str, var: str, defaults: dict[str, Any]) -> list[str]:
    # Optimistic: int() and plain comparisons only. Anything unusual raises ValueError,
    # TypeError or AttributeError and the strict path re-decodes to produce Java's verdict.
    lines = [f"      {var} = g({key!r})"]
    if spec.kind == "str":
        parse = None
    elif spec.kind in ("int", "long"):
        parse = f"int({var})"
    elif spec.kind == "bool":
        parse = f"({var} == 'true' or (len({var}) == 4 and {var}.lower() == 'true'))"
    else:
        parse = f"_bt({var})"
    if spec.required:
        lines.append(f"      if {var} is None: raise _RetryError")
        if parse is not None:
            lines.append(f"      {var} = {parse}")
    else:
        absent = f"D_{var}"
        defaults[absent] = spec.default
        if parse is None:
            lines.append(f"      if {var} is None: {var} = {absent}")
        else:
            lines.append(f"      {var} = {absent} if {var} is None else {parse}")
    if spec.kind in ("int", "long"):
        lo, hi = (_INT_MIN, _INT_MAX) if spec.kind == "int" else (_LONG_MIN, _LONG_MAX)
        check = f"not {lo} <= {var} <= {hi}"
        if not spec.required:
            check = f"{var} is not None and ({check})"
        lines.append(f"      if {check}: raise _RetryError")
    return lines


def _encode_expr(spec: _FieldSpec, value: str) -> str:
    if spec.kind == "str":
        return value
    if spec.kind == "bool":
        return f"('true' if {value} else 'false')"
    if spec.kind == "boundary":
        return f"{value}.name"
    return f"str({value})"


class _RetryError(Exception):
    """Raised inside the fast decoder to hand over to the strict one."""


_H = TypeVar("_H", bound="CommandHeader")


def _compile(cls: type, specs: list[_FieldSpec], keys: Mapping[str, str], suffix: str) -> None:
    defaults: dict[str, Any] = {}
    dec = ["def make(cls, _Twin, _strict):", f"  def from_ext{suffix}(ext):", "    try:"]
    dec.append("      g = (ext or _EMPTY).get")
    for i, spec in enumerate(specs):
        dec.extend(_fast_lines(spec, keys[spec.name], f"v{i}", defaults))
    dec.append("      obj = _new(_Twin)")
    dec.extend(f"      obj.{s.name} = v{i}" for i, s in enumerate(specs))
    dec.append("      obj.__class__ = cls")
    dec.append("      return obj")
    dec.append("    except (_RetryError, ValueError, TypeError, AttributeError):")
    dec.append("      pass")
    dec.append("    return _strict(ext)")
    dec.append(f"  return from_ext{suffix}")

    enc = [f"def to_ext{suffix}(self):"]
    always = [s for s in specs if s.required or (not s.optional and s.default is not None)]
    maybe = [s for s in specs if s not in always]
    items = ", ".join(f"{keys[s.name]!r}: {_encode_expr(s, 'self.' + s.name)}" for s in always)
    enc.append(f"    d = {{{items}}}")
    for s in maybe:
        enc.append(f"    v = self.{s.name}")
        enc.append(f"    if v is not None: d[{keys[s.name]!r}] = {_encode_expr(s, 'v')}")
    enc.append("    return d")

    namespace: dict[str, Any] = {
        "_EMPTY": {},
        "_RetryError": _RetryError,
        "_bt": BoundaryType.parse,
        "_new": object.__new__,
        **defaults,
    }
    source = "\n".join(dec) + "\n\n" + "\n".join(enc) + "\n"
    exec(compile(source, f"<rocketq header {cls.__name__}{suffix}>", "exec"), namespace)

    def strict(ext: Any) -> Any:
        return _decode_strict(cls, specs, keys, ext)

    # A static method over a closure: no bound-method object per call on the hot path.
    decode = namespace["make"](cls, _mutable_twin(cls), strict)
    setattr(cls, f"from_ext{suffix}", staticmethod(decode))
    setattr(cls, f"to_ext{suffix}", namespace[f"to_ext{suffix}"])


@typing.dataclass_transform(frozen_default=True)
def header(cls: type[_H]) -> type[_H]:
    """Make ``cls`` a frozen slotted dataclass and compile its ``from_ext``/``to_ext``."""
    cls = dataclass(frozen=True, slots=True)(cls)
    specs = _specs(cls)
    _compile(cls, specs, {s.name: s.key for s in specs}, "")
    aliases: Mapping[str, str] | None = cls.__dict__.get("V2_KEYS")
    if aliases is not None:
        _compile(cls, specs, {s.name: aliases.get(s.name, s.key) for s in specs}, "_v2")
    return cls
