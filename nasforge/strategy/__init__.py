"""Exploration strategies (ask/tell on plain architecture dicts and float metrics) and trial
stoppers (``median``, ``sh``, ``asha``, ``hyperband``: ``get_stopper``). Pure: nothing here
imports torch.

``get_strategy("evolution", population_size=20, seed=0)`` builds one by name; names:
``random``, ``grid``, ``evolution``, ``tpe``, ``gp`` (Gaussian-process Bayesian optimisation),
``cmaes`` (CMA-ES), ``auto`` (a model chosen by the space and the budget: the default for
spaces with ranges, :func:`default_strategy`), ``rl``, ``edit_rl`` (a policy over edits, for
spaces that grow by edits: ``nasforge.space.edits``; ``evolution`` and ``random`` search
those too).
"""

from nasforge.strategy.auto import AutoStrategy
from nasforge.strategy.base import (
    BaseStrategy,
    default_strategy,
    get_strategy,
    list_strategies,
    register_strategy,
)
from nasforge.strategy.cmaes import CMAESStrategy
from nasforge.strategy.edits import EditPolicy
from nasforge.strategy.evolution import RegularizedEvolution
from nasforge.strategy.gp import GPStrategy
from nasforge.strategy.halving import ASHAStopper, HyperbandStopper, SuccessiveHalvingStopper
from nasforge.strategy.random_search import GridStrategy, RandomStrategy
from nasforge.strategy.reinforce import ReinforceStrategy
from nasforge.strategy.stopping import (
    BaseStopper,
    MedianStopper,
    get_stopper,
    list_stoppers,
    register_stopper,
    should_stop,
)
from nasforge.strategy.tpe import TPEStrategy

__all__ = [
    "ASHAStopper",
    "AutoStrategy",
    "CMAESStrategy",
    "GPStrategy",
    "default_strategy",
    "BaseStopper",
    "BaseStrategy",
    "EditPolicy",
    "HyperbandStopper",
    "SuccessiveHalvingStopper",
    "get_stopper",
    "list_stoppers",
    "register_stopper",
    "GridStrategy",
    "MedianStopper",
    "RandomStrategy",
    "RegularizedEvolution",
    "ReinforceStrategy",
    "TPEStrategy",
    "get_strategy",
    "list_strategies",
    "register_strategy",
    "should_stop",
]
