"""Tabular benchmarks through the normal evaluator interface: a trial "trains" an architecture
by looking its real, precomputed results up in a table, so thousands of trials cost nothing.

NAS-Bench-Macro (Su et al. 2021): 6,561 CIFAR-10 CNNs, 8 layers with 3 choices each (0 = skip,
1 = MobileNetV2 block with kernel 3, 2 = kernel 5 ... see the dataset's README), encoded as an
8-digit string. Each entry has three test accuracies, their mean, params and FLOPs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nasforge.engine.evaluator import BaseEvaluator, Report
from nasforge.errors import ConfigError
from nasforge.space.search_space import Decision, SearchSpace

__all__ = ["TabularEvaluator", "NasBenchMacro", "load_nas_bench_macro"]


class TabularEvaluator(BaseEvaluator):
    """Returns the recorded metrics of an architecture from a lookup table.

    ``key`` turns an arch dict into the table's key; ``metric_names`` are the metrics every
    entry of the table has. Invariants: the same architecture always gives the same metrics; an
    architecture missing from the table is a failed trial.
    """

    needs_model = False
    default_metric = "accuracy"

    def __init__(self, table: dict[str, dict[str, float]], key: Any, name: str = "table") -> None:
        self.table, self.key, self.name = table, key, name
        rows = [set(m) for m in table.values()]
        self.metric_names = tuple(sorted(set.intersection(*rows))) if rows else None

    def evaluate(self, space: Any, arch: dict[str, Any], report: Report) -> dict[str, float]:
        """Returns the table's metrics for ``arch``."""
        k = self.key(arch)
        if k not in self.table:
            raise KeyError(f"architecture {arch} (key {k!r}) is not in the {self.name} table")
        return dict(self.table[k])

    def config(self) -> dict[str, Any]:
        """Returns plain data naming the table."""
        return {"type": "tabular", "name": self.name, "size": len(self.table)}


class NasBenchMacro:
    """Returns NAS-Bench-Macro's search space and tabular evaluator.

    Metrics: ``accuracy`` (mean of 3 CIFAR-10 test accuracies, %), ``params``, ``flops``.

    Raises:
        ConfigError: the file is missing or not NAS-Bench-Macro JSON.
    """

    n_layers = 8
    choices = (0, 1, 2)

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(
                f"NAS-Bench-Macro file {path} not found; pass the path of "
                "nas-bench-macro_cifar10.json (1.2 MB, not shipped with nasforge: download it "
                "from https://github.com/xiusu/NAS-Bench-Macro)"
            )
        try:
            raw = json.loads(path.read_text())
            self.table = {
                k: {
                    "accuracy": float(v["mean_acc"]),
                    "params": float(v["params"]),
                    "flops": float(v["flops"]),
                }
                for k, v in raw.items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{path} is not NAS-Bench-Macro JSON: {exc}") from exc
        if not self.table or any(len(k) != self.n_layers for k in self.table):
            raise ConfigError(f"{path}: keys must be {self.n_layers}-digit strings")

    def search_space(self) -> SearchSpace:
        """Returns the space: labels ``layer_0`` .. ``layer_7``, candidates 0, 1, 2."""
        return SearchSpace(
            [Decision(f"layer_{i}", "value", self.choices) for i in range(self.n_layers)]
        )

    @staticmethod
    def key(arch: dict[str, Any]) -> str:
        """Returns the table key (8-digit string) of an architecture."""
        return "".join(str(arch[f"layer_{i}"]) for i in range(NasBenchMacro.n_layers))

    def evaluator(self) -> TabularEvaluator:
        """Returns the tabular evaluator over this table."""
        return TabularEvaluator(self.table, self.key, "nas-bench-macro")

    def best(self) -> tuple[str, float]:
        """Returns the key and accuracy of the best architecture in the table."""
        k = max(self.table, key=lambda k: self.table[k]["accuracy"])
        return k, self.table[k]["accuracy"]


def load_nas_bench_macro(path: str | Path) -> NasBenchMacro:
    """Returns the NAS-Bench-Macro benchmark read from ``path``."""
    return NasBenchMacro(path)
