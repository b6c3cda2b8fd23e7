"""Weight Agnostic Networks (Gaier & Ha 2019) on the handwritten digits: evolution grows a
minimal network by adding neurons, adding connections and changing activations; every network
is scored with one shared weight on all its connections, over six shared weights, untrained.

Run:  python examples/wann_digits.py [--trials 300] [--seed 0] [--out runs/wann_digits]

The search maximises the mean validation accuracy over the shared weights less 2e-4 per
connection (``nasforge.spaces.wann.wann_score``). It prints, on the test split, the best
network's mean accuracy over the shared weights, its best single shared weight, and its size,
and last a JSON line of the same figures. The paper's MNIST figures (28x28 images, a much larger
search) are 82.0% +- 18.7% mean over weights and 91.6% with the best single weight; the digits
are 8x8 images, 1797 of them, so the two are not the same task.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

from nasforge.data import load_digits
from nasforge.engine import Experiment
from nasforge.spaces.wann import WannSpace, evaluate_shared, wann_score
from nasforge.strategy import RegularizedEvolution

torch.set_num_threads(1)


def tensors(part):
    """Returns a split as (x of shape N x 64, y)."""
    x = torch.stack([part[i][0] for i in range(len(part))]).reshape(len(part), -1)
    return x, torch.tensor([int(part[i][1]) for i in range(len(part))])


data = load_digits(seed=0)
val, test = tensors(data.val), tensors(data.test)


def evaluate(model, report):
    """Returns the WANN figures on the validation split and the score the search maximises."""
    out = evaluate_shared(model, *val)
    score = wann_score(out["mean_accuracy"], out["connections"])
    return {"score": score, **{k: out[k] for k in ("mean_accuracy", "connections")},
            "best_shared_weight_accuracy": out["best_shared_weight_accuracy"]}  # fmt: skip


def search(trials: int, seed: int, out: Path) -> dict:
    """Returns the test figures of the best network that a WANN search of ``trials`` finds."""
    space = WannSpace(n_inputs=64, n_outputs=10, per_output=2, seed=seed, max_edits=400)
    strategy = RegularizedEvolution(population_size=30, sample_size=5, seed=seed)
    exp = Experiment(space, evaluate, strategy, directory=out, n_trials=trials, metric="score",
                     executor="inprocess", save_weights=False, progress="off")  # fmt: skip
    exp.run()
    best = exp.best(1)[0]
    model = space.freeze(best.arch)
    figures = evaluate_shared(model, *test)
    return {
        "mean_accuracy": round(figures["mean_accuracy"], 4),
        "std_over_weights": round(float(torch.tensor(figures["per_weight"]).std()), 4),
        "best_shared_weight_accuracy": round(figures["best_shared_weight_accuracy"], 4),
        "best_weight": figures["best_weight"],
        "connections": figures["connections"],
        "hidden_neurons": len(model.state["nodes"]),
        "edits": len(best.arch["edits"]),
        "trials": trials,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/wann_digits"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.out.exists():
        print(f"{args.out} exists; pass another --out", file=sys.stderr)
        return 2
    t0 = time.time()
    result = search(args.trials, args.seed, args.out)
    print(f"WANN on digits, {args.trials} networks, {time.time() - t0:.0f} s:")
    print(f"  mean accuracy over shared weights {result['mean_accuracy']:.3f} "
          f"(+- {result['std_over_weights']:.3f}); paper, MNIST: 0.820 +- 0.187")  # fmt: skip
    print(f"  best single shared weight ({result['best_weight']}) "
          f"{result['best_shared_weight_accuracy']:.3f}; paper, MNIST: 0.916")  # fmt: skip
    print(f"  {result['connections']} connections, {result['hidden_neurons']} hidden neurons")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
