"""Gaussian-process Bayesian optimisation through Optuna's ``GPSampler``, with no repeated
architecture (decisions become Optuna parameters as for TPE: :mod:`nasforge.strategy._optuna`).

The model is a GP with a Matérn-5/2 kernel over the (log-)scaled ranges and a Hamming kernel
over listed candidates, its hyperparameters fitted by maximum a posteriori; the next point
maximises log expected improvement (its expectation over the running trials' outcomes when
trials run at once). Its cost per ask grows with the history (a Cholesky factor of the kernel
matrix, refitted each ask): about 0.1 s at 100 trials, seconds at 1,000 (docs/hparams.md,
"Which sampler?"). This module is pure; the sampler runs on torch and scipy, imported when the
strategy is set up, in the engine's process (one torch thread, as the engine sets it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nasforge.strategy._optuna import OptunaStrategy, check_count
from nasforge.strategy.base import register_strategy

if TYPE_CHECKING:  # optuna is imported at setup, not at import
    from optuna.samplers import BaseSampler

__all__ = ["GPStrategy"]


@register_strategy("gp", "gaussian_process", "bo")
class GPStrategy(OptunaStrategy):
    """Returns architectures proposed by Optuna's Gaussian-process sampler, seeded, never one
    already seen.

    Arguments: ``n_startup_trials`` random trials before the GP (Optuna's default, 10);
    ``deterministic_objective`` fit no noise term (only for a metric that is the same on every
    evaluation, such as a test function; a trained network's accuracy is not); ``n_resamples``
    how many times the GP is asked again after proposing a seen architecture.

    Invariants: as every Optuna-backed strategy (:class:`~nasforge.strategy._optuna.
    OptunaStrategy`): the same seed and ask/tell sequence give the same architectures, with
    torch's thread count pinned; no architecture is asked twice while an unseen one exists.

    Raises:
        ConfigError: bad arguments; (at setup) torch or scipy is not installed.
    """

    requires = (("torch", "torch"), ("scipy", "scipy"))

    def __init__(
        self,
        seed: int = 0,
        n_startup_trials: int = 10,
        deterministic_objective: bool = False,
        n_resamples: int = 0,
    ) -> None:
        super().__init__(seed, n_resamples)
        self.n_startup_trials = check_count("n_startup_trials", n_startup_trials, 0)
        self.deterministic_objective = bool(deterministic_objective)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data (those left at their
        defaults too, but ``n_resamples`` only when set)."""
        out: dict[str, Any] = {
            "seed": self.seed,
            "n_startup_trials": self.n_startup_trials,
            "deterministic_objective": self.deterministic_objective,
        }
        if self.n_resamples:
            out["n_resamples"] = self.n_resamples
        return out

    def _sampler(self, optuna: Any) -> BaseSampler:
        """Returns Optuna's GP sampler with this strategy's seed and settings."""
        return gp_sampler(optuna, self.seed, self.n_startup_trials, self.deterministic_objective)


def gp_sampler(optuna: Any, seed: int, n_startup_trials: int, deterministic: bool) -> BaseSampler:
    """Returns a seeded Optuna ``GPSampler`` whose random start-up draws come from a seeded
    ``RandomSampler`` (``auto`` builds the same one)."""
    return optuna.samplers.GPSampler(  # type: ignore[no-any-return]
        seed=seed,
        independent_sampler=optuna.samplers.RandomSampler(seed=seed),
        n_startup_trials=n_startup_trials,
        deterministic_objective=deterministic,
        warn_independent_sampling=False,
    )
