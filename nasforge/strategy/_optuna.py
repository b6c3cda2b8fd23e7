"""The one way a strategy asks an Optuna sampler (TPE, Gaussian process, CMA-ES), with no
repeated architecture. Pure (no torch); Optuna, and what a sampler needs beyond it, is imported
when the strategy is set up.

Each listed decision becomes one categorical Optuna parameter over candidate *positions* (ints),
so any JSON candidate (lists of input indices included) works. A range decision becomes Optuna's
own numeric parameter: ``nf.uniform`` a ``FloatDistribution`` and ``nf.integer`` an
``IntDistribution`` (``log`` and ``step`` kept), exactly as Optuna's ``suggest_float`` /
``suggest_int`` make them. Trials asked but not yet told stay "running" in the in-memory Optuna
study, which Optuna's samplers handle natively (TPE's constant liar, the GP's expected
improvement over the running points, CMA-ES's generations).

Why repeats are handled here. A sampler whose model is peaked proposes an architecture it has
already seen; an engine that answers a repeat with the earlier metric and a strategy that adds
that answer as one more observation make the model more peaked still, so repeats feed on
themselves (TPE on a 4**12 space: 60% of asks were repeats, and the cost of an ask grew with
every one). So:

    history   the Optuna study holds one observation per distinct architecture. A tell of an
              architecture already told with a metric closes its Optuna trial as FAIL, which
              the samplers ignore, instead of adding a second observation.
    proposal  ``ask`` takes the sampler's proposal when it is an architecture not yet asked or
              told. Otherwise its trial is closed as FAIL, the sampler is asked again up to
              ``n_resamples`` times, and if it still repeats itself the answer is the nearest
              unseen architecture to its last proposal (fewest decisions changed, ties broken
              by the strategy's seeded generator). That architecture enters the study when told.
    exhausted ``ask`` returns None once every architecture of the space was asked.

Inside the strategy an architecture is a tuple with one entry per decision: the candidate
position of a listed decision, the step index ``(value - low) // step`` of an integer range,
the canonical value of a float range (a repeat there is all but impossible; when one happens,
the nearest unseen architecture redraws one float decision).

Replay. The study and the sampler are rebuilt from the seed at ``setup``; the engine's replay of
asks and tells (in recorded order) repeats the sampler's computations, so a seeded sampler that
computes the same proposal from the same history (all of Optuna's do, on one machine with the
thread counts pinned) ends in the state it had.
"""

from __future__ import annotations

import abc
import importlib
import itertools
import random
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

from nasforge.errors import ConfigError
from nasforge.space.ranges import canonical_float
from nasforge.space.search_space import Arch, Decision
from nasforge.strategy.base import BaseStrategy

if TYPE_CHECKING:  # optuna is imported at setup, not at import
    from optuna.distributions import BaseDistribution
    from optuna.samplers import BaseSampler
    from optuna.trial import Trial

__all__ = ["OptunaStrategy", "check_count"]

#: Spaces up to this size are enumerated to find an unseen architecture when random probes
#: around the proposal all hit seen ones; bigger spaces are probed uniformly instead.
_ENUMERATE_LIMIT = 1_000_000
#: Random probes per Hamming radius before the radius grows.
_PROBES_PER_RADIUS = 32

Pos = tuple[Any, ...]  # an architecture as candidate positions (see the module doc), space order


def check_count(name: str, value: Any, low: int) -> int:
    """Returns ``value`` when it is an int >= ``low``.

    Raises:
        ConfigError: it is not (a bool, a float, too small), naming the argument.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
    return value


class OptunaStrategy(BaseStrategy):
    """Returns architectures proposed by an Optuna sampler (:meth:`_sampler`), seeded, never
    one already seen.

    Subclasses implement :meth:`_sampler` and may list in ``requires`` the packages their
    sampler imports beyond Optuna (checked at setup, so a missing one is one line; a strategy
    whose needs depend on the space overrides :meth:`needs`).

    Invariants: the same seed and ask/tell sequence give the same architectures; no
    architecture is asked twice while an unseen one exists (an architecture counts as seen once
    asked or told); the Optuna study holds at most one observation per architecture, so a
    repeated tell (a ``cached`` trial) adds nothing; a told architecture that was never asked (a
    foreign history) is added to the study as a finished trial, so replay of any recorded
    history works.

    Raises:
        ConfigError: (at setup) Optuna or a package in ``requires`` is not installed.
    """

    #: packages the sampler imports when it runs, beyond optuna: (module, pip name)
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, seed: int = 0, n_resamples: int = 0) -> None:
        super().__init__(seed)
        self.n_resamples = check_count("n_resamples", n_resamples, 0)

    def needs(self) -> tuple[tuple[str, str], ...]:
        """Returns the packages this strategy's sampler imports on this space beyond Optuna,
        as (module, pip name): ``requires`` unless a strategy knows better."""
        return self.requires

    @property
    def n_observed(self) -> int:
        """Returns how many architectures were told with a metric (one each, however often
        told): the history a model is fitted to."""
        return self._n_observed

    @abc.abstractmethod
    def _sampler(self, optuna: Any) -> BaseSampler:
        """Returns the seeded Optuna sampler that proposes this strategy's architectures."""

    # -- state ---------------------------------------------------------------------------------
    def _reset(self) -> None:
        try:
            import optuna
        except ImportError as exc:  # pragma: no cover - optuna is a dependency
            raise ConfigError(
                f"the {self.name!r} strategy needs optuna: pip install optuna"
            ) from exc
        for module, pip in self.needs():
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ConfigError(
                    f"the {self.name!r} strategy needs the package {module!r}, which is not "
                    f"installed: pip install {pip} (or choose another strategy, e.g. 'tpe')"
                ) from exc
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self._close = _closer(optuna)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ExperimentalWarning for multivariate, GP, ...
            sampler = self._sampler(optuna)
        self._study = optuna.create_study(direction="maximize", sampler=sampler)
        self._decisions = self.space.decisions
        #: candidates per decision (0 for a float range, which never enumerates)
        self._sizes = [0 if d.kind == "float" else int(d.count) for d in self._decisions]
        self._floats = [i for i, d in enumerate(self._decisions) if d.kind == "float"]
        self._size = self.space.size
        self._dists: dict[str, BaseDistribution] = {
            d.label: _distribution(optuna, d) for d in self._decisions
        }
        self._rng = random.Random(self.seed)  # only for the nearest-unseen fallback
        self._seen: set[Pos] = set()  # asked or told
        self._told: dict[Pos, bool] = {}  # told -> whether a metric (not a failure) was told
        self._n_observed = 0  # how many of them were told with a metric
        #: asked, not told -> their Optuna trials (None: an architecture of ours, not Optuna's)
        self._pending: dict[Pos, list[Trial | None]] = {}
        #: asks whose proposal was already seen (diagnostics; each became a fresh arch)
        self.n_repeat_proposals = 0

    @property
    def n_observations(self) -> int:
        """Returns how many completed trials the Optuna study holds: one per architecture told
        with a metric, however often it was told."""
        complete = (self._optuna.trial.TrialState.COMPLETE,)
        return len(self._study.get_trials(deepcopy=False, states=complete))

    # -- ask -----------------------------------------------------------------------------------
    def _ask(self) -> Arch | None:
        if len(self._seen) >= self._size:
            return None  # every architecture was asked: nothing new is left
        pos: Pos = ()
        for _ in range(1 + self.n_resamples):
            trial = self._study.ask(self._dists)
            params = trial.params  # a fresh copy on every access: read it once
            pos = tuple(_entry(d, params[d.label]) for d in self._decisions)
            if pos not in self._seen:
                return self._hand_out(pos, trial)
            # a repeat is never an observation: close the trial as failed (samplers skip those)
            self.n_repeat_proposals += 1
            self._close(self._study, trial, state=self._optuna.trial.TrialState.FAIL)
        return self._hand_out(self._nearest_unseen(pos), None)

    def _hand_out(self, pos: Pos, trial: Trial | None) -> Arch:
        self._seen.add(pos)
        self._pending.setdefault(pos, []).append(trial)
        return {d.label: _value(d, p) for d, p in zip(self._decisions, pos)}

    def _nearest_unseen(self, pos: Pos) -> Pos:
        """Returns an unseen architecture with the fewest decisions changed from ``pos``.

        Radius 1 is searched exhaustively (in seeded random order); larger radii by
        ``_PROBES_PER_RADIUS`` seeded probes each; then the space is enumerated (small spaces)
        or probed uniformly (large ones, where unseen architectures are the vast majority).
        """
        rng = self._rng
        while self._floats:  # a fresh value of one float range is unseen all but surely
            probe = list(pos)
            i = self._floats[rng.randrange(len(self._floats))]
            domain = self._decisions[i].domain
            assert domain is not None
            probe[i] = domain.sample(rng)
            if tuple(probe) not in self._seen:
                return tuple(probe)
        mutable = [i for i, n in enumerate(self._sizes) if n > 1]
        neighbours = [(i, v) for i in mutable for v in range(self._sizes[i]) if v != pos[i]]
        rng.shuffle(neighbours)
        for i, v in neighbours:
            cand = pos[:i] + (v,) + pos[i + 1 :]
            if cand not in self._seen:
                return cand
        for radius in range(2, len(mutable) + 1):
            for _ in range(_PROBES_PER_RADIUS):
                probe = list(pos)
                for i in rng.sample(mutable, radius):
                    other = rng.randrange(self._sizes[i] - 1)
                    probe[i] = other if other < pos[i] else other + 1
                if tuple(probe) not in self._seen:
                    return tuple(probe)
        if self._size <= _ENUMERATE_LIMIT:
            unseen = [
                p
                for p in itertools.product(*(range(n) for n in self._sizes))
                if p not in self._seen
            ]
            assert unseen, "ask checks that an unseen architecture exists"
            return unseen[rng.randrange(len(unseen))]
        while True:  # unseen archs outnumber seen ones by far here, so this ends fast
            cand = tuple(rng.randrange(n) for n in self._sizes)
            if cand not in self._seen:
                return cand

    # -- tell ----------------------------------------------------------------------------------
    def _tell(self, arch: Arch, metric: float | None) -> None:
        optuna = self._optuna
        pos: Pos = tuple(_position(d, arch[d.label]) for d in self._decisions)
        waiting = self._pending.get(pos)
        trial = None
        if waiting:
            trial = waiting.pop(0)
            if not waiting:
                del self._pending[pos]
        self._seen.add(pos)
        if self._told.get(pos, False) or (metric is None and pos in self._told):
            # already observed (e.g. the engine's ``cached`` copy): not a new observation
            if trial is not None:
                self._close(self._study, trial, state=optuna.trial.TrialState.FAIL)
            return
        self._told[pos] = metric is not None
        self._n_observed += metric is not None
        state = (
            optuna.trial.TrialState.COMPLETE if metric is not None else optuna.trial.TrialState.FAIL
        )
        if trial is not None:
            self._close(self._study, trial, metric, state=state)
            return
        self._study.add_trial(
            optuna.trial.create_trial(
                params={d.label: _param(d, p) for d, p in zip(self._decisions, pos)},
                distributions=self._dists,
                value=metric,
                state=state,
            )
        )


def _closer(optuna: Any) -> Any:
    """Returns the function that finishes an asked Optuna trial: ``study.tell`` less the deep
    copy of the finished trial it returns, which nobody here reads (Optuna's own
    ``study.optimize`` calls the same internal function, so the study ends in the same state).
    Falls back to ``study.tell`` where that function is absent."""
    try:
        from optuna.study._tell import _tell_with_warning
    except ImportError:  # pragma: no cover - an Optuna that moved it: the public way
        return lambda study, trial, value=None, state=None: study.tell(trial, value, state=state)

    def close(study: Any, trial: Any, value: float | None = None, state: Any = None) -> None:
        _tell_with_warning(study=study, trial=trial, value_or_values=value, state=state)

    return close


# -- one decision: Optuna's distribution, and the strategy's entry <-> value <-> Optuna param ----
def _distribution(optuna: Any, d: Decision) -> BaseDistribution:
    """Returns the Optuna distribution of a decision: categorical over positions, or numeric."""
    dists = optuna.distributions
    if d.domain is None:
        return dists.CategoricalDistribution(list(range(len(d))))  # type: ignore[no-any-return]
    if d.kind == "int":
        r = d.domain
        return dists.IntDistribution(  # type: ignore[no-any-return]
            int(r.low), int(r.high), log=r.log, step=r.step
        )
    return dists.FloatDistribution(d.domain.low, d.domain.high, log=d.domain.log)  # type: ignore[no-any-return]


def _entry(d: Decision, param: Any) -> Any:
    """Returns the strategy's entry for an Optuna parameter value."""
    if d.domain is None:
        return param
    if d.kind == "int":
        return (int(param) - int(d.domain.low)) // d.domain.step
    return min(max(canonical_float(param), d.domain.low), d.domain.high)


def _value(d: Decision, entry: Any) -> Any:
    """Returns the architecture's value for a strategy entry."""
    if d.domain is None:
        return d.values[entry]
    if d.kind == "int":
        return int(d.domain.low) + entry * d.domain.step
    return entry


def _position(d: Decision, value: Any) -> Any:
    """Returns the strategy's entry for an architecture's (validated) value."""
    if d.domain is None:
        return d.index(value)
    if d.kind == "int":
        return (int(value) - int(d.domain.low)) // d.domain.step
    return value


def _param(d: Decision, entry: Any) -> Any:
    """Returns the Optuna parameter value for a strategy entry."""
    return entry if d.domain is None else _value(d, entry)
