"""Small real run records for the dashboard's unit tests, written through the Store."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from nasforge.run.records import TrialOutcome
from nasforge.run.store import Store

__all__ = ["make_record"]


def make_record(
    directory: Path,
    n: int = 30,
    seed: int = 0,
    progress: list[dict[str, Any]] | None = None,
    finish: bool = True,
) -> Store | None:
    """Returns None after writing a finished multi-trial-shaped run of ``n`` trials (every
    fifth failed, every seventh cached), or the open writer when ``finish`` is False."""
    rng = random.Random(seed)
    config = {
        "kind": "multitrial",
        "space": None,
        "source": None,
        "objective": {"metric": "accuracy", "mode": "max", "constraints": {}, "second": None},
        "multitrial": {"strategy": {"name": "random"}},
    }
    store = Store.create(directory, config)
    store.set_plan("trials", n)
    for i, row in enumerate(progress or []):
        store.add_progress(i + 1, row)
    for i in range(1, n + 1):
        arch = {"op": rng.choice(["conv", "pool"]), "width": rng.choice([8, 16, 32])}
        tid = store.add_trial(f"{i:016x}", arch)
        if i % 5 == 0:
            store.finish_trial(tid, TrialOutcome("failed", error="Traceback ...\nValueError: boom"))
            continue
        acc = (0.5 if arch["op"] == "conv" else 0.1) + rng.random() * 0.05
        metrics = {"accuracy": acc, "params": float(arch["width"] * 100)}
        status = "cached" if i % 7 == 0 else "done"
        store.finish_trial(
            tid,
            TrialOutcome(
                status,
                metrics,
                [{"accuracy": acc / 2}, {"accuracy": acc}],
                duration=float(i),
                cached_from=1 if status == "cached" else None,
            ),
        )
    if not finish:
        return store
    store.finish()
    store.close()
    return None
