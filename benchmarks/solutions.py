"""Retiarii's remaining solutions (issue 39), measured as users run them: the examples'
searches with their shipped defaults, on the handwritten digits.

Run:  python benchmarks/solutions.py [--parts wann pathlevel] [--quick]

Each part is a function in ``PARTS`` that returns its figures; the last line printed is one
JSON object with a key per part run:

    wann       the best network of examples/wann_digits.py's search (300 networks):
               ``mean_accuracy`` over the shared weights and ``best_shared_weight_accuracy``
               on the test split, its ``connections``; beside them the untrained minimal
               start network (``start_*``: the trivial baseline) and the paper's MNIST
               figures (``paper_mnist_*``; MNIST is not the digits)
    proxylessnas  ``saved_over_standalone``: bytes saved for backward by ProxylessNAS's
               architecture pass over the stand-alone network's (benchmarks/oneshot_memory.py's
               setting; target <= 2.5), beside DARTS's and NASB's (``darts_over_standalone``,
               ``nasb_over_standalone``); ``latency_over_target``: the table latency of the
               pick of a search on the digits with ``latency_target`` = half the unconstrained
               pick's latency, over that target (target <= 1), beside the unconstrained
               pick's (``unconstrained_latency_over_target``, 2 by construction) and the
               supernet's validation accuracy with each pick
    pathlevel  examples/pathlevel_digits.py: the mean test accuracy of the best network of
               the controller's search (``search``) and of random edit sequences with the
               same budget (``random``), over 5 seeds each, and the one-sided Welch t-test's
               ``p`` that the search is better; target p < 0.05
    enas       ``enas_percentile``: the mean over search seeds (>= 3) of the percentile of
               ENAS's pick among the competent architectures of the ranking ground truth
               (benchmarks/ranking.py's default table, ground_truth_mnist1d_v4.json), with
               the supernet budget and the pick-retraining/percentile machinery of
               benchmarks/ranking.py (``_searches.SUPERNET``: 2,520 weight steps; ENAS's
               shipped defaults: 3/4 of the epochs a uniform warm-up, rewards by validation
               loss, the pick by the hybrid selection); per seed beside it, and SPOS +
               evolution's figure on the same table (benchmarks/data/ranking_mnist1d_v4.json)
               and random's (50) as baselines; target >= 75
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
torch.set_num_threads(1)


def _example(name: str) -> Any:
    """Returns the module of ``examples/<name>.py``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wann(quick: bool) -> dict[str, Any]:
    """Returns the WANN figures (see the module docstring)."""
    from nasforge.spaces.wann import WannSpace, evaluate_shared

    example = _example("wann_digits")
    with tempfile.TemporaryDirectory() as tmp:
        found = example.search(60 if quick else 300, 0, Path(tmp) / "run")
    start = evaluate_shared(WannSpace(seed=0).freeze({"edits": []}), *example.test)
    return {
        "mean_accuracy": found["mean_accuracy"],
        "best_shared_weight_accuracy": found["best_shared_weight_accuracy"],
        "connections": found["connections"],
        "hidden_neurons": found["hidden_neurons"],
        "trials": found["trials"],
        "start_mean_accuracy": round(start["mean_accuracy"], 4),
        "start_best_shared_weight_accuracy": round(start["best_shared_weight_accuracy"], 4),
        "start_connections": start["connections"],
        "paper_mnist_mean_accuracy": 0.820,
        "paper_mnist_best_shared_weight_accuracy": 0.916,
    }


def pathlevel(quick: bool) -> dict[str, Any]:
    """Returns the path-level figures (see the module docstring)."""
    example = _example("pathlevel_digits")
    return example.compare(trials=6 if quick else 12, seeds=3 if quick else 5)


def proxylessnas(quick: bool) -> dict[str, Any]:
    """Returns the ProxylessNAS figures (see the module docstring)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _oneshot_common import setup

    from nasforge.data import load_digits
    from nasforge.oneshot import search
    from nasforge.oneshot.memory import saved_bytes
    from nasforge.oneshot.proxyless import latency_table
    from nasforge.spaces import digits_cell_space

    s = setup(*((16, 8) if quick else (32, 16)))
    saved = {k: saved_bytes(s["nets"][k], s["x"], s["y"])
             for k in ("standalone", "proxylessnas", "nasb", "darts")}  # fmt: skip
    x, y = load_digits(seed=0).train[:]
    space = digits_cell_space()
    table = latency_table(space, x[:2])  # this machine, batch 1; both searches read this one
    common = dict(epochs=2 if quick else 6, batch_size=64, a_lr=0.05, latency_table=table,
                  progress="off", threads=1)  # fmt: skip
    free = search(space, "proxylessnas", (x, y), **common)
    target = 0.5 * free.metrics["latency_ms"]
    tight = search(space, "proxylessnas", (x, y), latency_target=target, **common)
    return {
        "saved_over_standalone": round(saved["proxylessnas"] / saved["standalone"], 4),
        "darts_over_standalone": round(saved["darts"] / saved["standalone"], 4),
        "nasb_over_standalone": round(saved["nasb"] / saved["standalone"], 4),
        "latency_over_target": round(tight.metrics["latency_ms"] / target, 4),
        "unconstrained_latency_over_target": round(free.metrics["latency_ms"] / target, 4),
        "target_ms": round(target, 4),
        "pick_latency_ms": round(tight.metrics["latency_ms"], 4),
        "unconstrained_latency_ms": round(free.metrics["latency_ms"], 4),
        "pick_supernet_val_acc": tight.history[-1]["val_acc"],
        "unconstrained_supernet_val_acc": free.history[-1]["val_acc"],
        "settings": {k: v for k, v in common.items() if k != "latency_table"},
    }


def enas(quick: bool) -> dict[str, Any]:
    """Returns the ENAS figures (see the module docstring; the work is in _enas_bench.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _enas_bench import enas_percentile

    return enas_percentile(quick)


#: part name -> function(quick) -> figures; a part added later is one more entry
PARTS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "wann": wann,
    "pathlevel": pathlevel,
    "proxylessnas": proxylessnas,
    "enas": enas,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=sorted(PARTS), default=list(PARTS))
    parser.add_argument("--quick", action="store_true", help="smaller budgets, for a smoke run")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    for name in args.parts:
        t0 = time.time()
        out[name] = PARTS[name](args.quick)
        out[name]["seconds"] = round(time.time() - t0, 1)
        print(f"{name}: {out[name]}", flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
