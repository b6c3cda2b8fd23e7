"""Freezing cost and frozen-model speed versus the same network written by hand.

For several architectures of the example CNN space, times forward+backward of the frozen model
and of the hand-written network (same weights, same input), interleaved in many short rounds so
that machine noise hits both alike; reports the median over architectures of the ratio of median
round times. Also times ``freeze`` itself.

Targets (issue 2): frozen_vs_handwritten_time_ratio <= 1.02, freeze_ms <= 20.
Last line: {"frozen_vs_handwritten_time_ratio": ..., "freeze_ms": ...}
Run: python benchmarks/freeze.py [--quick]  (``--quick``, the slow test set's smoke run: 2
architectures, 4 rounds of 2 repetitions)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nasforge as nf  # noqa: E402
from nasforge.spaces import DigitsCNN  # noqa: E402
from tests.handwritten import HandCNN  # noqa: E402


def _step(model: torch.nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()


def _round(model: torch.nn.Module, x: torch.Tensor, reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        _step(model, x)
    return (time.perf_counter() - start) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="2 archs, 4 rounds of 2 reps")
    args = parser.parse_args()
    if args.quick:
        args.archs, args.rounds, args.reps = 2, 4, 2
    torch.set_num_threads(1)
    torch.manual_seed(0)

    space = DigitsCNN()
    ss = space.search_space()
    x = torch.randn(args.batch, 1, 8, 8)
    ratios, freeze_ms = [], []
    for seed in range(args.archs):
        arch = ss.sample(seed)
        for _ in range(5):
            start = time.perf_counter()
            frozen = nf.freeze(space, arch)
            freeze_ms.append((time.perf_counter() - start) * 1e3)
        hand = HandCNN(arch)
        hand.load_state_dict(frozen.state_dict())
        for m in (frozen, hand):
            m.train()
            for _ in range(3):
                _step(m, x)  # warm up
        t_frozen, t_hand = [], []
        for r in range(args.rounds):  # alternate the order so neither always goes first
            pair = [(frozen, t_frozen), (hand, t_hand)]
            for model, times in pair if r % 2 == 0 else reversed(pair):
                times.append(_round(model, x, args.reps))
        ratio = statistics.median(t_frozen) / statistics.median(t_hand)
        ratios.append(ratio)
        print(
            f"arch {seed}: frozen {statistics.median(t_frozen) * 1e3:.3f} ms, "
            f"hand {statistics.median(t_hand) * 1e3:.3f} ms, ratio {ratio:.4f}",
            flush=True,
        )
    result = {
        "frozen_vs_handwritten_time_ratio": round(statistics.median(ratios), 4),
        "freeze_ms": round(statistics.median(freeze_ms), 3),
        "freeze_ms_max": round(max(freeze_ms), 3),
        "ratio_per_arch": [round(r, 4) for r in ratios],
        "batch": args.batch,
        "threads": 1,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
