"""Small real run records for the dashboard's unit tests, written through the Store."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nasforge.run.records import TrialOutcome
from nasforge.run.store import Store

__all__ = ["make_record", "hostile_run", "add_wide_trial", "SECRET"]

#: what the secret file of a hostile run's neighbour holds (a file of the server's user)
SECRET = "NASFORGE_TOKEN=the-server-s-own-secret"


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


def hostile_run(base: Path, logs: Sequence[str]) -> Path:
    """Returns ``base/runs/hostile``, a finished record whose ``logs/`` holds what a neighbour
    who can write the folder may leave, trial by trial in the order of ``logs``: ``secret``
    (a link to ``base/env``, a file holding :data:`SECRET`), ``zero`` (a link to
    ``/dev/zero``), ``fifo`` (a FIFO no one writes) or ``honest`` (a regular log)."""
    (base / "env").write_text(SECRET + "\n")
    run = base / "runs" / "hostile"
    make_record(run, n=len(logs))
    folder = run / "logs"
    folder.mkdir()
    for trial, what in enumerate(logs, 1):
        log = folder / f"trial_{trial}.log"
        if what == "secret":
            os.symlink(base / "env", log)
        elif what == "zero":
            os.symlink("/dev/zero", log)
        elif what == "fifo":
            os.mkfifo(log)
        else:
            log.write_text("an honest log\n")
    return run


def add_wide_trial(directory: Path, n_metrics: int) -> int:
    """Returns the id of a finished trial of ``accuracy`` and ``n_metrics`` more metrics,
    added to the finished run in ``directory`` (as a record made before the metric cap, or by
    hand, may hold)."""
    metrics = {"accuracy": 0.9, **{f"metric_{i:06d}": float(i) for i in range(n_metrics)}}
    with Store.open(directory, readonly=False) as store:
        tid = store.add_trial("wide", {"op": "conv", "width": 8})
        store.finish_trial(tid, TrialOutcome("done", metrics))
        store.finish()
    return tid
