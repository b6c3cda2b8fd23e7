"""NASPipe's CUDA path on one GPU: the host-stashed supernet with predicted prefetch.

Trains one supernet of choice blocks (wide Linear candidates, sklearn digits) for the same subnet
sequence three ways on one GPU, and compares them:

- ``resident``: every layer of the supernet lives on the device (what GPipe/BSP hold: the whole
  partition), the upper bound on speed and on device memory;
- ``csp_cache``: the supernet lives in pinned host memory and the device holds a cache of about
  ``--cache-subnets`` subnets' layers, filled ahead of use by the predictor's look-ahead (the
  next subnets the sampler draws) on a side CUDA copy stream, overlapped with compute
  (:class:`nasforge.parallel.context.TieredLayerCache`), in this process;
- ``csp_nccl``: the same through the pipeline runtime's stage process, with NCCL as the process
  group's backend (one stage: one GPU is all a lent machine has).

A short discarded run warms the device up first; then the resident and cached runs alternate
``--repeats`` times (default 3), and each one's wall time is the median. Reported: samples/s,
the cache hit rate, the prefetched fraction (layers that arrived by prefetch / all layers
loaded; target >= 0.8), the peak device memory of each run, whether each
equals the resident run bitwise (the cache must not change a single bit), and the ratios:
``csp_cache_over_resident`` is the wall-time ratio of the cached run to the resident one
(target <= 1.3 on a GPU; 13.3 before the look-ahead, 1.34 now, on an H100), ``memory_ratio``
the peak memory ratio. With ``--device cpu`` the same code runs on gloo (no memory figures;
both tiers are host memory, so the copies are clones made at once, but the plan and the
accounting are the GPU's); ``--device cuda`` without a GPU prints ``{"skipped": ...}``.
``--quick`` (the slow test set's smoke run): 4 blocks of 4 candidates 64 wide, 8 steps of 32,
one repeat, on the GPU when there is one and on the CPU (gloo) otherwise.

Last line: one JSON object ``{"samples_per_s": {...}, "hit_rate": {...}, "prefetched_fraction":
{...}, "peak_device_bytes": {...}, "equals_resident": {...}, "csp_cache_over_resident": ...,
"memory_ratio": ...}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
from dataclasses import replace

import torch

from nasforge.parallel.config import RunConfig
from nasforge.parallel.launcher import launch
from nasforge.parallel.runtime import train_sequential
from nasforge.parallel.supernet import ChoiceSupernet

log = logging.getLogger("naspipe_cuda")


def _run(cfg: RunConfig, nccl: bool) -> dict:
    cuda = cfg.device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    if nccl:
        (r,) = launch(replace(cfg, n_stages=1))
        r["losses"] = [r["losses"][i] for i in range(cfg.steps)]  # keyed by step there
    else:
        r = train_sequential(cfg)
    # launch's stage process holds its own CUDA context: its peak is not this process's
    r["peak"] = torch.cuda.max_memory_allocated() if cuda and not nccl else None
    log.info("cache_subnets=%s nccl=%s: %.2fs, %s", cfg.cache_subnets, nccl, r["wall"], r["stats"])
    return r


def main(argv: list[str] | None = None) -> int:
    """Runs the three trainings; prints the JSON line last."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--cache-subnets", type=float, default=3.0)
    ap.add_argument("--device", default=None, help="cpu runs the same code paths (gloo)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each; median wall")
    ap.add_argument("--quick", action="store_true", help="tiny supernet, 8 steps, CPU if no GPU")
    args = ap.parse_args(argv)
    if args.quick:
        args.blocks, args.candidates, args.hidden, args.steps = 4, 4, 64, 8
        args.batch_size, args.repeats = 32, 1
        if args.device is None and not torch.cuda.is_available():
            args.device = "cpu"
    args.device = args.device or "cuda"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return 0
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch.set_num_threads(1)
    space = {"n_blocks": args.blocks, "n_candidates": args.candidates, "hidden": args.hidden}
    base = RunConfig(
        ChoiceSupernet,
        space,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=0.01,
        device=args.device,
        timeout_s=300.0,
    )
    # a short discarded run first (CUDA context, cuBLAS handles, allocator pools), then the two
    # in-process runs alternated, so that warm-up and drift fall on neither side
    _run(replace(base, cache_subnets=None, steps=min(8, args.steps)), nccl=False)
    walls: dict[str, list[float]] = {"resident": [], "csp_cache": []}
    runs: dict[str, dict] = {}
    for _ in range(max(1, args.repeats)):
        for name, cache in (("resident", None), ("csp_cache", args.cache_subnets)):
            r = _run(replace(base, cache_subnets=cache), nccl=False)
            runs.setdefault(name, r)  # the first run's losses, state and stats are reported
            walls[name].append(r["wall"])
    for name, w in walls.items():
        runs[name]["wall"] = statistics.median(w)
    try:
        runs["csp_nccl"] = _run(replace(base, cache_subnets=args.cache_subnets), nccl=True)
    except Exception as exc:  # reported, not hidden: the JSON says what failed
        log.exception("the NCCL stage run failed")
        runs["csp_nccl"] = {"error": f"{type(exc).__name__}: {exc}"}
    ref = runs["resident"]
    sps, hit, fetched, peak, equal, errors = {}, {}, {}, {}, {}, {}
    for name, r in runs.items():
        if "error" in r:
            errors[name] = r["error"]
            continue
        sps[name] = round(args.steps * args.batch_size / r["wall"], 1)
        hit[name] = round(float(r["stats"].get("hit_rate", 0.0)), 4)
        fetched[name] = round(float(r["stats"].get("prefetched_fraction", 0.0)), 4)
        peak[name] = r["peak"]
        equal[name] = r["losses"] == ref["losses"] and all(
            torch.equal(r["state"][k].cpu(), v.cpu()) for k, v in ref["state"].items()
        )
    out = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "samples_per_s": sps,
        "hit_rate": hit,
        "prefetched_fraction": fetched,
        "peak_device_bytes": peak,
        "equals_resident": equal,
        "errors": errors,
        # time, not speed: > 1 means the cached run is slower
        "csp_cache_over_resident": round(runs["csp_cache"]["wall"] / ref["wall"], 3),
        "walls_s": {k: [round(x, 3) for x in w] for k, w in walls.items()},
        "memory_ratio": round(peak["csp_cache"] / peak["resident"], 3)
        if peak["resident"]
        else None,
        "config": {
            **space,
            "steps": args.steps,
            "batch_size": args.batch_size,
            "cache": args.cache_subnets,
        },
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
