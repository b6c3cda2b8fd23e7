"""The ``auto`` strategy: a model chosen by the space and the budget, and a reason for it.

The default for spaces with ranges (``nf.uniform``, ``nf.integer``). The rule, in order
(measured: docs/hparams.md, "Which sampler?")::

    no range                     TPE (multivariate)  an architecture-only space: what nasforge
                                                     searched it with before
    a depth decision (Repeat)    TPE                 conditional structure: the decisions of
                                                     the deeper blocks matter only at some
                                                     depths, which one stationary GP kernel
                                                     over every decision does not model
    listed decisions among the   TPE                 a GP's kernel over candidates did worse
    ranges (a mixed space)                           than random on the mixed test function
    numeric ranges only, more    CMA-ES              a GP in that many dimensions needs more
    than MAX_GP_DIMS of them                         trials than such budgets have; CMA-ES
                                                     beat TPE at 100 and 300 evaluations on
                                                     30-dimensional test functions
    otherwise (numeric ranges    GP, then TPE        the GP reached far lower regrets at 100
    only)                                            evaluations on every continuous test
                                                     function; once ``gp_trials`` trials are
                                                     told (its ask costs about 0.25 s at 200
                                                     and seconds at 1,000) TPE takes over, with
                                                     the whole history; within the GP phase,
                                                     every ``tpe_every``-th ask (5) is TPE's

Why TPE between the GP's asks. A GP fitted to points that all share a value of one range (a
bound: 50 trials of one Hartmann-6 seed sat at x1 = 1.0) learns that the range does not
matter there and keeps proposing on the bound; its expected improvement elsewhere is tiny. TPE
draws around the good points with a spread of its own, so it shows the GP values it would not
propose; the GP then models them. At one TPE ask in five, the 20-seed mean regret on
Hartmann-6 fell from 0.035 to 0.018, the others moved within their spread (docs/hparams.md).

The budget enters through the history, not through ``n_trials``: the hand-over depends only on
how many trials were told, so a resume that raises ``n_trials`` replays the same choices. Pure
(Optuna, and for the GP torch and scipy, are imported when the strategy is set up).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nasforge.space.search_space import Arch, SearchSpace
from nasforge.strategy._optuna import OptunaStrategy, check_count
from nasforge.strategy._tpe_cache import tpe_sampler
from nasforge.strategy.base import register_strategy
from nasforge.strategy.cmaes import CMAESStrategy, cmaes_sampler
from nasforge.strategy.gp import GPStrategy, gp_sampler

if TYPE_CHECKING:  # optuna is imported at setup, not at import
    from optuna.samplers import BaseSampler

__all__ = ["AutoStrategy", "Choice", "choose", "MAX_GP_DIMS"]

log = logging.getLogger("nasforge.strategy")

#: the most numeric ranges ``auto`` gives a Gaussian process
MAX_GP_DIMS = 16
#: random start-up trials before the GP (Optuna's default)
GP_STARTUP = 10


@dataclass(frozen=True)
class Choice:
    """Returns nothing; what ``auto`` chose for a space: the first ``model`` (``gp``,
    ``cmaes`` or ``tpe``) and ``why``, one clause for the run's log."""

    model: str
    why: str


def choose(space: SearchSpace) -> Choice:
    """Returns the model ``auto`` starts with on ``space``, and why (the rule of the module
    doc)."""
    ranges = [d for d in space.decisions if d.domain is not None]
    listed = [d for d in space.decisions if d.domain is None]
    depths = [d.label for d in listed if d.kind == "depth"]
    if not ranges:
        return Choice("tpe", f"{len(listed)} listed decisions and no range: an architecture space")
    if depths:
        return Choice(
            "tpe",
            f"conditional structure: the depth decision(s) {depths[:3]} decide which other "
            "decisions matter, which a GP's kernel does not model",
        )
    if listed:
        return Choice(
            "tpe",
            f"{len(listed)} listed decision(s) among {len(ranges)} range(s): a mixed space, "
            "where a GP's kernel over candidates did worse than random in our measurements",
        )
    if len(ranges) > MAX_GP_DIMS:
        return Choice(
            "cmaes",
            f"{len(ranges)} numeric ranges, more than the {MAX_GP_DIMS} a GP is given here; "
            "CMA-ES models many continuous dimensions for a small cost per ask",
        )
    return Choice("gp", f"{len(ranges)} numeric range(s), no listed decision, no conditional one")


@register_strategy("auto")
class AutoStrategy(OptunaStrategy):
    """Returns architectures from the model :func:`choose` picks for the space: a Gaussian
    process (Optuna's ``GPSampler``) until ``gp_trials`` trials are told and multivariate TPE
    after, CMA-ES, or TPE throughout; :meth:`explain` says which and why.

    Arguments: ``gp_trials`` the history at which a GP hands over to TPE (the GP's ask grows
    with the history: about 0.25 s at 200 trials, seconds at 1,000); ``tpe_every`` during the
    GP phase, every such ask after the GP's 10 start-up trials is TPE's (0: the GP's only);
    ``n_resamples`` as TPE's.

    Invariants: as every Optuna-backed strategy (:class:`~nasforge.strategy._optuna.
    OptunaStrategy`); the choice depends on the space and the number of trials told only, so a
    replayed history makes the same choices at the same trials.

    Raises:
        ConfigError: bad arguments; (at setup) the GP's torch or scipy missing where the rule
            picks a GP.
    """

    def __init__(
        self, seed: int = 0, gp_trials: int = 200, n_resamples: int = 0, tpe_every: int = 5
    ) -> None:
        super().__init__(seed, n_resamples)
        self.gp_trials = check_count("gp_trials", gp_trials, 0)
        self.tpe_every = check_count("tpe_every", tpe_every, 0)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        out: dict[str, Any] = {
            "seed": self.seed,
            "gp_trials": self.gp_trials,
            "tpe_every": self.tpe_every,
        }
        if self.n_resamples:
            out["n_resamples"] = self.n_resamples
        return out

    @property
    def model(self) -> str:
        """Returns the model that proposes the next architecture: ``gp``, ``cmaes`` or
        ``tpe`` (``gp`` turns into ``tpe`` once ``gp_trials`` trials are told)."""
        model = self._model
        return "tpe" if model == "gp" and self.n_observed >= self.gp_trials else model

    def needs(self) -> tuple[tuple[str, str], ...]:
        """Returns the packages of the model the rule picks for the space (the GP's torch and
        scipy, CMA-ES's cmaes), none for TPE."""
        model = choose(self.space).model
        return {"gp": GPStrategy.requires, "cmaes": CMAESStrategy.requires}.get(model, ())

    def explain(self) -> str | None:
        """Returns what ``auto`` chose for the space and why, one line for the run's log."""
        choice = choose(self.space)
        if choice.model == "gp":
            between = f" (every {self.tpe_every}th ask TPE's)" if self.tpe_every else ""
            return (
                f"auto: a Gaussian process (GP) for the first {self.gp_trials} trials{between}, "
                f"then multivariate TPE: {choice.why}; after {self.gp_trials} trials a GP's ask "
                "costs more than TPE's by far"
            )
        if choice.model == "cmaes":
            return f"auto: CMA-ES: {choice.why}"
        return f"auto: multivariate TPE: {choice.why}"

    def _sampler(self, optuna: Any) -> BaseSampler:
        self._model = choose(self.space).model
        self._tpe_between: BaseSampler | None = None  # the GP phase's interleaved TPE
        if self._model == "gp" and self.gp_trials > 0:
            return gp_sampler(optuna, self.seed, GP_STARTUP, deterministic=False)
        if self._model == "cmaes":
            return cmaes_sampler(optuna, self.seed)
        self._model = "tpe"
        return self._tpe(optuna)

    def _tpe(self, optuna: Any) -> BaseSampler:
        """Returns the TPE sampler ``auto`` uses (Optuna's defaults, multivariate, seeded; its
        history's conversion cached: :mod:`nasforge.strategy._tpe_cache`)."""
        return tpe_sampler(optuna, seed=self.seed, multivariate=True)

    def _ask(self) -> Arch | None:
        if self._model != self.model:
            self._model = "tpe"  # the hand-over: TPE starts from the GP's whole history
            self._study.sampler = self._gp_phase_tpe()
            log.info("auto: %d trials told; multivariate TPE from here on", self.n_observed)
        if self._model != "gp" or not _interleaved(self.n_observed, self.tpe_every):
            return super()._ask()
        gp, self._study.sampler = self._study.sampler, self._gp_phase_tpe()
        try:
            return super()._ask()
        finally:
            self._study.sampler = gp

    def _gp_phase_tpe(self) -> BaseSampler:
        """Returns the TPE sampler that asks between the GP's asks and takes over after them,
        made at its first use (one sampler, so its seeded stream goes on across both)."""
        if self._tpe_between is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ExperimentalWarning: multivariate
                self._tpe_between = self._tpe(self._optuna)
        return self._tpe_between


def _interleaved(n_observed: int, every: int) -> bool:
    """Returns whether the ask after ``n_observed`` told trials goes to TPE instead of the GP:
    every ``every``-th ask once the GP's start-up trials are told (never when ``every`` is 0)."""
    return every > 0 and n_observed >= GP_STARTUP and (n_observed - GP_STARTUP) % every == every - 1
