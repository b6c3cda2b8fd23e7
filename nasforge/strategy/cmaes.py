"""CMA-ES (the covariance matrix adaptation evolution strategy, Hansen 2016) through Optuna's
``CmaEsSampler`` and the ``cmaes`` package, with no repeated architecture (decisions become
Optuna parameters as for TPE: :mod:`nasforge.strategy._optuna`).

CMA-ES models the numeric ranges only: each generation samples ``popsize`` points from a
Gaussian whose mean and covariance follow the best of the last generation. A listed decision
(``nf.choice``, a layer or input choice) is drawn uniformly at random instead, as Optuna does,
and setup logs a warning naming those decisions; a space with fewer than two ranges is random
search under CMA-ES (choose ``tpe``, ``gp`` or ``auto`` there). Its cost per ask is tiny and
does not grow with the history. Pure (numpy and ``cmaes``, imported at setup).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError
from nasforge.strategy._optuna import OptunaStrategy, check_count
from nasforge.strategy.base import register_strategy

if TYPE_CHECKING:  # optuna is imported at setup, not at import
    from optuna.samplers import BaseSampler

__all__ = ["CMAESStrategy", "cmaes_sampler"]

log = logging.getLogger("nasforge.strategy")

#: the restart rules Optuna's CmaEsSampler takes (None: no restart)
_RESTARTS = (None, "ipop", "bipop")


@register_strategy("cmaes", "cma_es", "cma")
class CMAESStrategy(OptunaStrategy):
    """Returns architectures proposed by Optuna's CMA-ES sampler, seeded, never one already
    seen.

    Arguments: ``sigma0`` the initial step size (default: a sixth of the narrowest range, in
    the scaled space); ``popsize`` points per generation (default ``4 + 3 ln(dimensions)``);
    ``restart`` ``"ipop"`` or ``"bipop"`` to restart with a growing population once a
    generation converges (None: no restart); ``n_startup_trials`` random trials first;
    ``n_resamples`` how many times CMA-ES is asked again after proposing a seen architecture.

    Invariants: as every Optuna-backed strategy (:class:`~nasforge.strategy._optuna.
    OptunaStrategy`); listed decisions are drawn at random.

    Raises:
        ConfigError: bad arguments; (at setup) the ``cmaes`` package is not installed.
    """

    requires = (("cmaes", "cmaes"),)

    def __init__(
        self,
        seed: int = 0,
        sigma0: float | None = None,
        popsize: int | None = None,
        restart: str | None = None,
        n_startup_trials: int = 1,
        n_resamples: int = 0,
    ) -> None:
        super().__init__(seed, n_resamples)
        if sigma0 is not None and (
            isinstance(sigma0, bool) or not isinstance(sigma0, (int, float)) or not sigma0 > 0
        ):
            raise ConfigError(f"sigma0 must be a positive number or None, got {sigma0!r}")
        if popsize is not None:
            check_count("popsize", popsize, 2)
        if restart not in _RESTARTS:
            raise ConfigError(f"restart must be one of {list(_RESTARTS)}, got {restart!r}")
        self.sigma0 = None if sigma0 is None else float(sigma0)
        self.popsize = popsize
        self.restart = restart
        self.n_startup_trials = check_count("n_startup_trials", n_startup_trials, 0)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        out: dict[str, Any] = {
            "seed": self.seed,
            "sigma0": self.sigma0,
            "popsize": self.popsize,
            "restart": self.restart,
            "n_startup_trials": self.n_startup_trials,
        }
        if self.n_resamples:
            out["n_resamples"] = self.n_resamples
        return out

    def _sampler(self, optuna: Any) -> BaseSampler:
        """Returns Optuna's CMA-ES sampler with this strategy's seed and settings; logs the
        listed decisions it draws at random."""
        listed = [d.label for d in self.space.decisions if d.domain is None]
        if listed:
            log.warning(
                "cmaes models numeric ranges only: %d listed decision(s) %s are drawn at "
                "random (the 'auto' or 'tpe' strategy models them)",
                len(listed),
                listed[:5] + (["..."] if len(listed) > 5 else []),
            )
        return cmaes_sampler(
            optuna, self.seed, self.sigma0, self.popsize, self.restart, self.n_startup_trials
        )


def cmaes_sampler(
    optuna: Any,
    seed: int,
    sigma0: float | None = None,
    popsize: int | None = None,
    restart: str | None = None,
    n_startup_trials: int = 1,
) -> BaseSampler:
    """Returns a seeded Optuna ``CmaEsSampler`` whose draws of listed decisions come from a
    seeded ``RandomSampler`` (``auto`` builds the same one)."""
    return optuna.samplers.CmaEsSampler(  # type: ignore[no-any-return]
        seed=seed,
        sigma0=sigma0,
        popsize=popsize,
        restart_strategy=restart,
        n_startup_trials=n_startup_trials,
        independent_sampler=optuna.samplers.RandomSampler(seed=seed),
        warn_independent_sampling=False,
    )
