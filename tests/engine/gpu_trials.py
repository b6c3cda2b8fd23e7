"""Helpers of the GPU tests (not a test module): an evaluator that writes down where each
trial ran and what it saw, and the most trials that held one GPU at the same moment."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from nasforge.engine.evaluator import BaseEvaluator
from nasforge.runtime.devices import trial_device, trial_placement
from nasforge.space.search_space import Decision, SearchSpace

__all__ = ["SPACE", "WhereEvaluator", "rows", "most_at_once"]

SPACE = SearchSpace([Decision("x", "value", tuple(range(8)))])


class WhereEvaluator(BaseEvaluator):
    """Returns ``x`` after ``seconds``; writes ``<out>/<x>.json``: the trial's
    ``CUDA_VISIBLE_DEVICES``, its placement's GPU ids, ``trial_device()``, start and end."""

    needs_model = False

    def __init__(self, out: str | Path, seconds: float = 0.4) -> None:
        self.out, self.seconds = str(out), seconds

    def evaluate(self, space: Any, arch: dict[str, Any], report: Any) -> float:
        """Returns x, after writing down where the trial ran."""
        start = time.time()
        time.sleep(self.seconds)
        p = trial_placement()
        row = {
            "x": arch["x"],
            "env": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "devices": None if p is None else list(p.devices),
            "device": str(trial_device()),
            "pid": os.getpid(),
            "start": start,
            "end": time.time(),
        }
        Path(self.out, f"{arch['x']}.json").write_text(json.dumps(row))
        return float(arch["x"])

    def config(self) -> dict[str, Any]:
        """Returns the settings."""
        return {"out": self.out, "seconds": self.seconds}


def rows(out: str | Path) -> list[dict[str, Any]]:
    """Returns what each trial wrote, by x."""
    return sorted((json.loads(f.read_text()) for f in Path(out).glob("*.json")),
                  key=lambda r: r["x"])  # fmt: skip


def most_at_once(trials: list[dict[str, Any]]) -> dict[Any, int]:
    """Returns, per GPU id, the most trials that were running on it at one moment."""
    out: dict[Any, int] = defaultdict(int)
    for t in trials:
        for gpu in t["devices"]:
            on = [u for u in trials if gpu in u["devices"]]
            n = sum(1 for u in on if u["start"] <= t["start"] < u["end"])
            out[gpu] = max(out[gpu], n)
    return dict(out)
