"""Search-step time of reversible DARTS (backprop with reconstruction) over ordinary DARTS, and of
reversible NASB, measured in one run on the same seq2seq space and batches.

Measured at each hidden size of ``--d`` (default 96 and 192; the headline ratio is the last,
the more compute-bound one: with small tensors on a CPU, backward costs about as much as
forward, so the extra forward weighs more than the paper's 33%). Each repetition times one full
search step (a weight update and an architecture update) of each
method in turn (interleaved, so that load on a shared machine hits all alike); the ratio of
medians is reported. The paper expects about +33% (one extra forward per layer).

Target: step_time_ratio (reversible DARTS / DARTS) <= 1.5.

Last line: {"step_time_ratio": ..., "step_s_by_d": {d: {method: median seconds}}, ...}.
``--quick`` (the slow test set's smoke run): hidden 48, 2 layers, vocabulary 100, batches of 4
sequences of 8 tokens, 2 repetitions.
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


def measure(d: int, args: argparse.Namespace) -> dict[str, float]:
    """Returns the median step seconds of each method at hidden size ``d``."""
    dev = args.device
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    train = batch(args.vocab, args.batch, args.len, 1, dev)
    val = batch(args.vocab, args.batch, args.len, 2, dev)
    runs = {m: make(m, args.depth, d, args.vocab, device=dev) for m in METHODS}
    for net, opts, cfg in runs.values():
        step(net, opts, cfg, train, val)  # warm-up
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    for _ in range(args.reps):
        for m, (net, opts, cfg) in runs.items():
            sync()
            t0 = time.perf_counter()
            step(net, opts, cfg, train, val)
            sync()
            times[m].append(time.perf_counter() - t0)
    return {m: statistics.median(v) for m, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", default="96,192", help="hidden sizes; the last one is the headline")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--len", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="cuda on a GPU (the paper's setting)")
    ap.add_argument("--quick", action="store_true", help="d 48, 2 layers, 2 repetitions")
    args = ap.parse_args()
    if args.quick:
        args.d, args.depth, args.vocab, args.reps, args.batch, args.len = "48", 2, 100, 2, 4, 8
    torch.set_num_threads(1)
    sizes = [int(x) for x in args.d.split(",")]
    by_d = {str(d): measure(d, args) for d in sizes}
    ratio = {d: v["reversible_darts"] / v["darts"] for d, v in by_d.items()}
    head = str(sizes[-1])
    print(
        json.dumps(
            {
                "step_time_ratio": ratio[head],
                "nasb_step_time_ratio": by_d[head]["reversible_nasb"] / by_d[head]["darts"],
                "step_time_ratio_by_d": ratio,
                "step_s_by_d": by_d,
                "setting": vars(args),
                "target_met": ratio[head] <= 1.5,
                "target_met_every_d": all(r <= 1.5 for r in ratio.values()),
            }
        )
    )


if __name__ == "__main__":
    main()
