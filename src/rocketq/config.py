"""Typed configuration with RocketMQ's key names, defaults and sources (DESIGN principle 7).

Every knob is a field of a frozen dataclass whose name is the snake_case of RocketMQ's camelCase key
(``flushDiskType`` <-> ``flush_disk_type``, ``brokerIP1`` <-> ``broker_ip1``). One flat key space is
spread over several config classes, as ``broker.conf`` is spread over BrokerConfig, MessageStoreConfig
and NettyServerConfig in RocketMQ: :func:`load_configs` routes each key to every class that has the
field (RocketMQ's ``MixAll.properties2Object`` is applied to each object the same way).

Sources, later wins: field defaults < ``baseline`` (what the CLI derives, e.g. paths under
``--data-dir``) < a ``.properties`` or ``.toml`` file < environment (``NAMESRV_ADDR``,
``ROCKETMQ_HOME``, then ``ROCKETQ_<KEY>``) < ``--set KEY=VALUE``. Unlike RocketMQ, which silently
ignores a value it cannot parse, an unknown key or a bad value raises :class:`ConfigError` naming
the key and where it came from.

This module only knows dataclasses: ``MessageStoreConfig`` (store) and ``RemotingServerConfig``
(remoting) are defined in their layers and passed in by the caller, so importing config never pulls
in a layer above the caller.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import logging
import os
import re
import socket
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Literal, TypeVar, cast

from rocketq.errors import ConfigError

__all__ = [
    "BrokerConfig",
    "ConfigSet",
    "NamesrvConfig",
    "Setting",
    "camel_to_snake",
    "check_updatable",
    "dump_properties",
    "load_configs",
    "parse_properties",
    "read_config_file",
    "rocketmq_key",
    "snake_to_camel",
    "update_configs",
]

T = TypeVar("T")
log = logging.getLogger("rocketq.config")

ENV_PREFIX = "ROCKETQ_"
# ROCKETQ_* variables that other parts of rocketq (and its test harness) read: never config keys.
NOT_CONFIG_ENV = frozenset({"ROCKETQ_NO_UVLOOP", "ROCKETQ_COMMAND", "ROCKETQ_REQUIRE_SERVER"})

# ---------------------------------------------------------------------------------------------
# Key spelling. camel -> snake: "_" before an upper-case letter that follows a lower-case letter
# or digit, and before the last capital of an upper-case run that starts a word ("checkCRCOnRecover"
# -> check_crc_on_recover); then lower-case. snake -> camel: every segment after the first is
# capitalised, except the acronyms RocketMQ spells in capitals (brokerIP1, checkCRCOnRecover,
# useTLS, vipChannelEnabled's VIP). A field whose key follows neither rule names it in metadata
# {"key": "..."}; tests check that every field of every config class round-trips.

_ACRONYMS = {"ip": "IP", "crc": "CRC", "tls": "TLS", "vip": "VIP"}
_UPPER_RUN = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_START = re.compile(r"([a-z0-9])([A-Z])")
_SEGMENT = re.compile(r"([a-z]+)(\d*)")


def camel_to_snake(key: str) -> str:
    """``mappedFileSizeCommitLog`` -> ``mapped_file_size_commit_log``; snake or UPPER_SNAKE pass through."""
    return _WORD_START.sub(r"\1_\2", _UPPER_RUN.sub(r"\1_\2", key)).lower()


def snake_to_camel(name: str) -> str:
    """``broker_ip1`` -> ``brokerIP1``, ``flush_disk_type`` -> ``flushDiskType``."""
    first, *rest = name.split("_")
    out = [first]
    for seg in rest:
        m = _SEGMENT.fullmatch(seg)
        if m and m.group(1) in _ACRONYMS:
            out.append(_ACRONYMS[m.group(1)] + m.group(2))
        else:
            out.append(seg[:1].upper() + seg[1:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Field tables: built once per class from its type annotations.


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    key: str  # RocketMQ's spelling
    kind: str  # human description of the accepted values, for errors and docs
    coerce: Callable[[object], object]  # raises ValueError with the reason


_TABLES: dict[type, dict[str, _Field]] = {}


def _fields(cls: type) -> dict[str, _Field]:
    """snake name -> _Field for every init field of a config dataclass."""
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
            table[f.name] = _Field(f.name, key, kind, coerce)
        _TABLES[cls] = table
    return table


def rocketmq_key(cls: type, name: str) -> str:
    """RocketMQ's key for field ``name`` of config class ``cls``."""
    return _fields(cls)[name].key


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
        return "path", lambda v: tp(_to_str(v))

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


# ---------------------------------------------------------------------------------------------
# Sources.


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``key = value`` from a source. ``section`` restricts it to one config class: a TOML table,
    a ``section.key`` spelling, or a class given directly by the CLI for its dedicated flags."""

    key: str
    value: object
    origin: str  # "broker.conf:12", "env ROCKETQ_FLUSH_DISK_TYPE", "--set", ...
    section: str | type | None = None


_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_LEADING_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, origin: str = "<properties>") -> list[Setting]:
    """Parse ``java.util.Properties`` text: ``#``/``!`` comments, ``=``/``:``/blank separators,
    backslash line continuations, ``\\t \\n \\r \\f \\uXXXX`` escapes. Unlike Java, unescaped trailing
    blanks of a value are dropped (a stray space after ``listenPort=10911`` is never meant)."""
    lines = _NATURAL_LINE.split(text.removeprefix("\ufeff"))
    out: list[Setting] = []
    i = 0
    while i < len(lines):
        lineno = i + 1
        logical = lines[i].lstrip(_LEADING_WS)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1]
            if i >= len(lines):
                break
            logical += lines[i].lstrip(_LEADING_WS)
            i += 1
        where = f"{origin}:{lineno}"
        key, value = _split_entry(logical)
        out.append(Setting(_unescape(key, where), _unescape(value, where, rstrip=True), where))
    return out


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, j = line[: min(i, n)], min(i, n)
    while j < n and line[j] in _LEADING_WS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _LEADING_WS:
            j += 1
    return key, line[j:]


def _unescape(s: str, where: str, *, rstrip: bool = False) -> str:
    if "\\" not in s:
        return s.rstrip(_LEADING_WS) if rstrip else s
    out: list[str] = []
    keep = 0  # length of out up to the last char that rstrip must not remove
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            c = s[i + 1]
            i += 2
            if c == "u":
                code = s[i : i + 4]
                if len(code) != 4 or not all(h in "0123456789abcdefABCDEF" for h in code):
                    raise ConfigError(f"malformed \\uxxxx escape ({where})")
                c = chr(int(code, 16))
                i += 4
            else:
                c = _ESCAPES.get(c, c)
            out.append(c)
            keep = len(out)
            continue
        i += 1
        if c != "\\":
            out.append(c)
            if c not in _LEADING_WS:
                keep = len(out)
    return "".join(out[:keep] if rstrip else out)


def _toml_line(text: str, section: str | None, key: str) -> int | None:
    """Best effort: tomllib keeps no positions, so find the line that assigns ``key``."""
    current: str | None = None
    assign = re.compile(rf"""\s*(["']?){re.escape(key)}\1\s*=""")
    for n, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1).strip("\"'")
        elif current == section and assign.match(line):
            return n
    return None


def _parse_toml(text: str, origin: str) -> list[Setting]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot parse {origin}: {exc}") from None
    out: list[Setting] = []

    def add(key: str, value: object, section: str | None) -> None:
        line = _toml_line(text, section, key)
        where = f"{origin}:{line}" if line else origin
        if isinstance(value, (dict, list)) or not isinstance(value, (str, int, float, bool)):
            raise ConfigError(f"bad value for '{key}' ({where}): expected a string, number or boolean")
        out.append(Setting(key, value, where, section))

    for key, value in data.items():
        if isinstance(value, dict):
            for sub_key, sub_value in value.items():
                add(sub_key, sub_value, key)
        else:
            add(key, value, None)
    return out


def read_config_file(path: str | os.PathLike[str]) -> list[Setting]:
    """Settings of a ``.toml`` file (by suffix) or of a RocketMQ ``.properties``/``.conf`` file.

    Properties files are read as UTF-8, falling back to ISO-8859-1 (what ``Properties.load`` reads)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    if p.suffix.lower() == ".toml":
        try:
            return _parse_toml(raw.decode("utf-8"), str(p))
        except UnicodeDecodeError:
            raise ConfigError(f"cannot parse {p}: not UTF-8") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return parse_properties(text, str(p))


def _env_settings(environ: Mapping[str, str]) -> list[tuple[Setting, bool]]:
    """(setting, is ROCKETQ_*) pairs; RocketMQ's own variables first so our spelling wins."""
    out = [
        (Setting(key, environ[var], f"env {var}"), False)
        for var, key in (("NAMESRV_ADDR", "namesrvAddr"), ("ROCKETMQ_HOME", "rocketmqHome"))
        if var in environ
    ]
    out.extend(
        (Setting(var[len(ENV_PREFIX) :], value, f"env {var}"), True)
        for var, value in sorted(environ.items())
        if var.startswith(ENV_PREFIX) and len(var) > len(ENV_PREFIX) and var not in NOT_CONFIG_ENV
    )
    return out


def _set_settings(assignments: Iterable[str]) -> list[Setting]:
    out = []
    for a in assignments:
        key, sep, value = a.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got '{a}'")
        out.append(Setting(key.strip(), value, f"--set {key.strip()}"))
    return out


# ---------------------------------------------------------------------------------------------
# Routing and loading.

_SECTION_ALIASES = {
    "MessageStoreConfig": ("store",),
    "RemotingServerConfig": ("remoting", "netty", "nettyserverconfig"),
    "RemotingClientConfig": ("nettyclientconfig",),
}


def _section_names(cls: type) -> set[str]:
    base = cls.__name__.removesuffix("Config")
    names = {cls.__name__.lower(), base.lower(), camel_to_snake(base)}
    return names | set(_SECTION_ALIASES.get(cls.__name__, ()))


def _lookup(cls: type, key: str) -> _Field | None:
    table = _fields(cls)
    found = table.get(camel_to_snake(key))
    if found is None:  # a field with an irregular RocketMQ key named in metadata
        found = next((f for f in table.values() if f.key == key), None)
    return found


def _route(
    setting: Setting, primary: Sequence[type], secondary: Sequence[type]
) -> list[tuple[type, _Field]]:
    key, section = setting.key, setting.section
    if section is None and "." in key:
        section, _, key = key.partition(".")
    everyone = [*primary, *secondary]
    if section is not None:
        if isinstance(section, type):
            scoped = [section] if section in everyone else []
        else:
            scoped = [c for c in everyone if section.lower() in _section_names(c)]
        if not scoped:
            raise ConfigError(f"unknown config section '{section}' ({setting.origin})")
        groups: list[Sequence[type]] = [scoped]
    else:
        groups = [primary, secondary]
    for group in groups:
        hits = [(c, f) for c in group if (f := _lookup(c, key)) is not None]
        if hits:
            return hits
    known = sorted({f.key for c in everyone for f in _fields(c).values()})
    hint = difflib.get_close_matches(key, known, n=1)
    suggestion = f"; did you mean '{hint[0]}'?" if hint else ""
    raise ConfigError(f"unknown config key '{setting.key}' ({setting.origin}){suggestion}")


def _coerce(f: _Field, setting: Setting) -> object:
    try:
        return f.coerce(setting.value)
    except ValueError as exc:
        raise ConfigError(f"bad value for '{f.key}' ({setting.origin}): {exc}") from None


class ConfigSet:
    """The loaded config objects, one per class, and where each explicitly set field came from."""

    __slots__ = ("_objects", "_origins")

    def __init__(self, objects: Mapping[type, object], origins: Mapping[tuple[type, str], str]) -> None:
        self._objects = dict(objects)
        self._origins = dict(origins)

    def __getitem__(self, cls: type[T]) -> T:
        return cast(T, self._objects[cls])

    def __iter__(self) -> Iterator[object]:
        return iter(self._objects.values())

    def __len__(self) -> int:
        return len(self._objects)

    def origin(self, cls: type, name: str) -> str | None:
        """Where field ``name`` of ``cls`` was set ("broker.conf:3", "--set ..."); None for defaults."""
        return self._origins.get((cls, name))


def load_configs(
    classes: Sequence[type],
    *,
    file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Iterable[str] = (),
    settings: Iterable[Setting] = (),
    baseline: Mapping[type, Mapping[str, object]] | None = None,
    secondary: Sequence[type] = (),
    env_tolerated: Sequence[type] = (),
) -> ConfigSet:
    """Build one instance of each class in ``classes`` and ``secondary`` from the sources.

    A flat key goes to every class of ``classes`` that has the field; only when none has it, to the
    ``secondary`` classes (``rocketq up`` makes NamesrvConfig secondary, so ``listenPort`` is the
    broker's). ``overrides`` are ``--set KEY=VALUE`` strings; ``settings`` come after them (the CLI's
    dedicated flags). ``environ`` defaults to ``os.environ``; a ``ROCKETQ_*`` variable that only a
    class of ``env_tolerated`` knows (a key of another role) is ignored; one that no class knows is
    an error when it is a near miss of a key, else a logged warning.
    """
    all_classes = [*classes, *secondary]
    # (setting, lenient): NAMESRV_ADDR / ROCKETMQ_HOME are RocketMQ's variables, not addressed to
    # us, so they only fill a field some class has and are never an unknown key.
    sources: list[tuple[Setting, bool]] = []
    if file is not None:
        sources += [(s, False) for s in read_config_file(file)]
    for s, ours in _env_settings(os.environ if environ is None else environ):
        if not ours:
            sources.append((s, True))
        elif any(_lookup(c, s.key) for c in all_classes):
            sources.append((s, False))
        elif not any(_lookup(c, s.key) for c in env_tolerated):
            _unknown_env(s, [*all_classes, *env_tolerated])
    sources += [(s, False) for s in _set_settings(overrides)]
    sources += [(s, False) for s in settings]

    values: dict[type, dict[str, object]] = {c: {} for c in all_classes}
    for cls, base in (baseline or {}).items():
        if cls in values:
            for name, value in base.items():
                f = _fields(cls).get(name)
                values[cls][name] = _coerce(f, Setting(f.key, value, "baseline")) if f else value
    origins: dict[tuple[type, str], str] = {}
    for s, lenient in sources:
        if lenient:
            targets = [(c, f) for c in all_classes if (f := _lookup(c, s.key)) is not None]
        else:
            targets = _route(s, classes, secondary)
        for cls, f in targets:
            values[cls][f.name] = _coerce(f, s)
            origins[(cls, f.name)] = s.origin
    objects: dict[type, object] = {}
    for cls in all_classes:
        try:
            objects[cls] = cls(**values[cls])
        except ConfigError as exc:
            raise _with_origin(exc, cls, origins) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"invalid {cls.__name__}: {exc}") from None
    return ConfigSet(objects, origins)


def _unknown_env(setting: Setting, classes: Sequence[type]) -> None:
    # The environment is shared with other tools (the test harness reads ROCKETQ_COMMAND), so a
    # variable that resembles no key is only warned about; a near miss of a real key is a typo.
    names = sorted({n for c in classes for n in _fields(c)})
    hint = difflib.get_close_matches(camel_to_snake(setting.key), names, n=1, cutoff=0.85)
    if hint:
        suggestion = f"{ENV_PREFIX}{hint[0].upper()}"
        raise ConfigError(f"unknown config key '{setting.key}' ({setting.origin}); did you mean {suggestion}")
    log.warning("ignoring %s: not a rocketq config key", setting.origin.removeprefix("env "))


def _with_origin(exc: ConfigError, cls: type, origins: Mapping[tuple[type, str], str]) -> ConfigError:
    message = str(exc)
    for f in _fields(cls).values():
        where = origins.get((cls, f.name))
        if where and re.search(rf"\b{re.escape(f.key)}\b", message):
            return ConfigError(f"{message} ({where})")
    return exc


def _invalid(key: str, reason: str) -> ConfigError:
    return ConfigError(f"bad value for '{key}': {reason}")


# ---------------------------------------------------------------------------------------------
# Dumping (GET_BROKER_CONFIG / GET_NAMESRV_CONFIG bodies) and runtime updates.


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)


def _escape(s: str, *, is_key: bool) -> str:
    out = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if is_key:
        return re.sub(r"([=: #!\f])", r"\\\1", out)
    # blanks that the parser would strip: leading ones (Java) and trailing ones (rocketq)
    return re.sub(r"^[ \f]|[ \f](?=[ \f]*$)", lambda m: "\\" + m.group(0), out)


def dump_properties(configs: Iterable[object]) -> str:
    """``key=value`` lines with RocketMQ's keys (None values are left out, as RocketMQ does); a key
    shared by several objects is written once, from the first. Parses back with parse_properties."""
    seen: set[str] = set()
    lines = []
    for cfg in configs:
        for f in _fields(type(cfg)).values():
            value = getattr(cfg, f.name)
            if f.key in seen or value is None:
                continue
            seen.add(f.key)
            lines.append(f"{_escape(f.key, is_key=True)}={_escape(_format(value), is_key=False)}")
    return "".join(line + "\n" for line in lines)


# Keys that name a file, a directory or a command can never change over the wire: CVE-2023-33246
# (rocketmqHome / filterServerNums reached a shell command through UPDATE_BROKER_CONFIG) and
# CVE-2023-37582 (configStorePath / kvConfigPath gave file writes through UPDATE_NAMESRV_CONFIG).
# Matching is on the key with case and separators removed, so no spelling slips through.
_FORBIDDEN_KEYS = frozenset(
    k.lower()
    for k in (
        "rocketmqHome", "configStorePath", "kvConfigPath", "storePathRootDir", "storePathCommitLog",
        "filterServerNums", "brokerConfigPath", "configBlackList", "messageStorePlugIn",
        "rmqAddressServerDomain", "rmqAddressServerSubGroup",
    )
)
_FORBIDDEN_INFIXES = ("path", "command", "shell", "script")
_FORBIDDEN_SUFFIXES = ("dir", "dirs", "home", "file", "files", "plugin", "plugins")


def _compact(key: str) -> str:
    return re.sub(r"[^0-9a-z]", "", key.lower())


def check_updatable(key: str, classes: Sequence[type] = ()) -> None:
    """Raise ConfigError unless ``key`` may be changed at runtime (UPDATE_BROKER_CONFIG,
    UPDATE_NAMESRV_CONFIG): never a key that names a path or command, and only a field of one of
    ``classes`` (default: NamesrvConfig and BrokerConfig; the broker passes its full set)."""
    compact = _compact(key.rpartition(".")[2])
    if (
        compact in _FORBIDDEN_KEYS
        or compact.endswith(_FORBIDDEN_SUFFIXES)
        or any(part in compact for part in _FORBIDDEN_INFIXES)
    ):
        raise ConfigError(f"config key '{key}' names a path or command and cannot be updated at runtime")
    _route(Setting(key, None, "update request"), classes or (NamesrvConfig, BrokerConfig), ())


def update_configs(
    configs: Sequence[T], updates: Mapping[str, str], *, origin: str = "update request"
) -> list[T]:
    """New config objects with ``updates`` applied, all or nothing: every key passes
    :func:`check_updatable` and every value its type before anything changes."""
    classes = [type(c) for c in configs]
    changes: dict[type, dict[str, object]] = {c: {} for c in classes}
    for key, value in updates.items():
        check_updatable(key, classes)
        setting = Setting(key, value, origin)
        for cls, f in _route(setting, classes, ()):
            changes[cls][f.name] = _coerce(f, setting)
    try:
        return [dataclasses.replace(c, **changes[type(c)]) for c in configs]  # type: ignore[type-var]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid update: {exc}") from None


# ---------------------------------------------------------------------------------------------
# The name server's and the broker's own configs (the store's and the transport's live in
# rocketq.store.config and rocketq.remoting.config).

def _check_port(key: str, port: int) -> None:
    if not 0 <= port <= 65535:
        raise _invalid(key, f"{port} is not a TCP port (0 picks a free one)")


def _check_metrics_port(port: int) -> None:
    if not -1 <= port <= 65535:
        raise _invalid("metricsPort", f"{port} is not a TCP port (-1 turns metrics off, 0 picks a free one)")


def _default_broker_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


def _home_file(*parts: str) -> Callable[[], str]:
    return lambda: str(Path.home().joinpath(*parts))


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """RocketMQ ``NamesrvConfig``, plus the listen port (RocketMQ keeps it in NettyServerConfig)."""

    listen_port: int = 9876
    rocketmq_home: str = ""
    kv_config_path: str = field(default_factory=_home_file("namesrv", "kvConfig.json"))
    config_store_path: str = field(default_factory=_home_file("namesrv", "namesrv.properties"))
    # 4.x's 10 s: DESIGN's timing (expire after 120 s silent, scan every 10 s); 5.x scans every 5 s.
    scan_not_active_broker_interval: int = 10_000
    # rocketq's name for RocketMQ's hard-coded BROKER_CHANNEL_EXPIRED_TIME.
    broker_channel_expired_time: int = 120_000
    order_message_enable: bool = False
    enable_all_topic_list: bool = True
    enable_topic_list: bool = True
    need_wait_for_service: bool = False
    wait_seconds_for_service: int = 45
    # rocketq's Prometheus endpoint (GET /metrics): -1 = off, 0 = a free port.
    metrics_port: int = -1

    def __post_init__(self) -> None:
        _check_port("listenPort", self.listen_port)
        _check_metrics_port(self.metrics_port)
        if self.scan_not_active_broker_interval <= 0:
            raise _invalid("scanNotActiveBrokerInterval", "must be > 0 ms")
        if self.broker_channel_expired_time <= 0:
            raise _invalid("brokerChannelExpiredTime", "must be > 0 ms")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """RocketMQ ``BrokerConfig`` (the fields rocketq honours). The listen port is in
    RemotingServerConfig, the store's knobs in MessageStoreConfig, as in RocketMQ."""

    broker_name: str = field(default_factory=_default_broker_name)
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0  # 0 = master
    # RocketMQ guesses the first non-loopback address; rocketq serves on 127.0.0.1 unless told
    # otherwise, and a guessed LAN address would be advertised to clients that cannot reach it.
    broker_ip1: str = "127.0.0.1"
    namesrv_addr: str | None = None  # "host:port;host:port"
    broker_permission: int = 6  # PermName READ | WRITE
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    trace_topic_enable: bool = False
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 24_000
    compressed_register: bool = False
    force_register: bool = True
    flush_consumer_offset_interval: int = 5_000
    reject_transaction_message: bool = False
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1_000
    notify_consumer_ids_changed_enable: bool = True
    channel_expired_timeout: int = 120_000
    trace_on: bool = True
    region_id: str = "DefaultRegion"
    enable_property_filter: bool = False
    store_reply_message_enable: bool = True
    transaction_time_out: int = 6_000
    transaction_check_max: int = 15
    transaction_check_interval: int = 30_000
    revive_queue_num: int = 8
    default_query_max_num: int = 32
    # RocketMQ keeps brokerRole in MessageStoreConfig; it is here so that a stock broker.conf loads.
    # rocketq has no replication yet: SLAVE is refused and SYNC_MASTER acks like ASYNC_MASTER.
    broker_role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] = "ASYNC_MASTER"
    # rocketq's Prometheus endpoint (GET /metrics) on the broker's bind address: -1 = off, 0 = a free port.
    metrics_port: int = -1

    def __post_init__(self) -> None:
        _check_metrics_port(self.metrics_port)
        if not self.broker_name:
            raise _invalid("brokerName", "must not be empty")
        if self.broker_id < 0:
            raise _invalid("brokerId", "must be >= 0 (0 is the master)")
        if not 0 <= self.broker_permission <= 7:
            raise _invalid("brokerPermission", "must be a PermName bit set between 0 and 7")
        if self.default_topic_queue_nums <= 0:
            raise _invalid("defaultTopicQueueNums", "must be > 0")
        if self.broker_role == "SLAVE":
            raise _invalid("brokerRole", "SLAVE is not supported yet (rocketq has no replication)")

    @property
    def namesrv_addr_list(self) -> tuple[str, ...]:
        """The name servers to register with, split on ';' as RocketMQ does."""
        return tuple(a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip())

    @property
    def register_period_ms(self) -> int:
        """The registration period the broker uses: RocketMQ clamps the configured one to 10-60 s."""
        return max(10_000, min(self.register_name_server_period, 60_000))
