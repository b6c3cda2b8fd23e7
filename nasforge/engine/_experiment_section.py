"""The run-file side of :class:`~nasforge.engine.experiment.Experiment`: the arguments it is
built from (a run file's settings or a stored config section), and what its record keeps of
the evaluator so that a resume can rebuild it.

    settings   a run file's mapping (``space`` — a reference, or a mapping label -> list of
               values, ``{uniform: [low, high], log: true}`` or ``{integer: [low, high]}`` —
               and ``evaluator`` or ``evaluate``, or
               ``benchmark: {nas_bench_macro: path}``; ``strategy`` a name, mapping or object;
               any other ``Experiment`` argument) or a stored section (it also holds
               ``search_space``, kept for the resume check)
    evaluator  in a run file: an object, a function, or ``{type: classification, ...}``; in
               the record: a reference that rebuilds it, else ``{unrebuildable: description}``
    section    what the record keeps of an experiment's settings (:func:`stored_section`),
               and of the executor once it started (:func:`record_executor`)
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nasforge.engine._executor_base import BaseExecutor
from nasforge.engine.evaluator import BaseEvaluator, FunctionEvaluator
from nasforge.errors import ConfigError
from nasforge.run.refs import from_ref, materialize
from nasforge.run.requests import BOUND_META
from nasforge.run.runner import Objective, find_ref
from nasforge.run.store import Store
from nasforge.space.search_space import SearchSpace
from nasforge.strategy import (
    BaseStrategy,
    GridStrategy,
    default_strategy,
    get_stopper,
    get_strategy,
)

__all__ = []  # internal: used by nasforge.engine.experiment

log = logging.getLogger("nasforge.run")


def experiment_arguments(
    settings: Any, base: Path | None, overrides: dict[str, Any]
) -> tuple[Any, Any, Any, dict[str, Any]]:
    """Returns ``(space, evaluator, strategy, keyword arguments)`` for ``Experiment`` from a
    run file's settings or a stored section, with ``overrides`` replacing settings. A recorded
    ``objective`` (a resume) gives the metric, mode, constraints and second objective, over
    any a run file read again gives.

    Raises:
        ConfigError: a missing space or evaluator, a bad reference or setting.
    """
    s = dict(settings)
    objective = s.pop("objective", None)
    if objective is not None:  # the record's: it wins over a run file's copies, read again
        s.update(metric=objective.metric, mode=objective.mode,
                 constraints=objective.constraints, second_objective=objective.second)  # fmt: skip
    s.update(overrides)
    if "search_space" in s:  # a stored section; one without the setting kept every file
        s.setdefault("keep_checkpoints", None)
    s.pop("search_space", None)  # stored for the resume check; the space rebuilds it
    data = s.pop("data", None)
    if isinstance(data, (str, dict, list)):
        raise ConfigError(
            f"`data` ({data!r:.80}) is not a setting of a multi-trial run: give the data "
            "to the evaluator, e.g. evaluator: {type: classification, data: digits}"
        )  # a Python run file's own `data` object is the script's business: ignored
    bench = s.pop("benchmark", None)
    if bench:
        from nasforge.engine.tabular import NasBenchMacro

        where = base or Path.cwd()
        b = NasBenchMacro((where / bench["nas_bench_macro"]).resolve())
        s["space"], s["evaluator"] = b.search_space(), b.evaluator()
    evaluator = s.pop("evaluator", None) or s.pop("evaluate", None)
    if "space" not in s or evaluator is None:
        raise ConfigError(
            "a multi-trial run needs `space` and `evaluator` (or a function `evaluate`, or "
            "`benchmark`); see docs/engine.md. (Resuming a run started from Python whose "
            "space could not be recorded by class and arguments? Resume it from Python.)"
        )
    space = materialize(s.pop("space"), base)
    if isinstance(space, dict):  # a run file's labels -> candidates or ranges
        space = SearchSpace.from_spec(space)
    if isinstance(evaluator, dict) and "unrebuildable" in evaluator:
        raise ConfigError(
            f"this run was started from Python with an evaluator that cannot be found again "
            f"({evaluator['unrebuildable']}); resume it from Python with the same "
            "Experiment(...).resume(), or define the evaluator at module level of a file"
        )
    evaluator = evaluator_from(materialize(evaluator, base))
    strategy = s.pop("strategy", None)
    if strategy is None:  # auto where the space has ranges; evolution, as before, where not
        strategy = default_strategy(checked_space(space), "evolution")
    if isinstance(strategy, dict):
        strategy = dict(strategy)
        name = strategy.pop("name", None)
        strategy = get_strategy(name, **strategy.pop("config", {}), **strategy)
    s["stopper"] = get_stopper(s.get("stopper"))  # a record without `rule`: the median
    return space, evaluator, strategy, s


def add_arguments(parser: argparse._ActionsContainer) -> None:
    """Returns None after adding the multi-trial kind's flags of ``nasforge run`` and
    ``resume``: its budget and where its trials run (each overrides the setting of its
    name; ``nasforge resume DIR --n-trials 100`` extends a finished search)."""
    parser.add_argument("--n-trials", type=int, help="trials to train (multi-trial; overrides)")
    parser.add_argument("--time-budget", type=float, help="seconds (multi-trial; overrides)")
    parser.add_argument("--executor", choices=["pool", "inprocess", "ray"], help="where trials run")
    parser.add_argument("--concurrency", type=int, help="parallel trials of the pool executor")


def evaluator_from(spec: Any) -> Any:
    """Returns an evaluator from a run file's value: an object or function passes through, a
    mapping ``{type: classification, ...}`` builds the built-in classification evaluator.

    Raises:
        ConfigError: a mapping whose ``type`` is not ``classification``.
    """
    if isinstance(spec, dict):
        spec = dict(spec)
        kind = spec.pop("type", None)
        if kind == "classification":
            from nasforge.engine.classification import ClassificationEvaluator

            return ClassificationEvaluator(**spec)
        raise ConfigError(
            f"evaluator type {kind!r} is unknown; use 'classification' or a 'module:function' "
            "reference"
        )
    return spec


def evaluator_ref(evaluator: BaseEvaluator) -> Any:
    """Returns what the record keeps of an evaluator: a reference that rebuilds it when one
    exists (a module-level function, a script's global, a built-in evaluator's settings), else
    its description (a run started from Python with such an evaluator cannot be resumed from
    the command line)."""
    target = evaluator.fn if isinstance(evaluator, FunctionEvaluator) else evaluator
    described = evaluator.config()
    if described.get("type") == "classification" and described.get("rebuildable"):
        return {k: v for k, v in described.items() if k != "rebuildable"}
    ref = find_ref(target)
    return ref if ref is not None else {"unrebuildable": described}


def stored_section(exp: Any) -> dict[str, Any]:
    """Returns an :class:`~nasforge.engine.experiment.Experiment`'s settings as JSON-able
    data: the section of the run's config a resume rebuilds it from."""
    s = exp.settings
    return {
        "search_space": exp.search_space.to_dict(),
        "strategy": {"name": exp.strategy.name, "config": exp.strategy.config()},
        "evaluator": evaluator_ref(exp.evaluator),
        "n_trials": s.n_trials,
        "time_budget": s.time_budget,
        "executor": exp.executor.spec(),
        "concurrency": exp.executor.concurrency,
        "trial_timeout": s.trial_timeout,
        "stopper": None if exp.stopper is None else exp.stopper.config(),
        "retrain_duplicates": s.retrain_duplicates,
        "save_weights": s.save_weights,
        "keep_checkpoints": s.keep_checkpoints,
        "max_duplicates": s.max_duplicates,
        "threads": s.threads,
        "crossmodel": s.crossmodel,
        "gpus_per_trial": s.gpus_per_trial,
        "devices": s.devices,
    }


def record_executor(store: Store, kind: str, own: BaseExecutor, running: BaseExecutor) -> None:
    """Records the settings of the run's executor ``own`` once it started (e.g. the address
    of the Ray cluster it joined), so that a resume from the record runs on the same one, and
    the most trials the ``running`` executor (``own``, or the cross-model plan's in front of
    it) runs at once here (``nasforge set`` refuses more)."""
    most = running.most_concurrency()
    bound = {"most": most, "why": running.concurrency_limit()} if most else {}
    store.set_meta(BOUND_META, json.dumps(bound))
    config = dict(store.config())
    section = dict(config[kind])
    if section.get("executor") != own.spec():
        section["executor"] = own.spec()
        store.set_config({**config, kind: section})


def checked_space(space: Any) -> SearchSpace:
    """Returns the search space of ``space`` (a ModelSpace or a SearchSpace).

    Raises:
        ConfigError: it is neither, or it has no decisions.
    """
    if hasattr(space, "search_space"):
        ss = space.search_space()
    elif isinstance(space, SearchSpace):
        ss = space
    else:
        raise ConfigError(
            f"space must be a nasforge ModelSpace or SearchSpace, got {type(space).__name__}"
        )
    if len(ss) == 0:
        raise ConfigError(
            f"the space {type(space).__name__} has no decisions, so there is nothing to "
            "search; add nf.choice / LayerChoice / InputChoice / Repeat to it"
        )
    return ss


def check_budget(n_trials: Any, time_budget: Any, strategy: BaseStrategy) -> None:
    """Returns None when there is a budget (a trial count, a time, or both; each checked by
    :meth:`~nasforge.engine.settings.ExperimentSettings.check`) or the strategy is a grid,
    which may go without one (it ends when its points do).

    Raises:
        ConfigError: no budget for a strategy that needs one.
    """
    if n_trials is None and time_budget is None and not isinstance(strategy, GridStrategy):
        raise ConfigError("give a budget: n_trials=..., time_budget=... (seconds), or both")


def named_metrics(objective: Objective) -> dict[str, str]:
    """Returns metric name -> the setting that names it (the optimised metric first)."""
    named = {objective.metric: "metric"}
    for name in objective.constraints:
        named.setdefault(name, "constraints")
    if objective.second is not None:
        named.setdefault(objective.second[0], "second_objective")
    return named


def recorded_validation(section: Mapping[str, Any], limit: int) -> tuple[Any, str] | None:
    """Returns ``((inputs, labels), where they come from)``: at most ``limit`` samples of the
    validation split of the built-in classification evaluator a multi-trial run's config
    ``section`` records (its settings, or a reference to a script's or module's evaluator
    object), or None for another evaluator or one that cannot be rebuilt (logged)."""
    import torch

    ref = section.get("evaluator")
    if not isinstance(ref, Mapping):
        return None
    built, name = _recorded(ref)
    if built is None:
        return None
    val = built.splits().val
    xs, ys = zip(*(val[i] for i in range(min(len(val), limit))), strict=True)
    data = (torch.stack(list(xs)), torch.as_tensor([int(v) for v in ys]))
    return data, f"the validation split of the run's evaluator {name}"


def _recorded(ref: Mapping[str, Any]) -> tuple[Any, str]:
    """Returns the classification evaluator an evaluator record rebuilds and its name, or
    (None, "")."""
    if ref.get("type") == "classification":
        return evaluator_from(dict(ref)), f"(data {ref.get('data')!r})"
    if "object" not in ref:
        return None, ""
    from nasforge.engine.classification import ClassificationEvaluator

    try:
        built = from_ref(dict(ref))
    except Exception as exc:  # the int8 report falls back to the output difference
        log.warning("the run's evaluator %s cannot be rebuilt (%s)", ref["object"], exc)
        return None, ""
    name = str(ref["object"])
    if "file" in ref:  # a script's global: __main__:evaluator names it as the script's
        name = f"{Path(str(ref['file'])).name}:{name.rsplit(':', 1)[-1]}"
    return (built, name) if isinstance(built, ClassificationEvaluator) else (None, "")
