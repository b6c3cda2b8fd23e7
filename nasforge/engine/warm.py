"""Warm workers: what every trial would otherwise import or build again, done once per
process that runs trials.

A trial's first optimizer imports torch's optimizer machinery (``torch._dynamo``, seconds in
a fresh process); a data set the evaluator loads lazily would be read again in each fresh
process. :func:`warm_up` does both once, where the trials come from:

    pool       in the engine's process, before the first child forks: every child inherits
               the loaded modules and data (copy-on-write) and still runs exactly one trial,
               so a crash, a memory limit or a timeout still fails that trial only
    ray        once in each Ray worker process, before its first trial (Ray reuses workers
               for trial after trial)
    inprocess  nothing to do: the engine's process pays each import once anyway

Warming never initialises CUDA (forked children could not use their GPUs then) and never
imports torch when the run has not; torch's optimizer machinery is warmed only for a model
space (a space of plain data, such as a tabular benchmark's, may train nothing).
"""

from __future__ import annotations

import io
import logging
import sys
import time
from typing import Any

__all__ = ["warm_up", "warm_torch"]

log = logging.getLogger("nasforge.engine")

_TORCH_WARM = False


def warm_torch() -> float:
    """Returns the seconds spent importing and exercising, once per process, what a trial's
    first optimizer step, data loader and weight save would import (0.0 when already done or
    when torch is not loaded)."""
    global _TORCH_WARM
    torch = sys.modules.get("torch")
    if _TORCH_WARM or torch is None:
        return 0.0
    start = time.perf_counter()
    from torch.utils.data import DataLoader, TensorDataset

    layer = torch.nn.Linear(2, 1)
    data = DataLoader(TensorDataset(torch.zeros(2, 2), torch.zeros(2, 1)), batch_size=2)
    for make in (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD):
        opt = make(layer.parameters(), lr=1e-3)
        for x, y in data:
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(layer(x), y).backward()
            opt.step()
    torch.save(layer.state_dict(), io.BytesIO())
    _TORCH_WARM = True
    return time.perf_counter() - start


def warm_up(space: Any, evaluator: Any, optimizers: bool = True) -> float:
    """Returns the seconds spent preparing this process to run trials of ``evaluator`` on
    ``space``: the evaluator's :meth:`~nasforge.engine.evaluator.BaseEvaluator.prepare` (its
    data, loaded once), then :func:`warm_torch` unless ``optimizers`` is False. The pool
    passes False when its forked children take GPUs: on a CUDA machine a first optimizer step
    initialises CUDA, which forked children then cannot use (measured on an H100: every GPU
    trial failed with "Cannot re-initialize CUDA in forked subprocess").

    Raises:
        whatever the evaluator's ``prepare`` raises (a data set that cannot be loaded fails
        the run before its first trial, not each trial).
    """
    start = time.perf_counter()
    prepare = getattr(evaluator, "prepare", None)
    if callable(prepare):
        prepare(space)
    if optimizers and hasattr(space, "freeze"):  # a plain space may train no model at all
        warm_torch()
    seconds = time.perf_counter() - start
    log.debug("workers warmed in %.2f s", seconds)
    return seconds
