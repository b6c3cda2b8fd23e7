"""Moved to ``nasforge.run.results`` (ranking a run"s trials). This module re-exports its names for
code written against nasforge 0.1 and warns: import them from ``nasforge.run.results``."""

import warnings

from nasforge.run.results import feasible, pareto_front, parse_constraints, rank_trials, score

__all__ = ["feasible", "pareto_front", "parse_constraints", "rank_trials", "score"]

warnings.warn(
    "nasforge.engine.results moved to nasforge.run.results; import from there",
    DeprecationWarning,
    stacklevel=2,
)
