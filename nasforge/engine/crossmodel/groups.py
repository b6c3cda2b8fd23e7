"""Operator batching applied by the engine: trials of the built-in classification evaluator
(its training recipe is plain data: epochs, batch size, optimizer, learning rate, seed, data)
over a space with a frozen prefix are run in groups, the group's models trained merged
(:class:`~nasforge.engine.crossmodel.opbatch.MergedModels`), each trial's result recorded as if
it had run alone.

A merged group reproduces :class:`~nasforge.engine.classification.ClassificationEvaluator`'s
loop: each model frozen after ``torch.manual_seed(seed)``, one shuffled training loader seeded
``seed`` (so every model of the group sees the same batches in the same order), the recipe's
optimizer element-wise over the stacked weights, validation accuracy reported after each epoch.

Invariants: every trial of a group gets one result; a group that cannot be merged (or whose
merged training raises) runs its trials one by one, recorded as a fall-back; in the first
group of three or more, one trial runs alone and the others merged, and the faster way per
trial is kept (an introspective policy).
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

import torch

from nasforge.engine.crossmodel.opbatch import MergedModels, find_prefix
from nasforge.engine.crossmodel.policy import Introspection
from nasforge.engine.executor import BaseExecutor
from nasforge.engine.trial import TrialResult, TrialTask, run_trial, save_weights
from nasforge.runtime.devices import placed, resolve_device, trial_placement

__all__ = ["GroupExecutor", "mergeable_recipe", "has_frozen_prefix"]

log = logging.getLogger("nasforge.engine.crossmodel")


def mergeable_recipe(evaluator: Any) -> dict[str, Any] | None:
    """Returns the evaluator's training recipe when the engine can merge its trials (the
    built-in classification evaluator, described by its plain-data ``config()``), else None."""
    cfg = evaluator.config() if hasattr(evaluator, "config") else {}
    if cfg.get("type") != "classification" or not hasattr(evaluator, "splits"):
        return None
    return cfg


def has_frozen_prefix(space: Any, recipe: dict[str, Any], n: int = 2) -> bool:
    """Returns whether ``n`` architectures of ``space`` drawn with the recipe's seed, frozen as
    the evaluator freezes them, share a frozen prefix (the global random state is kept)."""
    import random

    from nasforge.space import freeze

    if not hasattr(space, "freeze"):
        return False
    if any(d.label in ("lr", "weight_decay") for d in space.search_space().ranges):
        return False  # trials train with their own optimizer settings, not one merged optimizer
    rng = random.Random(recipe["seed"])
    archs = [space.search_space().sample(rng) for _ in range(n)]
    # devices=[]: fork_rng's default saves every GPU's generator, which initialises CUDA in the
    # engine's process, and forked GPU trial workers then cannot use their GPUs
    with torch.random.fork_rng(devices=[]):
        models = []
        for a in archs:
            torch.manual_seed(recipe["seed"])
            models.append(freeze(space, a))
    return find_prefix(models) > 0


def _optimizer(recipe: dict[str, Any]) -> Any:
    make = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
    kwargs: dict[str, Any] = {"lr": recipe["lr"], "weight_decay": recipe["weight_decay"]}
    if recipe["optimizer"] == "sgd":
        kwargs["momentum"] = 0.9
    return lambda params: make[recipe["optimizer"]](params, **kwargs)


def run_merged(space: Any, evaluator: Any, tasks: list[TrialTask]) -> list[TrialResult]:
    """Returns one result per task after training the tasks' models merged.

    Raises:
        MergeError: the models share no frozen prefix or cannot be split.
    """
    from torch.utils.data import DataLoader

    from nasforge.space import freeze

    r = evaluator.config()
    device = resolve_device(r["device"])  # None: the trial's device, as the evaluator does
    start = time.perf_counter()
    models = []
    for t in tasks:
        torch.manual_seed(r["seed"])
        models.append(freeze(space, t.arch).to(device))
    s = evaluator.splits()
    gen = torch.Generator().manual_seed(r["seed"])
    train = DataLoader(s.train, r["batch_size"], shuffle=True, generator=gen)
    example = next(iter(DataLoader(s.train, 4)))[0].to(device)
    merged = MergedModels(models, _optimizer(r), example=example)

    def accuracies(data: Any) -> list[float]:
        correct, total = [0] * len(models), 0
        for x, y in DataLoader(data, 256):
            correct = [a + b for a, b in zip(correct, merged.correct(x.to(device), y.to(device)))]
            total += len(y)
        return [c / max(1, total) for c in correct]

    intermediates: list[list[dict[str, float]]] = [[] for _ in tasks]
    acc = [0.0] * len(tasks)
    for _ in range(r["epochs"]):
        for x, y in train:
            merged.step(x.to(device), y.to(device))
        acc = accuracies(s.val)
        for i, a in enumerate(acc):
            intermediates[i].append({"accuracy": a})
    test = accuracies(s.test)
    seconds = (time.perf_counter() - start) / len(tasks)
    out = []
    for i, (t, m) in enumerate(zip(tasks, merged.unstack())):
        metrics = {
            "accuracy": acc[i],
            "test_accuracy": test[i],
            "params": float(sum(p.numel() for p in m.parameters())),
            "train_seconds": seconds,
        }
        res = TrialResult(t.trial, "done", metrics, intermediates[i], duration=seconds)
        where = trial_placement()
        res.placement = None if where is None else where.to_dict()
        if t.checkpoint:
            res.checkpoint = save_weights(m, t.checkpoint)
        out.append(res)
    return out


class GroupExecutor(BaseExecutor):
    """Returns results of trials run in-process in groups of up to ``group_size``: in the
    first group of three or more, one trial alone and the rest merged, then the faster way
    (``introspection=None``: always merged).

    Invariants: each submitted task yields exactly one result; a failed merge falls back to one
    by one for that group and is recorded.
    """

    name = "groups"

    def __init__(self, group_size: int, introspection: Introspection | None, record: Any) -> None:
        self.concurrency = group_size
        self.intro, self.record = introspection, record
        self._pending: list[TrialTask] = []
        self._done: collections.deque[TrialResult] = collections.deque()
        self._verdict_recorded = False

    @property
    def n_running(self) -> int:
        """Returns the number of submitted trials not yet polled."""
        return len(self._pending) + len(self._done)

    def submit(self, task: TrialTask) -> None:
        """Queues the trial for the next group."""
        self._pending.append(task)

    def _alone(self, tasks: list[TrialTask]) -> list[TrialResult]:
        return [run_trial(self._space, self._evaluator, t) for t in tasks]

    def poll(self, timeout: float) -> list[TrialResult]:
        """Runs the queued group (merged or one by one) and returns every finished result."""
        tasks, self._pending = self._pending, []
        with placed(self.local_placement()):  # merged or alone, on the configured devices
            self._poll(tasks)
        out = list(self._done)
        self._done.clear()
        return out

    def _poll(self, tasks: list[TrialTask]) -> None:
        if self.intro is not None and not self.intro.decided() and len(tasks) >= 3:
            # measure both ways on this group: its first trial alone, the rest merged
            self._run(tasks[:1], "independent")
            self._run(tasks[1:], "merged")
        elif tasks:
            merge = self.intro is None or self.intro.choice() == "merged"
            self._run(tasks, "merged" if merge and len(tasks) >= 2 else "independent")

    def _run(self, tasks: list[TrialTask], way: str) -> None:
        t = time.perf_counter()
        if way == "merged":
            try:
                results = run_merged(self._space, self._evaluator, tasks)
            except Exception as exc:  # noqa: BLE001 - a merge failure means: run alone
                ids = [x.trial for x in tasks]
                why = f"{type(exc).__name__}: {exc}"
                self.record("fell_back", "opbatch", f"trials {ids}: {why}; run one by one")
                results, way = self._alone(tasks), "fell_back"
        else:
            results = self._alone(tasks)
        self._done.extend(results)
        self._measured(way, (time.perf_counter() - t) / len(tasks), tasks)

    def _measured(self, way: str, seconds: float, tasks: list[TrialTask]) -> None:
        if self.intro is None or self.intro.decided() or way == "fell_back":
            return
        self.intro.add(way, seconds)
        self.record("measured", "opbatch", f"{len(tasks)} trials {way}", seconds_per_trial=seconds)
        if self.intro.decided() and not self._verdict_recorded:
            self._verdict_recorded = True
            sp = self.intro.speedup()
            verdict = "kept" if self.intro.choice() == "merged" else "reverted"
            self.record(verdict, "opbatch", f"merged is {sp:.2f}x one by one", speedup=sp)
