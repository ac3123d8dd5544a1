"""Where settings come from: RocketMQ properties text (both ways), TOML files, the environment and
``--set KEY=VALUE``. Each source yields :class:`Setting` values that remember their origin, so an
error can say "broker.conf:12" rather than only the key.
"""

from __future__ import annotations

import enum
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rocketq.config.fields import config_fields
from rocketq.errors import ConfigError

__all__ = [
    "ENV_PREFIX",
    "NOT_CONFIG_ENV",
    "NOT_HONOURED",
    "Setting",
    "dump_properties",
    "env_settings",
    "parse_properties",
    "read_config_file",
    "set_settings",
]

ENV_PREFIX = "ROCKETQ_"
# ROCKETQ_* variables that other parts of rocketq (and its test harness) read: never config keys.
NOT_HONOURED = "not honoured by rocketq yet"
NOT_CONFIG_ENV = frozenset({"ROCKETQ_NO_UVLOOP", "ROCKETQ_COMMAND", "ROCKETQ_REQUIRE_SERVER"})


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


def env_settings(environ: Mapping[str, str]) -> list[tuple[Setting, bool]]:
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


def set_settings(assignments: Iterable[str]) -> list[Setting]:
    out = []
    for a in assignments:
        key, sep, value = a.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got '{a}'")
        out.append(Setting(key.strip(), value, f"--set {key.strip()}"))
    return out


# ---------------------------------------------------------------------------------------------
# Writing properties (GET_BROKER_CONFIG / GET_NAMESRV_CONFIG bodies, namesrv.properties).


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


def dump_properties(configs: Iterable[object], *, annotate: bool = False) -> str:
    """``key=value`` lines with RocketMQ's keys (None values are left out, as RocketMQ does); a key
    shared by several objects is written once, from the first. Parses back with parse_properties.

    ``annotate`` (``rocketq up -p``) puts a comment above each key rocketq does not honour yet."""
    seen: set[str] = set()
    lines = []
    for cfg in configs:
        for f in config_fields(type(cfg)).values():
            value = getattr(cfg, f.name)
            if f.key in seen or value is None:
                continue
            seen.add(f.key)
            if annotate and not f.honoured:
                lines.append(f"# {f.key}: {NOT_HONOURED} ({f.why})")
            lines.append(f"{_escape(f.key, is_key=True)}={_escape(_format(value), is_key=False)}")
    return "".join(line + "\n" for line in lines)

