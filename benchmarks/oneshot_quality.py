"""Quality on digits: DARTS and NASB searches vs the median of random architectures.

sklearn's 8x8 digits (1,797 images) are split into a test set (20%) and a search set; the search
set is split evenly again by the search (weights / architecture). Each search runs on the
small-image cell space (``digits_cell_space``); the exported architecture is then retrained
from scratch on the whole search set and scored on the test set (mean over ``--retrain-seeds``
retrainings: the test set has 359 images, one image is 0.28 points), exactly as each of
``--n-random`` uniformly sampled architectures is. Single-threaded, to share the machine.

Last line: JSON with the search times, the test accuracies and the random median.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

import nasforge as nf
from nasforge.oneshot import search
from nasforge.oneshot.common import accuracy
from nasforge.spaces import arch_to_genotype, digits_cell_space


def load(
    seed: int = 0,
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """Returns (search set, test set) of the digits as (N, 1, 8, 8) floats in [0, 1]."""
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    y = torch.tensor(d.target)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(len(x)))
    n_test = len(x) // 5
    test, rest = perm[:n_test], perm[n_test:]
    return (x[rest], y[rest]), (x[test], y[test])


def retrain(
    space: nf.ModelSpace, arch: dict, train: tuple, test: tuple, epochs: int, seed: int
) -> float:
    """Returns the test accuracy of ``arch`` trained from scratch (SGD, cosine, batch 64)."""
    torch.manual_seed(seed)
    model = nf.freeze(space, arch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-4)
    steps = epochs * ((len(train[0]) + 63) // 64)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    g = torch.Generator().manual_seed(seed)
    x, y = train
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        model.train()
        for i in range(0, len(x), 64):
            idx = perm[i : i + 64]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return accuracy(model, test)


def _score(
    space: nf.ModelSpace, arch: dict, train: tuple, test: tuple, args: argparse.Namespace
) -> float:
    """Returns the mean test accuracy of ``arch`` over ``args.retrain_seeds`` retrainings."""
    accs = [
        retrain(space, arch, train, test, args.retrain_epochs, args.seed + k)
        for k in range(args.retrain_seeds)
    ]
    return sum(accs) / len(accs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--search-epochs", type=int, default=8)
    parser.add_argument("--retrain-epochs", type=int, default=10)
    parser.add_argument("--n-random", type=int, default=10)
    parser.add_argument("--cells", type=int, default=5)
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--retrain-seeds", type=int, default=2, help="retrain each arch this often, report the mean"
    )
    parser.add_argument("--quick", action="store_true", help="2 search epochs, 3 retrain, 3 random")
    args = parser.parse_args()
    if args.quick:
        args.search_epochs, args.retrain_epochs, args.n_random, args.retrain_seeds = 2, 3, 3, 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    train, test = load(args.seed)
    out: dict = {"search_seconds": {}, "test_acc": {}, "genotype": {}}
    for algo in ("darts", "nasb"):
        torch.manual_seed(args.seed)
        space = digits_cell_space(args.cells, args.channels)
        t0 = time.perf_counter()
        result = search(
            space, algo, train, epochs=args.search_epochs, batch_size=64, seed=args.seed
        )
        out["search_seconds"][algo] = time.perf_counter() - t0
        out["genotype"][algo] = arch_to_genotype(result.arch)
        out["test_acc"][algo] = _score(space, result.arch, train, test, args)
        logging.info(
            "%s: search %.0fs, retrained test acc %.4f",
            algo,
            out["search_seconds"][algo],
            out["test_acc"][algo],
        )
    space = digits_cell_space(args.cells, args.channels)
    rnd = []
    for i in range(args.n_random):
        arch = space.search_space().sample(1000 + i)
        rnd.append(_score(space, arch, train, test, args))
        logging.info("random %d: test acc %.4f", i, rnd[-1])
    out["random_test_acc"] = rnd
    out["random_median"] = statistics.median(rnd)
    out["beats_random_median"] = {
        a: out["test_acc"][a] >= out["random_median"] for a in ("darts", "nasb")
    }
    out["settings"] = vars(args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
