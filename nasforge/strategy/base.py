"""The strategy interface: ask for an architecture, tell its metric; plus the registry.

A strategy sees only the decisions of a search space (labels and candidates) and the metrics of
finished trials. It never sees a model, a tensor or a process: the engine turns its answers into
trials. This module is pure (no torch).

A trial's lifecycle, as a strategy sees it::

    strategy.setup(space)          # once; resets every bit of state, seeds the generator
    arch = strategy.ask()          # a dict label -> value inside ``space`` (or None: exhausted)
    ...                            # the engine trains ``arch``; other asks may happen meanwhile
    strategy.tell(arch, metric)    # a finite float, higher is better; None = failed/infeasible
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from nasforge.errors import ConfigError
from nasforge.space.search_space import Arch, SearchSpace

__all__ = [
    "BaseStrategy",
    "RewardBaseline",
    "register_strategy",
    "get_strategy",
    "list_strategies",
    "default_strategy",
]

#: Value types for which (type, value) pairs are equal exactly when their JSON is, which is how
#: ``Decision.index`` compares candidates (floats are left out: 0.0 == -0.0, not as JSON).
_EXACT = frozenset({int, str, bool, type(None)})
_MISSING = object()


def _value_key(value: Any) -> Any:
    """Returns a hashable key equal for two values exactly when ``Decision.index`` takes them
    for the same candidate, or None for a value outside the exact types."""
    t = type(value)
    if t in _EXACT:
        return (t, value)
    if (t is list or t is tuple) and all(type(v) in _EXACT for v in value):
        return (list, tuple((type(v), v) for v in value))  # a tuple is the list of its items
    return None


class BaseStrategy(abc.ABC):
    """Returns architectures to try (``ask``) and learns from their metrics (``tell``).

    Invariants: every asked architecture lies inside the space given to :meth:`setup`; the same
    seed and the same sequence of ask/tell calls give the same architectures (so replaying a
    recorded history of asks and tells in order rebuilds the exact state); metrics are maximised
    (the engine negates a metric that is to be minimised); ``None`` tells a failed or infeasible
    trial.

    Subclasses implement ``_reset`` (build all state from ``self.seed``), ``_ask`` and ``_tell``;
    constructor arguments must be plain data and are returned by :meth:`config`.
    """

    #: Registry name (set by :func:`register_strategy`).
    name: ClassVar[str] = ""
    #: Whether it searches spaces that grow by edits (``space.grows``: an ``EditSpace``, whose
    #: one decision is a history): it proposes through ``space.sample``/``edits``/``extend``
    #: rather than by listing candidates.
    grows: ClassVar[bool] = False

    def __init__(self, seed: int = 0) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"seed must be an int, got {seed!r}")
        self.seed = seed
        self._space: SearchSpace | None = None
        self._lookup: dict[str, dict[Any, Any]] = {}

    # -- public edge -------------------------------------------------------------------------
    @property
    def space(self) -> SearchSpace:
        """Returns the space given to :meth:`setup`.

        Raises:
            ConfigError: :meth:`setup` was not called yet.
        """
        if self._space is None:
            raise ConfigError(f"{type(self).__name__}: call setup(space) before ask/tell")
        return self._space

    def setup(self, space: SearchSpace) -> None:
        """Binds the strategy to ``space`` and resets its state to the seeded start.

        Raises:
            ConfigError: ``space`` is not a SearchSpace or has no decision to search, or it
                grows by edits and this strategy cannot search histories.
        """
        if not isinstance(space, SearchSpace):
            raise ConfigError(
                f"a strategy needs a nasforge SearchSpace, got {type(space).__name__}; "
                "pass model_space.search_space()"
            )
        if len(space) == 0:
            raise ConfigError(
                "the space has no decisions, so there is nothing to search; add nf.choice, "
                "LayerChoice, InputChoice or Repeat to the model space"
            )
        if space.grows and not self.grows:
            able = sorted(n for n, c in _REGISTRY.items() if c.grows)
            raise ConfigError(
                f"the {self.name or type(self).__name__} strategy lists candidates, and this "
                f"space grows by edits (its architectures are histories); use one of {able}"
            )
        self._space = space
        #: label -> {value key -> candidate}: validate's answer for exact-typed values (only
        #: for spaces that validate as SearchSpace does: a subclass may canonicalise)
        self._lookup = {}
        if type(space).validate is SearchSpace.validate and not space.ranges:
            self._lookup = {
                d.label: {k: v for v in d.values if (k := _value_key(v)) is not None}
                for d in space.decisions
            }
        self._reset()

    def ask(self) -> Arch | None:
        """Returns the next architecture to evaluate, or None when the strategy is exhausted."""
        arch = self._ask()
        return None if arch is None else self._validate(arch)

    def tell(self, arch: Mapping[str, object], metric: float | None) -> None:
        """Records the metric (higher is better) of an architecture; None marks it failed.

        Raises:
            ArchitectureError: ``arch`` is not inside the space.
            ConfigError: ``metric`` is neither None nor a finite number.
        """
        arch = self._validate(arch)
        if metric is not None:
            if isinstance(metric, bool) or not isinstance(metric, (int, float)):
                raise ConfigError(f"metric must be a float or None, got {metric!r}")
            metric = float(metric)
            if not math.isfinite(metric):
                raise ConfigError(f"metric must be finite, got {metric!r}; tell None for failure")
        self._tell(arch, metric)

    def _validate(self, arch: Mapping[str, object]) -> Arch:
        """Returns ``self.space.validate(arch)``, from a lookup table when every value is of an
        exact type: validate encodes each value as JSON, which dominated replaying a long run.

        Raises:
            ArchitectureError: as ``SearchSpace.validate`` (anything off the fast path goes
                there, errors included).
        """
        lookup = self._lookup
        if lookup and type(arch) is dict and len(arch) == len(lookup):
            out: Arch = {}
            exact = _EXACT
            for label, table in lookup.items():
                v = arch.get(label, _MISSING)
                t = type(v)
                key = (t, v) if t in exact else _value_key(v)  # inlined: the common case
                value = _MISSING if key is None else table.get(key, _MISSING)
                if value is _MISSING:
                    break
                out[label] = value
            else:
                return out
        return self.space.validate(arch)

    def replay(self, history: Iterable[tuple[Mapping[str, object], float | None]]) -> None:
        """Rebuilds state from a sequential history: one ask then one tell per (arch, metric).

        The told architecture is the recorded one, so the result is right even when a resumed
        strategy would have asked something else.
        """
        for arch, metric in history:
            self.ask()
            self.tell(arch, metric)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        return {"seed": self.seed}

    def explain(self) -> str | None:
        """Returns one line for the run's log saying what the strategy chose for the space
        given to :meth:`setup` and why (``auto``), or None when there is nothing to say."""
        return None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"

    # -- for subclasses ----------------------------------------------------------------------
    @abc.abstractmethod
    def _reset(self) -> None:
        """Builds all mutable state from ``self.seed`` and ``self.space``."""

    @abc.abstractmethod
    def _ask(self) -> Arch | None:
        """Returns an architecture (validated by the caller) or None when exhausted."""

    @abc.abstractmethod
    def _tell(self, arch: Arch, metric: float | None) -> None:
        """Learns from a validated architecture and a finite metric or None."""


#: name -> strategy class, filled by :func:`register_strategy` at import of each module.
_REGISTRY: dict[str, type[BaseStrategy]] = {}
#: other accepted spellings -> registry name.
_ALIASES: dict[str, str] = {}


def checked_points_per_range(value: Any) -> int | None:
    """Returns ``value``, the number of points a strategy that needs listed values takes from
    each range (grid, rl), when it is None or an int >= 1.

    Raises:
        ConfigError: it is anything else (a bool, a float, zero or less).
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"points_per_range must be an int >= 1, got {value!r}")
    return value


def register_strategy(
    name: str, *aliases: str
) -> Callable[[type[BaseStrategy]], type[BaseStrategy]]:
    """Returns a class decorator that registers a strategy under ``name`` (and aliases).

    Raises:
        ConfigError: the name is taken by another class.
    """

    def deco(cls: type[BaseStrategy]) -> type[BaseStrategy]:
        for key in (name, *aliases):
            owner = _REGISTRY.get(_ALIASES.get(key, key))
            if owner is not None and owner is not cls:
                raise ConfigError(f"strategy name {key!r} is already used by {owner.__name__}")
        cls.name = name
        _REGISTRY[name] = cls
        for alias in aliases:
            _ALIASES[alias] = name
        return cls

    return deco


def list_strategies() -> list[str]:
    """Returns the registered strategy names, sorted."""
    return sorted(_REGISTRY)


def default_strategy(space: SearchSpace, listed: str) -> str:
    """Returns the strategy a search of ``space`` gets when none is named: ``auto`` for a space
    with ranges (``nf.uniform``, ``nf.integer``), ``listed`` for one of listed decisions only
    (the run's own default, kept as it was)."""
    return "auto" if space.ranges else listed


def get_strategy(
    name_or_obj: str | BaseStrategy | Mapping[str, Any], **kwargs: Any
) -> BaseStrategy:
    """Returns a strategy: an instance passes through; a name builds the registered class, as
    does a run file's mapping ``{"name": ..., "config": {...}, other arguments}``.

    Raises:
        ConfigError: unknown name (the message lists the known ones), kwargs given with an
            instance, or an object that is not a BaseStrategy.
    """
    if isinstance(name_or_obj, Mapping):
        spec = dict(name_or_obj)
        name = spec.pop("name", None)
        if not isinstance(name, str):
            raise ConfigError(
                f"a strategy mapping needs a 'name' (e.g. {{'name': 'evolution', 'seed': 0}}), "
                f"got {dict(name_or_obj)!r:.120}"
            )
        return get_strategy(name, **spec.pop("config", {}), **spec, **kwargs)
    if isinstance(name_or_obj, BaseStrategy):
        if kwargs:
            raise ConfigError(f"got a strategy instance and extra arguments {sorted(kwargs)}")
        return name_or_obj
    if not isinstance(name_or_obj, str):
        raise ConfigError(
            f"strategy must be a name or a BaseStrategy, got {type(name_or_obj).__name__}"
        )
    key = name_or_obj.lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise ConfigError(
            f"unknown strategy {name_or_obj!r}; expected one of {list_strategies()} "
            f"(or aliases {sorted(_ALIASES)}), or a BaseStrategy instance"
        )
    try:
        return _REGISTRY[key](**kwargs)
    except TypeError as exc:
        raise ConfigError(f"strategy {key!r}: bad arguments {kwargs}: {exc}") from exc


class RewardBaseline:
    """Returns nothing; turns the rewards of a policy-gradient learner into advantages (the
    arithmetic the ``rl`` and ``edit_rl`` strategies and ENAS's controller share)::

        r_t = (m_t - mean_t) / std_t      m_t the t-th reward; mean, std over m_1..m_t (Welford;
                                          std taken as 1 until two rewards, or when it is 0)
        a_t = r_t - b_{t-1}               the advantage, against the baseline before m_t
        b_t = decay * b_{t-1} + (1 - decay) * r_t      (b_0 = 0)

    Invariants: the same rewards in the same order give the same advantages; a baseline
    rebuilt from :meth:`state` gives what the original would have.

    Raises:
        ConfigError: ``decay`` outside [0, 1).
    """

    def __init__(self, decay: float) -> None:
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
            raise ConfigError(f"baseline_decay must lie in [0, 1), got {decay!r}")
        self.decay = float(decay)
        self.n, self.mean, self.m2, self.value = 0, 0.0, 0.0, 0.0

    def advantage(self, metric: float) -> float:
        """Returns the advantage of reward ``metric`` and moves the statistics past it."""
        self.n += 1
        delta = metric - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (metric - self.mean)
        std = math.sqrt(self.m2 / self.n) if self.n > 1 else 1.0
        reward = (metric - self.mean) / (std if std > 1e-12 else 1.0)
        advantage = reward - self.value
        self.value = self.decay * self.value + (1 - self.decay) * reward
        return advantage

    def state(self) -> dict[str, float]:
        """Returns the statistics as plain data (for a checkpoint)."""
        return {"n": self.n, "mean": self.mean, "m2": self.m2, "value": self.value}

    def load_state(self, state: Mapping[str, float]) -> None:
        """Restores what :meth:`state` returned."""
        self.n, self.mean = int(state["n"]), float(state["mean"])
        self.m2, self.value = float(state["m2"]), float(state["value"])
