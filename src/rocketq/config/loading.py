"""Loading: route each setting to the config classes that have its key, coerce it, and build one
frozen object per class.

One flat key space is spread over several config classes, as ``broker.conf`` is spread over
BrokerConfig, MessageStoreConfig and NettyServerConfig in RocketMQ: a key goes to every class that
has the field (RocketMQ's ``MixAll.properties2Object`` is applied to each object the same way).

Sources, later wins: field defaults < ``baseline`` (what the CLI derives, e.g. paths under
``--data-dir``) < a ``.properties`` or ``.toml`` file < environment (``NAMESRV_ADDR``,
``ROCKETMQ_HOME``, then ``ROCKETQ_<KEY>``) < ``--set KEY=VALUE`` < the CLI's dedicated flags. Unlike
RocketMQ, which silently ignores a value it cannot parse, an unknown key or a bad value raises
:class:`ConfigError` naming the key and where it came from.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeVar, cast

from rocketq.config.fields import ConfigField, config_fields
from rocketq.config.keys import camel_to_snake
from rocketq.config.sources import ENV_PREFIX, Setting, env_settings, read_config_file, set_settings
from rocketq.errors import ConfigError

__all__ = ["ConfigSet", "coerce", "load_configs", "lookup", "route"]

T = TypeVar("T")
log = logging.getLogger("rocketq.config")

_SECTION_ALIASES = {
    "MessageStoreConfig": ("store",),
    "RemotingServerConfig": ("remoting", "netty", "nettyserverconfig"),
    "RemotingClientConfig": ("nettyclientconfig",),
}


def _section_names(cls: type) -> set[str]:
    base = cls.__name__.removesuffix("Config")
    names = {cls.__name__.lower(), base.lower(), camel_to_snake(base)}
    return names | set(_SECTION_ALIASES.get(cls.__name__, ()))


def lookup(cls: type, key: str) -> ConfigField | None:
    """The field of ``cls`` that ``key`` names in any spelling, or None."""
    table = config_fields(cls)
    found = table.get(camel_to_snake(key))
    if found is None:  # a field with an irregular RocketMQ key named in its declaration
        found = next((f for f in table.values() if f.key == key), None)
    return found


def route(
    setting: Setting, primary: Sequence[type], secondary: Sequence[type] = ()
) -> list[tuple[type, ConfigField]]:
    """The (class, field) pairs a setting goes to; ConfigError for an unknown key or section."""
    key, section = setting.key, setting.section
    everyone = [*primary, *secondary]
    # A dotted key may be a field's own (RocketMQ's tls.server.mode) rather than section.key.
    if section is None and "." in key and not any(lookup(c, key) for c in everyone):
        section, _, key = key.partition(".")
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
        hits = [(c, f) for c in group if (f := lookup(c, key)) is not None]
        if hits:
            return hits
    known = sorted({f.key for c in everyone for f in config_fields(c).values()})
    hint = difflib.get_close_matches(key, known, n=1)
    suggestion = f"; did you mean '{hint[0]}'?" if hint else ""
    raise ConfigError(f"unknown config key '{setting.key}' ({setting.origin}){suggestion}")


def coerce(f: ConfigField, setting: Setting) -> object:
    """The setting's value as the field's type; ConfigError naming the key and origin if it is not."""
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
    for s, ours in env_settings(os.environ if environ is None else environ):
        if not ours:
            sources.append((s, True))
        elif any(lookup(c, s.key) for c in all_classes):
            sources.append((s, False))
        elif not any(lookup(c, s.key) for c in env_tolerated):
            _unknown_env(s, [*all_classes, *env_tolerated])
    sources += [(s, False) for s in set_settings(overrides)]
    sources += [(s, False) for s in settings]

    values: dict[type, dict[str, object]] = {c: {} for c in all_classes}
    for cls, base in (baseline or {}).items():
        if cls in values:
            for name, value in base.items():
                f = config_fields(cls).get(name)
                values[cls][name] = coerce(f, Setting(f.key, value, "baseline")) if f else value
    origins: dict[tuple[type, str], str] = {}
    for s, lenient in sources:
        if lenient:
            targets = [(c, f) for c in all_classes if (f := lookup(c, s.key)) is not None]
        else:
            targets = route(s, classes, secondary)
        for cls, f in targets:
            values[cls][f.name] = coerce(f, s)
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
    names = sorted({n for c in classes for n in config_fields(c)})
    hint = difflib.get_close_matches(camel_to_snake(setting.key), names, n=1, cutoff=0.85)
    if hint:
        suggestion = f"{ENV_PREFIX}{hint[0].upper()}"
        raise ConfigError(f"unknown config key '{setting.key}' ({setting.origin}); did you mean {suggestion}")
    log.warning("ignoring %s: not a rocketq config key", setting.origin.removeprefix("env "))


def _with_origin(exc: ConfigError, cls: type, origins: Mapping[tuple[type, str], str]) -> ConfigError:
    message = str(exc)
    for f in config_fields(cls).values():
        where = origins.get((cls, f.name))
        if where and re.search(rf"\b{re.escape(f.key)}\b", message):
            return ConfigError(f"{message} ({where})")
    return exc

