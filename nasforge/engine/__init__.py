"""The multi-trial family: experiments that ask a strategy for architectures, run them as
trials on an executor (in-process, process pool, Ray), and record everything in a run record.

``Experiment`` is the ``multitrial`` kind of run (see :mod:`nasforge.run`).
"""

from nasforge.engine.evaluator import BaseEvaluator, FunctionEvaluator, get_evaluator
from nasforge.engine.executor import (
    BaseExecutor,
    InProcessExecutor,
    ProcessPoolExecutor,
    get_executor,
)
from nasforge.engine.experiment import Experiment
from nasforge.engine.settings import ExperimentSettings
from nasforge.engine.trial import TrialResult, TrialTask
from nasforge.run.results import pareto_front, rank_trials
from nasforge.run.store import Store, TrialRecord

__all__ = [
    "BaseEvaluator",
    "BaseExecutor",
    "Experiment",
    "ExperimentSettings",
    "FunctionEvaluator",
    "InProcessExecutor",
    "ProcessPoolExecutor",
    "Store",
    "TrialRecord",
    "TrialResult",
    "TrialTask",
    "get_evaluator",
    "get_executor",
    "pareto_front",
    "rank_trials",
]
