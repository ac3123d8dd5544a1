"""Runtime updates (UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG): which keys may change, and the one
path a change takes into a running server.

A key may change over the wire only when its field is declared ``runtime_updatable`` — the server
then hands the new objects to its one change listener, which gives every component that reads the
key the new value. Anything else is refused before anything changes: a key that names a path or a
command (the two known RocketMQ attacks), a restart-required key (the old value would stay in use
while the config said otherwise), a key rocketq does not honour, an unknown key, a bad value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from rocketq.config.fields import ConfigField, Update
from rocketq.config.keys import compact_key
from rocketq.config.loading import coerce, route
from rocketq.config.sources import Setting
from rocketq.errors import ConfigError, RestartRequired

__all__ = [
    "ConfigChange",
    "RuntimeConfig",
    "check_updatable",
    "names_path_or_command",
    "plan_update",
    "update_configs",
]

T = TypeVar("T")

# Keys that name a file, a directory or a command can never change over the wire: CVE-2023-33246
# (rocketmqHome / filterServerNums reached a shell command through UPDATE_BROKER_CONFIG) and
# CVE-2023-37582 (configStorePath / kvConfigPath gave file writes through UPDATE_NAMESRV_CONFIG).
# Matching is on the key with case and separators removed, so no spelling slips through; this holds
# even for a field someone declares runtime_updatable by mistake.
FORBIDDEN_KEYS = frozenset(
    k.lower()
    for k in (
        "rocketmqHome", "configStorePath", "kvConfigPath", "storePathRootDir", "storePathCommitLog",
        "filterServerNums", "brokerConfigPath", "configBlackList", "messageStorePlugIn",
        "rmqAddressServerDomain", "rmqAddressServerSubGroup",
    )
)
_FORBIDDEN_INFIXES = ("path", "command", "shell", "script")
_FORBIDDEN_SUFFIXES = ("dir", "dirs", "home", "file", "files", "plugin", "plugins")
# Words that contain an infix innocently: "subscription" holds "script".
_INNOCENT_WORDS = ("subscription",)


def names_path_or_command(key: str) -> bool:
    """Whether ``key``, however spelt, names a file, a directory or a command."""
    compact = compact_key(key)
    words = compact
    for word in _INNOCENT_WORDS:
        words = words.replace(word, "")
    return (
        compact in FORBIDDEN_KEYS
        or compact.endswith(_FORBIDDEN_SUFFIXES)
        or any(part in words for part in _FORBIDDEN_INFIXES)
    )


def check_updatable(key: str, classes: Sequence[type]) -> list[tuple[type, ConfigField]]:
    """The (class, field) pairs ``key`` updates in ``classes``; ConfigError unless every one of
    them may change at runtime (:class:`RestartRequired` for a known key that may not)."""
    if names_path_or_command(key):
        raise ConfigError(f"config key '{key}' names a path or command and cannot be updated at runtime")
    targets = route(Setting(key, None, "update request"), classes)
    for _, f in targets:
        if not f.honoured:
            reason = f"is not honoured by rocketq yet ({f.why}), so an update would change nothing"
            raise RestartRequired(f.key, reason)
        if f.update is not Update.RUNTIME:
            why = f": {f.why}" if f.why else ""
            raise RestartRequired(f.key, f"is restart-required{why}; set it in the config file and restart")
    return targets


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One accepted runtime update: every config object before and after, and the fields changed."""

    before: tuple[object, ...]
    after: tuple[object, ...]
    changed: frozenset[tuple[type, str]]  # (config class, field name)
    origin: str

    def new(self, cls: type[T]) -> T:
        """The updated object of config class ``cls``."""
        return next(c for c in self.after if type(c) is cls)

    def touches(self, cls: type, *names: str) -> bool:
        """Whether the update set any of ``names`` of ``cls`` (any field of it when none is named)."""
        return any(c is cls and (not names or n in names) for c, n in self.changed)


def plan_update(
    configs: Sequence[object], updates: Mapping[str, str], *, origin: str = "update request"
) -> ConfigChange:
    """The change ``updates`` would make, all or nothing: every key passes :func:`check_updatable`
    and every value its type and range before anything is built."""
    classes = [type(c) for c in configs]
    changes: dict[type, dict[str, object]] = {c: {} for c in classes}
    for key, value in updates.items():
        for cls, f in check_updatable(key, classes):
            changes[cls][f.name] = coerce(f, Setting(key, value, origin))
    try:
        after = tuple(dataclasses.replace(c, **changes[type(c)]) for c in configs)  # type: ignore[type-var]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid update: {exc}") from None
    changed = frozenset((cls, name) for cls, names in changes.items() for name in names)
    return ConfigChange(tuple(configs), after, changed, origin)


def update_configs(
    configs: Sequence[T], updates: Mapping[str, str], *, origin: str = "update request"
) -> list[T]:
    """New config objects with ``updates`` applied (see :func:`plan_update`)."""
    return cast(list[T], list(plan_update(configs, updates, origin=origin).after))


class RuntimeConfig:
    """A running server's config objects and the one listener every accepted change goes through.

    The listener receives the :class:`ConfigChange` before the new objects become current; it hands
    each component that reads a changed key its new value (a component that reads the server's
    attribute at each use needs nothing more). If it raises, the old objects stay current.
    """

    __slots__ = ("_configs", "_listener")

    def __init__(self, configs: Sequence[object], listener: Callable[[ConfigChange], None]) -> None:
        self._configs = tuple(configs)
        self._listener = listener

    @property
    def configs(self) -> tuple[object, ...]:
        return self._configs

    @property
    def classes(self) -> tuple[type, ...]:
        return tuple(type(c) for c in self._configs)

    def get(self, cls: type[T]) -> T:
        return next(c for c in self._configs if type(c) is cls)

    def replace(self, config: object) -> None:
        """Put `config` in place of the object of its class, with no listener: a value the server
        itself changed (a broker's role in controller mode), so later updates start from it."""
        self._configs = tuple(config if type(c) is type(config) else c for c in self._configs)

    def update(self, updates: Mapping[str, str], *, origin: str = "update request") -> ConfigChange:
        change = plan_update(self._configs, updates, origin=origin)
        self._listener(change)
        self._configs = change.after
        return change
