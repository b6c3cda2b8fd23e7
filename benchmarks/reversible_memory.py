"""Activation memory of one DARTSformer search step: reversible DARTS, reversible NASB and
ordinary DARTS on the same seq2seq space and batch, at 2, 4, 8 and 16 searched layers.

Measured: the peak bytes of tensors held for backward at any moment of one search step (a weight
update on one batch and an architecture update on another), reconstruction included, by
saved-tensor hooks that track which saved storages are alive (deduplicated by storage,
parameters excluded; :func:`nasforge.oneshot.peak_memory.peak_saved_bytes`). Then the largest
hidden size from a grid whose step fits a fixed byte budget, per method.

Targets: reversible at 16 layers <= 1.2 x reversible at 2 layers; reversible <= 0.5 x ordinary
DARTS at every depth >= 4; reversible NASB below reversible DARTS.

Last line: {"saved_bytes": {method: {depth: bytes}}, "max_hidden": {method: d}, ...}.
``--quick`` (the slow test set's smoke run): hidden 48, 2 layers, vocabulary 100, batches of 4
sequences of 8 tokens, the budget tried at hidden 48 alone.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reversible_common import METHODS, batch, make, step  # noqa: E402

from nasforge.oneshot.nasb import binarize  # noqa: E402
from nasforge.oneshot.peak_memory import peak_saved_bytes  # noqa: E402

logger = logging.getLogger("reversible_memory")


def peak(method: str, depth: int, d: int, vocab: int, b: int, t: int, device: str = "cpu") -> int:
    """Returns the peak saved bytes of one search step (after one warm-up step)."""
    net, opts, cfg = make(method, depth, d, vocab, device=device)
    train, val = batch(vocab, b, t, 1, device), batch(vocab, b, t, 2, device)
    step(net, opts, cfg, train, val)  # warm-up: probes candidates, fills optimizer state
    if cfg.algorithm == "nasb":
        binarize(net)
    return peak_saved_bytes(lambda: step(net, opts, cfg, train, val), net.parameters())


def cuda_peak(method: str, depth: int, d: int, vocab: int, b: int, t: int) -> int:
    """Returns the peak CUDA bytes one search step allocates above what is resident before it
    (weights, optimizer state, batches), less the parameter gradients it leaves: the
    activation memory the paper measures, as the allocator saw it."""
    net, opts, cfg = make(method, depth, d, vocab, device="cuda")
    train, val = batch(vocab, b, t, 1, "cuda"), batch(vocab, b, t, 2, "cuda")
    step(net, opts, cfg, train, val)
    if cfg.algorithm == "nasb":
        binarize(net)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(net, opts, cfg, train, val)
    torch.cuda.synchronize()
    # the step's parameter gradients grow with depth for every method: not activation memory
    grads = sum(p.grad.nbytes for p in net.parameters() if p.grad is not None)
    return torch.cuda.max_memory_allocated() - base - grads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cuda: the GPU allocator's peak instead")
    ap.add_argument("--d", type=int, default=96)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--len", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--depths", default="2,4,8,16")
    ap.add_argument("--budget-mib", type=float, default=32.0)
    ap.add_argument("--budget-depth", type=int, default=4)
    ap.add_argument("--grid", default="48,96,144,192,288,384,480,576,768,960,1440")
    ap.add_argument("--quick", action="store_true", help="d 48, 2 layers, a 1-point grid")
    args = ap.parse_args()
    if args.quick:
        args.d, args.vocab, args.depths, args.grid, args.budget_depth = 48, 100, "2", "48", 2
        args.batch, args.len = 4, 8
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    depths = [int(x) for x in args.depths.split(",")]
    if args.device.startswith("cuda"):  # the allocator's view on a GPU, instead of the hooks'
        cuda = {
            m: {str(k): cuda_peak(m, k, args.d, args.vocab, args.batch, args.len) for k in depths}
            for m in METHODS
        }
        rd = cuda["reversible_darts"]
        out = {
            "device": torch.cuda.get_device_name(),
            "setting": vars(args),
            "cuda_activation_bytes": cuda,
            "cuda_flat_ratio_reversible_darts": rd[str(max(depths))] / rd[str(min(depths))],
            "cuda_reversible_over_darts": {k: rd[k] / cuda["darts"][k] for k in rd},
        }
        print(json.dumps(out))
        return
    saved: dict[str, dict[str, int]] = {m: {} for m in METHODS}
    for depth in depths:
        for m in METHODS:
            t0 = time.perf_counter()
            saved[m][str(depth)] = peak(m, depth, args.d, args.vocab, args.batch, args.len)
            logger.info(
                "%s depth %d: %d bytes (%.1fs)",
                m,
                depth,
                saved[m][str(depth)],
                time.perf_counter() - t0,
            )
    budget = int(args.budget_mib * 2**20)
    max_hidden: dict[str, int | None] = {}
    at_max: dict[str, int] = {}
    for m in METHODS:
        max_hidden[m] = None
        for d in (int(x) for x in args.grid.split(",")):
            used = peak(m, args.budget_depth, d, args.vocab, args.batch, args.len)
            logger.info("%s d=%d: %d bytes (budget %d)", m, d, used, budget)
            if used > budget:
                break
            max_hidden[m], at_max[m] = d, used
    rd, rn, dd = saved["reversible_darts"], saved["reversible_nasb"], saved["darts"]
    lo, hi = str(min(depths)), str(max(depths))
    result = {
        "saved_bytes": saved,
        "max_hidden": max_hidden,
        "max_hidden_bytes": at_max,
        "budget_bytes": budget,
        "budget_depth": args.budget_depth,
        "setting": {"d": args.d, "batch": args.batch, "len": args.len, "vocab": args.vocab},
        "flat_ratio_reversible_darts": rd[hi] / rd[lo],
        "flat_ratio_reversible_nasb": rn[hi] / rn[lo],
        "reversible_over_darts": {k: rd[k] / dd[k] for k in rd},
        "nasb_over_darts_reversible": {k: rn[k] / rd[k] for k in rd},
        "targets_met": {
            "flat_in_depth": rd[hi] <= 1.2 * rd[lo] and rn[hi] <= 1.2 * rn[lo],
            "half_of_darts_from_depth_4": all(
                rd[k] <= 0.5 * dd[k] and rn[k] <= 0.5 * dd[k] for k in rd if int(k) >= 4
            ),
            "nasb_below_darts": all(rn[k] < rd[k] for k in rd),
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
