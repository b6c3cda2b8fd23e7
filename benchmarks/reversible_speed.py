"""Search-step time of reversible DARTS (backprop with reconstruction) over ordinary DARTS, and of
reversible NASB, measured in one run on the same seq2seq space and batches.

Each repetition times one full search step (a weight update and an architecture update) of each
method in turn (interleaved, so that load on a shared machine hits all alike); the ratio of
medians is reported. The paper expects about +33% (one extra forward per layer).

Target: step_time_ratio (reversible DARTS / DARTS) <= 1.5.

Last line: {"step_time_ratio": ..., "step_s": {method: median seconds}, ...}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reversible_common import METHODS, batch, make, step  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=96)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--len", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    train, val = (
        batch(args.vocab, args.batch, args.len, 1),
        batch(args.vocab, args.batch, args.len, 2),
    )
    runs = {m: make(m, args.depth, args.d, args.vocab) for m in METHODS}
    for net, opts, cfg in runs.values():
        step(net, opts, cfg, train, val)  # warm-up
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    for _ in range(args.reps):
        for m, (net, opts, cfg) in runs.items():
            t0 = time.perf_counter()
            step(net, opts, cfg, train, val)
            times[m].append(time.perf_counter() - t0)
    med = {m: statistics.median(v) for m, v in times.items()}
    print(
        json.dumps(
            {
                "step_time_ratio": med["reversible_darts"] / med["darts"],
                "nasb_step_time_ratio": med["reversible_nasb"] / med["darts"],
                "step_s": med,
                "setting": vars(args),
                "target_met": med["reversible_darts"] / med["darts"] <= 1.5,
            }
        )
    )


if __name__ == "__main__":
    main()
