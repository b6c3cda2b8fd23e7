"""Tree-structured Parzen Estimator search through Optuna's ``TPESampler`` (Bergstra et al.
2011), with no repeated architecture. Pure (no torch); Optuna is imported when the strategy is
set up.

Each listed decision becomes one categorical Optuna parameter over candidate *positions* (ints),
so any JSON candidate (lists of input indices included) works. A range decision becomes Optuna's
own numeric parameter: ``nf.uniform`` a ``FloatDistribution`` and ``nf.integer`` an
``IntDistribution`` (``log`` and ``step`` kept), so TPE fits continuous Parzen estimators to it,
on ``log(value)`` where ``log``, exactly as Optuna's ``suggest_float``/``suggest_int`` do.
Trials asked but not yet told stay "running" in the in-memory Optuna study, which TPE handles
natively.

Why repeats are handled here. A TPE sampler whose Parzen estimator is peaked proposes an
architecture it has already seen; an engine that answers a repeat with the earlier metric and a
strategy that adds that answer as one more observation make the estimator more peaked still, so
repeats feed on themselves (on a 4**12 space 60% of asks were repeats, and the cost of an ask
grew with every one). So:

    history   the Optuna study holds one observation per distinct architecture. A tell of an
              architecture already told with a metric closes its Optuna trial as FAIL, which
              TPE ignores, instead of adding a second observation.
    proposal  ``ask`` takes TPE's proposal when it is an architecture not yet asked or told.
              Otherwise TPE's trial is closed as FAIL, TPE is asked again up to
              ``n_resamples`` times, and if it still repeats itself the answer is the nearest
              unseen architecture to its last proposal (fewest decisions changed, ties broken by
              the strategy's seeded generator). That architecture enters the study when told.
    exhausted ``ask`` returns None once every architecture of the space was asked.

Inside the strategy an architecture is a tuple with one entry per decision: the candidate
position of a listed decision, the step index ``(value - low) // step`` of an integer range,
the canonical value of a float range (a repeat there is all but impossible; when one happens,
the nearest unseen architecture redraws one float decision).
"""

from __future__ import annotations

import itertools
import random
import warnings
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError
from nasforge.space.ranges import canonical_float
from nasforge.space.search_space import Arch, Decision
from nasforge.strategy.base import BaseStrategy, register_strategy

if TYPE_CHECKING:  # optuna is imported at setup, not at import
    from optuna.distributions import BaseDistribution
    from optuna.trial import Trial

__all__ = ["TPEStrategy"]

#: Spaces up to this size are enumerated to find an unseen architecture when random probes
#: around the proposal all hit seen ones; bigger spaces are probed uniformly instead.
_ENUMERATE_LIMIT = 1_000_000
#: Random probes per Hamming radius before the radius grows.
_PROBES_PER_RADIUS = 32

Pos = tuple[Any, ...]  # an architecture as candidate positions (see the module doc), space order


@register_strategy("tpe")
class TPEStrategy(BaseStrategy):
    """Returns architectures proposed by Optuna's TPE sampler, seeded, never one already seen.

    Arguments: ``n_startup_trials`` random trials before TPE; ``n_ei_candidates`` candidates
    TPE scores per proposal; ``multivariate`` one joint Parzen estimator over all decisions
    (Optuna's multivariate TPE, its own default since Optuna 5; one estimator split per ask
    instead of one per decision, so cheaper per ask: docs/engine.md) or, if False, one
    independent estimator per decision (the TPE of Bergstra et al.); ``group`` Optuna's grouped
    multivariate TPE (needs ``multivariate``; the same as ``multivariate`` on a space whose
    decisions are all present in every trial, which nasforge spaces are); ``n_resamples`` how
    many times TPE is asked again after proposing a seen architecture.

    Invariants: the same seed and ask/tell sequence give the same architectures; no
    architecture is asked twice while an unseen one exists (an architecture counts as seen once
    asked or told); the Optuna study holds at most one observation per architecture, so a
    repeated tell (a ``cached`` trial) adds nothing; a told architecture that was never asked (a
    foreign history) is added to the study as a finished trial, so replay of any recorded
    history works.

    Raises:
        ConfigError: Optuna is not installed (``pip install optuna``), or bad arguments.
    """

    def __init__(
        self,
        seed: int = 0,
        n_startup_trials: int = 10,
        n_ei_candidates: int = 24,
        multivariate: bool = True,
        group: bool = False,
        n_resamples: int = 0,
    ) -> None:
        super().__init__(seed)
        for name, value, low in (
            ("n_startup_trials", n_startup_trials, 0),
            ("n_ei_candidates", n_ei_candidates, 1),
            ("n_resamples", n_resamples, 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
        if group and not multivariate:
            raise ConfigError(
                "group=True needs multivariate=True (Optuna's grouped TPE is multivariate); "
                "pass multivariate=True, group=True"
            )
        self.n_startup_trials = n_startup_trials
        self.n_ei_candidates = n_ei_candidates
        self.multivariate = bool(multivariate)
        self.group = bool(group)
        self.n_resamples = n_resamples

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data.

        ``group`` and ``n_resamples`` appear only when they differ from their defaults, so the
        config of a run recorded before they existed still matches (and the run resumes) when
        the strategy is built with the same arguments as then.
        """
        out: dict[str, Any] = {
            "seed": self.seed,
            "n_startup_trials": self.n_startup_trials,
            "n_ei_candidates": self.n_ei_candidates,
            "multivariate": self.multivariate,
        }
        if self.group:
            out["group"] = True
        if self.n_resamples:
            out["n_resamples"] = self.n_resamples
        return out

    # -- state ---------------------------------------------------------------------------------
    def _reset(self) -> None:
        try:
            import optuna
        except ImportError as exc:  # pragma: no cover - optuna is a dependency
            raise ConfigError("the 'tpe' strategy needs optuna: pip install optuna") from exc
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ExperimentalWarning for multivariate / group
            sampler = optuna.samplers.TPESampler(
                seed=self.seed,
                n_startup_trials=self.n_startup_trials,
                n_ei_candidates=self.n_ei_candidates,
                multivariate=self.multivariate,
                group=self.group,
            )
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
        #: asked, not told -> their Optuna trials (None: an architecture of ours, not TPE's)
        self._pending: dict[Pos, list[Trial | None]] = {}
        #: asks whose TPE proposal was already seen (diagnostics; each became a fresh arch)
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
            # a repeat is never an observation: close TPE's trial as failed (TPE skips those)
            self.n_repeat_proposals += 1
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
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
                self._study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        self._told[pos] = metric is not None
        state = (
            optuna.trial.TrialState.COMPLETE if metric is not None else optuna.trial.TrialState.FAIL
        )
        if trial is not None:
            self._study.tell(trial, metric, state=state)
            return
        self._study.add_trial(
            optuna.trial.create_trial(
                params={d.label: _param(d, p) for d, p in zip(self._decisions, pos)},
                distributions=self._dists,
                value=metric,
                state=state,
            )
        )


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
