"""Path-level NAS (Cai et al. 2018) on the handwritten digits: a controller (REINFORCE over
the kinds of edit, ``edit_rl``) grows a one-layer network by function-preserving replicate,
split and deepen edits; each child inherits its parent's trained weights and trains briefly.

Run:  python examples/pathlevel_digits.py [--trials 12] [--seeds 5]

For each seed it runs the search and, with the same budget (the same number of networks, each
trained as long and grown from its longest trained prefix), random edit sequences (``random``
on the same space). It prints the test accuracy of each one's best network (picked by
validation accuracy), then a one-sided Welch t-test that the search beats random, and last a
JSON line ``{"search", "random", "p", ...}``. Both train each network the same number of
epochs; a random sequence grows from the trained base network (its longest trained prefix),
while the search's children carry their parents' accumulated training forward, which is what
inheriting weights across function-preserving edits buys.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time

import torch
from scipy import stats

from nasforge.data import load_digits
from nasforge.spaces.pathlevel import PathLevelSpace, grow_search
from nasforge.strategy import EditPolicy, RandomStrategy

torch.set_num_threads(1)


def tensors(part):
    """Returns a split as (x of shape N x 64, y)."""
    x = torch.stack([part[i][0] for i in range(len(part))]).reshape(len(part), -1)
    return x, torch.tensor([int(part[i][1]) for i in range(len(part))])


def compare(trials: int, seeds: int, units: int = 8, epochs: int = 2) -> dict:
    """Returns the mean test accuracy of the search's and random's best networks over
    ``seeds`` seeds, each value, and the one-sided p that the search is better."""
    splits = load_digits(seed=0)
    data = {k: tensors(getattr(splits, k)) for k in ("train", "val", "test")}
    found: dict[str, list[float]] = {"search": [], "random": []}
    for seed in range(seeds):
        for name, strategy in (("search", EditPolicy(seed=seed)), ("random", RandomStrategy(seed))):
            space = PathLevelSpace(64, 10, units=units, max_edits=trials + 4)
            result = grow_search(space, strategy, data, trials, epochs=epochs, seed=seed)
            found[name].append(result["test"])
            logging.info("%s seed %d: test %.4f, %d params", name, seed, result["test"],
                         result["params"])  # fmt: skip
    test = stats.ttest_ind(found["search"], found["random"], equal_var=False,
                           alternative="greater")  # fmt: skip
    return {
        "search": round(statistics.mean(found["search"]), 4),
        "random": round(statistics.mean(found["random"]), 4),
        "p": float(test.pvalue),
        "test": "one-sided Welch t-test",
        "search_each": found["search"],
        "random_each": found["random"],
        "seeds": seeds,
        "trials": trials,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("nasforge").setLevel(logging.WARNING)
    t0 = time.time()
    result = compare(args.trials, args.seeds)
    print(f"path-level NAS on digits, {args.seeds} seeds x {args.trials} networks, "
          f"{time.time() - t0:.0f} s: search {result['search']:.4f} vs random edit sequences "
          f"{result['random']:.4f} (test accuracy), p = {result['p']:.3g} "
          f"({result['test']})")  # fmt: skip
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
