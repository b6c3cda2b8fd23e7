"""The shared floor of nasforge: the one run record and the one way in.

Every kind of search is a *runner* (:mod:`~nasforge.run.runner`) registered by kind, that
writes the same run record (:mod:`~nasforge.run.store`: config, progress rows, trials, events,
artifacts) with one writer per run directory (:mod:`~nasforge.run.lock`). Run files
(:mod:`~nasforge.run.files`), export and ``load_model`` (:mod:`~nasforge.run.export`), status
(:mod:`~nasforge.run.status`), plots (:mod:`~nasforge.run.plot`) and the shared commands
(:mod:`~nasforge.run.cli`) read that record and never ask which kind wrote it.

This package imports none of the families (engine, oneshot, ofa, parallel); they import it.
"""

from nasforge.run.export import export_top, load_model
from nasforge.run.results import pareto_front, rank_trials
from nasforge.run.runner import (
    BaseRunner,
    Objective,
    get_runner,
    list_runners,
    register_runner,
    runner_for_strategy,
)
from nasforge.run.store import Store, TrialRecord

__all__ = [
    "BaseRunner",
    "Objective",
    "Store",
    "TrialRecord",
    "export_top",
    "get_runner",
    "list_runners",
    "load_model",
    "pareto_front",
    "rank_trials",
    "register_runner",
    "runner_for_strategy",
]
