"""Returns a small nasforge 0.1 multi-trial run record (store format 1, ``experiment.db``),
written with nasforge 0.1's own store (``_format1_store``) the way 0.1's ``Experiment`` wrote
one: its config keys, trials done / failed / cached / still running, ask and tell events, the
weight file of the trained trial and one ``records`` row.

``python -m tests.run._format1_record DIR`` writes one into DIR (the docs use it to stand in
for a run recorded by nasforge 0.1).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.run import _format1_store as v1

__all__ = ["build", "ARCH", "config"]

#: the architecture of the trained trial (of ``nasforge.spaces.DigitsCNN()``)
ARCH = {
    "width": 16,
    "depth": 1,
    "stage1.0": "conv3",
    "stage1.1": "conv3",
    "stage1.2": "conv3",
    "stage2": "sep3",
    "skip": 1,
    "dropout": 0.0,
}


def config(space_class: str = "nasforge.spaces.cnn.DigitsCNN") -> dict[str, Any]:
    """Returns the config nasforge 0.1's ``Experiment.config()`` stored (its keys, in 0.1's
    shapes), for a run of ``space_class`` started from Python (no run file)."""
    from nasforge.spaces import DigitsCNN

    return {
        "search_space": DigitsCNN().search_space().to_dict(),
        "strategy": {"name": "random", "config": {"seed": 0}},
        "evaluator": {"type": "function", "function": "mymodule.evaluate"},
        "metric": "accuracy",
        "mode": "max",
        "constraints": {"params": ["<=", 1e6]},
        "second_objective": ["params", "min"],
        "n_trials": 4,
        "time_budget": None,
        "executor": "pool",
        "concurrency": 2,
        "trial_timeout": None,
        "stopper": None,
        "retrain_duplicates": False,
        "source": None,
        "space_class": space_class,
    }


def build(directory: str | Path, space_class: str = "nasforge.spaces.cnn.DigitsCNN") -> Path:
    """Returns ``directory`` after writing a finished-looking 0.1 run there: trial 1 done with
    weights (``checkpoints/trial_1.pt``, stored by absolute path as 0.1 did for an absolute
    directory), 2 failed, 3 cached from 1, 4 asked but never told (in flight when 0.1
    stopped), and one ``records`` row."""
    import torch

    from nasforge.space import freeze
    from nasforge.spaces import DigitsCNN

    directory = Path(directory).resolve()
    store = v1.Store.create(directory, config(space_class))
    try:
        t1 = store.add_trial("a" * 16, ARCH)
        t2 = store.add_trial("b" * 16, {**ARCH, "width": 24})
        ckpt = directory / "checkpoints" / f"trial_{t1}.pt"
        ckpt.parent.mkdir()
        torch.manual_seed(0)
        torch.save(freeze(DigitsCNN(), ARCH).state_dict(), ckpt)  # as 0.1's save_weights did
        store.finish_trial(
            t1, "done", {"accuracy": 0.9, "params": 5e3}, [{"accuracy": 0.9}], None, 2.5,
            str(ckpt),
        )  # fmt: skip
        store.finish_trial(t2, "failed", None, [], "RuntimeError: boom", 0.5, None)
        t3 = store.add_trial("a" * 16, ARCH)
        store.finish_trial(
            t3, "cached", {"accuracy": 0.9, "params": 5e3}, [{"accuracy": 0.9}], None, 0.0,
            str(ckpt), cached_from=t1,
        )  # fmt: skip
        store.add_trial("c" * 16, {**ARCH, "width": 32})  # in flight when 0.1 stopped
        store.add_record("epoch", {"epoch": 1, "loss": 0.5})
        store.set_meta("elapsed", "3.0")
    finally:
        store.close()
    return directory


if __name__ == "__main__":
    sys.stdout.write(f"{build(sys.argv[1])}\n")
