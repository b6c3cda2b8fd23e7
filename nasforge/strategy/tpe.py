"""Tree-structured Parzen Estimator search through Optuna's ``TPESampler`` (Bergstra et al.
2011), with no repeated architecture (how decisions become Optuna parameters and how repeats
are answered: :mod:`nasforge.strategy._optuna`). Pure (no torch); Optuna is imported when the
strategy is set up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError
from nasforge.strategy._optuna import OptunaStrategy, check_count
from nasforge.strategy._tpe_cache import tpe_sampler
from nasforge.strategy.base import register_strategy

if TYPE_CHECKING:  # optuna is imported at setup, not at import
    from optuna.samplers import BaseSampler

__all__ = ["TPEStrategy"]


@register_strategy("tpe")
class TPEStrategy(OptunaStrategy):
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
        super().__init__(seed, n_resamples)
        check_count("n_startup_trials", n_startup_trials, 0)
        check_count("n_ei_candidates", n_ei_candidates, 1)
        if group and not multivariate:
            raise ConfigError(
                "group=True needs multivariate=True (Optuna's grouped TPE is multivariate); "
                "pass multivariate=True, group=True"
            )
        self.n_startup_trials = n_startup_trials
        self.n_ei_candidates = n_ei_candidates
        self.multivariate = bool(multivariate)
        self.group = bool(group)

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

    def _sampler(self, optuna: Any) -> BaseSampler:
        """Returns Optuna's TPE sampler with this strategy's seed and settings (its history's
        conversion cached: :mod:`nasforge.strategy._tpe_cache`)."""
        return tpe_sampler(
            optuna,
            seed=self.seed,
            n_startup_trials=self.n_startup_trials,
            n_ei_candidates=self.n_ei_candidates,
            multivariate=self.multivariate,
            group=self.group,
        )
