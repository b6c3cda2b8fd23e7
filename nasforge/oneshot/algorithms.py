"""The one-shot algorithms by name, and the one place a flat mapping of settings is split
between the search loop's and the algorithm's.

An algorithm registers itself, as timm's models do::

    @register_algorithm
    class MyAlgo(Algorithm):
        name = "myalgo"
        settings_class = MySettings  # a dataclass of its own settings, with a check()

after which ``search(space, "myalgo", data, my_setting=3)``, a run file's
``strategy: {name: myalgo, my_setting: 3}`` and ``nasforge run`` find it; no shared file
changes. :func:`config_for` turns the flat mapping (what a run file, ``search``'s keywords and
the record hold) into a :class:`~nasforge.oneshot.common.SearchConfig` whose ``algo`` is the
algorithm's settings; :func:`flat_settings` is its inverse, the record's section.

Invariants: a name maps to one class; no setting of an algorithm is named like a setting of the
loop, so the flat mapping splits one way; ``config_for(a, flat_settings(cfg))`` equals ``cfg``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from nasforge.errors import ConfigError, did_you_mean
from nasforge.oneshot.common import SearchConfig
from nasforge.oneshot.supernet import Algorithm

__all__ = [
    "ALGORITHMS",
    "register_algorithm",
    "get_algorithm",
    "algorithm_names",
    "LOOP_SETTINGS",
    "setting_names",
    "config_for",
    "with_settings",
    "flat_settings",
    "own_settings",
]

logger = logging.getLogger(__name__)

A = TypeVar("A", bound=type[Algorithm])

#: Algorithm name -> its class: the built-ins (registered by their modules, which
#: :mod:`nasforge.oneshot.search` imports) and every algorithm a user registered.
ALGORITHMS: dict[str, type[Algorithm]] = {}

#: the settings of the search loop, which every algorithm uses (``SearchConfig`` but ``algo``)
LOOP_SETTINGS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(SearchConfig) if f.name != "algo"
)


def _field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def register_algorithm(cls: A) -> A:
    """Returns ``cls`` after registering it under ``cls.name`` (a class decorator).

    A user's algorithm registered again under its name (a module or notebook cell run again)
    replaces the earlier class, with a warning.

    Raises:
        ConfigError: no name; a built-in's name taken by another class; a ``settings_class``
            that is not a dataclass whose every field has a default and which has ``check()``;
            a setting named like a setting of the loop.
    """
    name = cls.name
    if not isinstance(name, str) or not name:
        raise ConfigError(f"algorithm {cls.__name__} needs a name (class attribute `name`)")
    settings = cls.settings_class
    if not (dataclasses.is_dataclass(settings) and callable(getattr(settings, "check", None))):
        raise ConfigError(
            f"algorithm {name!r}: settings_class must be a dataclass with a check() method, got "
            f"{settings!r}"
        )
    try:
        settings()
    except TypeError as exc:
        raise ConfigError(
            f"algorithm {name!r}: every field of {settings.__name__} needs a default ({exc})"
        ) from exc
    clash = sorted(set(_field_names(settings)) & {*LOOP_SETTINGS, "algo"})
    if clash:
        raise ConfigError(
            f"algorithm {name!r}: {settings.__name__} names {clash} like settings of the search "
            f"loop {list(LOOP_SETTINGS)}; rename them"
        )
    old = ALGORITHMS.get(name)
    if old is not None and old is not cls:
        if old.__module__.startswith("nasforge."):
            raise ConfigError(
                f"algorithm name {name!r} is nasforge's {old.__module__}.{old.__qualname__}; "
                "give yours another name"
            )
        logger.warning("algorithm %r registered again: %s replaces %s", name, cls, old)
    ALGORITHMS[name] = cls
    return cls


def algorithm_names() -> list[str]:
    """Returns the names of every registered algorithm, sorted."""
    return sorted(ALGORITHMS)


def get_algorithm(name: str | type[Algorithm]) -> type[Algorithm]:
    """Returns the algorithm class of ``name`` (classes pass through).

    Raises:
        ConfigError: unknown algorithm (the message suggests the closest names).
    """
    if isinstance(name, type) and issubclass(name, Algorithm):
        return name
    if not isinstance(name, str) or name not in ALGORITHMS:
        hint = did_you_mean(str(name), algorithm_names())
        raise ConfigError(
            f"unknown one-shot algorithm {name!r}; {hint + ' ' if hint else ''}expected one of "
            f"{algorithm_names()} (or register yours with nasforge.oneshot.register_algorithm)"
        )
    return ALGORITHMS[name]


def setting_names(algorithm: str | type[Algorithm]) -> list[str]:
    """Returns every key a flat mapping of settings may hold for ``algorithm``: the loop's,
    then the algorithm's own."""
    return [*LOOP_SETTINGS, *_field_names(get_algorithm(algorithm).settings_class)]


def _owners(key: str) -> list[str]:
    """Returns the registered algorithms that have a setting ``key``."""
    return [n for n, a in sorted(ALGORITHMS.items()) if key in _field_names(a.settings_class)]


def config_for(
    algorithm: str | type[Algorithm],
    settings: Mapping[str, Any] | None = None,
    **more: Any,
) -> SearchConfig:
    """Returns the unchecked :class:`SearchConfig` of ``algorithm`` from one flat mapping of
    settings (``settings`` and then ``more``): the loop's keys on the config, the algorithm's
    in its ``algo`` (its ``settings_class``, defaults for the keys not given).

    Raises:
        ConfigError: unknown algorithm, or a key that is no setting of the loop or of this
            algorithm (the message says whose setting it is, or lists the keys accepted and
            suggests the closest).
    """
    algo = get_algorithm(algorithm)
    given = {**dict(settings or {}), **more}
    own = _field_names(algo.settings_class)
    for key in given:
        if key in LOOP_SETTINGS or key in own:
            continue
        owners = _owners(key)
        if owners:
            raise ConfigError(
                f"{key!r} is a setting of {', '.join(owners)}, not {algo.name}; the settings of "
                f"{algo.name} are {setting_names(algo)}"
            )
        hint = did_you_mean(str(key), setting_names(algo))
        raise ConfigError(
            f"unknown setting {key!r} of one-shot algorithm {algo.name!r}; "
            f"{hint + ' ' if hint else ''}its settings are {setting_names(algo)}"
        )
    loop = {k: v for k, v in given.items() if k in LOOP_SETTINGS}
    return SearchConfig(
        **loop, algo=algo.settings_class(**{k: given[k] for k in own if k in given})
    )


def with_settings(algorithm: str | type[Algorithm], cfg: SearchConfig) -> SearchConfig:
    """Returns ``cfg`` with ``algo`` set to ``algorithm``'s default settings when it is None.

    Raises:
        ConfigError: ``cfg.algo`` holds another algorithm's settings class.
    """
    algo = get_algorithm(algorithm)
    if cfg.algo is None:
        return dataclasses.replace(cfg, algo=algo.settings_class())
    if type(cfg.algo) is not algo.settings_class:
        raise ConfigError(
            f"{algo.name} takes its settings as {algo.settings_class.__name__}, got "
            f"SearchConfig(algo={type(cfg.algo).__name__}(...)); build the config with "
            f"nasforge.oneshot.config_for({algo.name!r}, ...)"
        )
    return cfg


def flat_settings(cfg: SearchConfig) -> dict[str, Any]:
    """Returns ``cfg`` as one flat mapping: the loop's settings, then the algorithm's (what a
    run's record keeps, and what :func:`config_for` reads back)."""
    loop = {k: getattr(cfg, k) for k in LOOP_SETTINGS}
    if cfg.algo is None:
        return loop
    return {**loop, **{k: getattr(cfg.algo, k) for k in _field_names(type(cfg.algo))}}


def own_settings(algorithm: str | type[Algorithm], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the keys of ``settings`` that are settings of the loop or of ``algorithm``,
    dropping those of other registered algorithms: a record written while one config held
    every algorithm's settings, read back for the one it ran (which never read the others)."""
    keep = set(setting_names(algorithm))
    return {k: v for k, v in settings.items() if k in keep or not _owners(k)}
