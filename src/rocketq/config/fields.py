"""Declaring a config field once: its default, RocketMQ's key, its type, and whether it may change
at runtime.

A config class is a frozen dataclass of its layer. Each field is declared with one of

* :func:`runtime_updatable` — UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG apply it, and the
  component that uses it reads the new value (a test per key proves it);
* :func:`restart_required` — read once at start (a port, a file size, the flush service): an update
  over the wire is refused, the value changes in the config file and takes effect on restart;
* :func:`not_honoured` — accepted so that a stock RocketMQ ``broker.conf`` loads, but rocketq does not
  act on it yet; ``rocketq up -p`` says so, and an update over the wire is refused.

The loader reads the type annotations (``int``, ``float``, ``bool``, ``str``, ``Enum``,
``Literal[...]``, ``X | None``, ``Path``) to coerce values, and names each field with RocketMQ's key.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from pathlib import PurePath
from typing import Any, Literal

from rocketq.config.keys import snake_to_camel
from rocketq.errors import ConfigError

__all__ = [
    "ConfigField",
    "Update",
    "check_port",
    "config_fields",
    "invalid",
    "not_honoured",
    "restart_required",
    "rocketmq_key",
    "runtime_updatable",
]


class Update(enum.Enum):
    """When a new value of a field takes effect."""

    RUNTIME = "runtime-updatable"
    RESTART = "restart-required"


_META = "rocketq.config"


@dataclass(frozen=True, slots=True)
class _Policy:
    update: Update
    honoured: bool
    why: str


def _declare(policy: _Policy, default: Any, factory: Any, key: str | None) -> Any:
    metadata: dict[str, object] = {_META: policy}
    if key is not None:
        metadata["key"] = key
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def runtime_updatable(default: Any = MISSING, *, factory: Any = MISSING, key: str | None = None) -> Any:
    """A field whose new value, set over the wire, the running server uses from the next read on."""
    return _declare(_Policy(Update.RUNTIME, True, ""), default, factory, key)


def restart_required(
    default: Any = MISSING, *, factory: Any = MISSING, key: str | None = None, why: str = ""
) -> Any:
    """A field read once at start; ``why`` ends up in the remark that refuses a runtime update."""
    return _declare(_Policy(Update.RESTART, True, why), default, factory, key)


def not_honoured(
    default: Any = MISSING, *, factory: Any = MISSING, key: str | None = None, why: str = ""
) -> Any:
    """A RocketMQ key rocketq accepts (so stock config files load) but does not act on yet."""
    policy = _Policy(Update.RESTART, False, why or "rocketq does not honour it yet")
    return _declare(policy, default, factory, key)


# ---------------------------------------------------------------------------------------------
# Field tables: built once per class from its declarations and type annotations.


@dataclass(frozen=True, slots=True)
class ConfigField:
    """What the loader, the dumper and the update rules know about one field."""

    name: str
    key: str  # RocketMQ's spelling
    kind: str  # human description of the accepted values, for errors and docs
    coerce: Callable[[object], object]  # raises ValueError with the reason
    update: Update
    honoured: bool
    why: str  # why a restart is required, or what is not honoured
    declared: bool  # declared with one of the helpers above (a plain default counts as restart)


_TABLES: dict[type, dict[str, ConfigField]] = {}
_UNDECLARED = _Policy(Update.RESTART, True, "")


def config_fields(cls: type) -> Mapping[str, ConfigField]:
    """snake name -> ConfigField for every init field of a config dataclass."""
    table = _TABLES.get(cls)
    if table is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a config dataclass")
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError):  # annotations naming TYPE_CHECKING-only types
            hints = {}
        table = {}
        for f in dataclasses.fields(cls):
            if not f.init or f.name.startswith("_"):
                continue
            kind, coerce = _coercer(hints.get(f.name, f.type))
            key = f.metadata.get("key") or snake_to_camel(f.name)
            policy = f.metadata.get(_META)
            p = policy if isinstance(policy, _Policy) else _UNDECLARED
            declared = policy is not None
            table[f.name] = ConfigField(f.name, key, kind, coerce, p.update, p.honoured, p.why, declared)
        _TABLES[cls] = table
    return table


def rocketmq_key(cls: type, name: str) -> str:
    """RocketMQ's key for field ``name`` of config class ``cls``."""
    return config_fields(cls)[name].key


def invalid(key: str, reason: str) -> ConfigError:
    """The error a config class's ``__post_init__`` raises for a value out of range."""
    return ConfigError(f"bad value for '{key}': {reason}")


# ---------------------------------------------------------------------------------------------
# Coercion: a string from a properties file, a TOML value or a --set flag to the field's type.


def _coercer(tp: Any) -> tuple[str, Callable[[object], object]]:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return _literal(typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            kind, inner = _coercer(args[0])

            def optional(v: object) -> object:
                return None if v is None or v == "" else inner(v)

            return f"{kind} or empty", optional
    if tp is bool or tp == "bool":
        return "true/false", _to_bool
    if tp is int or tp == "int":
        return "integer", _to_int
    if tp is float or tp == "float":
        return "number", _to_float
    if tp is str or tp == "str":
        return "string", _to_str
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if isinstance(tp, type) and issubclass(tp, PurePath):
        path_type = tp
        return "path", lambda v: path_type(_to_str(v))

    def unsupported(v: object) -> object:
        raise ValueError(f"the loader cannot set a field of type {tp!r}")

    return str(tp), unsupported


def _to_bool(v: object) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "false"):
            return s == "true"
    raise ValueError(f"{v!r} is not true or false")


_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _to_int(v: object) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and _INT.fullmatch(v.strip()):
        return int(v.strip())
    raise ValueError(f"{v!r} is not an integer")


def _to_float(v: object) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str) and _FLOAT.fullmatch(v.strip()):
        return float(v.strip())
    raise ValueError(f"{v!r} is not a number")


def _to_str(v: object) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    raise ValueError(f"{v!r} is not a string")


def _literal(choices: tuple[Any, ...]) -> tuple[str, Callable[[object], object]]:
    def coerce(v: object) -> object:
        for choice in choices:
            try:
                if isinstance(choice, bool):
                    value: object = _to_bool(v)
                elif isinstance(choice, int):
                    value = _to_int(v)
                else:
                    value = _to_str(v).strip()
                    if isinstance(value, str) and isinstance(choice, str) and value.upper() == choice.upper():
                        value = choice
            except ValueError:
                continue
            if value == choice:
                return choice
        raise ValueError(f"{v!r} is not one of {', '.join(map(str, choices))}")

    return "one of " + ", ".join(map(str, choices)), coerce


def _enum(tp: type[enum.Enum]) -> tuple[str, Callable[[object], object]]:
    names = list(tp.__members__)

    def coerce(v: object) -> object:
        if isinstance(v, tp):
            return v
        s = _to_str(v).strip()
        if s in tp.__members__:
            return tp.__members__[s]
        for name, member in tp.__members__.items():
            if name.upper() == s.upper() or member.value == s:
                return member
        raise ValueError(f"{v!r} is not one of {', '.join(names)}")

    return "one of " + ", ".join(names), coerce


def check_port(key: str, port: int, *, off: bool = False) -> None:
    """A TCP port field: 0 picks a free port; with ``off``, -1 turns the listener off."""
    if not (-1 if off else 0) <= port <= 65535:
        meaning = "-1 turns it off, 0 picks a free one" if off else "0 picks a free one"
        raise invalid(key, f"{port} is not a TCP port ({meaning})")
