"""Deployment search with once-for-all's published artifacts: the per-device latency tables
(one YAML per resolution, e.g. note10), the published accuracy predictor and, optionally, the
published supernet, at a 25 ms target, over 5 seeds.

    python benchmarks/ofa_published.py --latency-table note10/ --predictor acc_predictor.pth \\
        [--supernet ofa_mbv3_d234_e346_k357_w1.2]

The space is the published MobileNetV3 plan whose width the tables give (note10's are for
w1.2) over the tables' resolutions; the search is nasforge's evolution (OFA's settings:
population 100, parents 25%, mutations 50%, mutation probability 0.1). With ``--supernet`` the
best sub-network of each seed is extracted from the loaded supernet and run once on a random
image (its parameter count is reported). Without the files it prints a skip line and exits 0.
``--quick`` (the slow test set's smoke run): one seed, 5 generations of 10.

Last line: {"best": [{"seed", "accuracy", "latency_ms", "arch"}, ...], "search_s", ...}
(``accuracy`` is the predictor's, ``latency_ms`` the tables' sum, ``arch`` once-for-all's
dictionary).
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import torch

from nasforge.ofa.evolution import EvolutionConfig, evolve
from nasforge.ofa.latency import LatencyTable
from nasforge.ofa.predictor import AccuracyPredictor
from nasforge.ofa.published import to_ofa_arch

logger = logging.getLogger("ofa_published")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--latency-table", nargs="+", help="<side>_lookup_table.yaml folder or files")
    p.add_argument("--predictor", help="once-for-all's acc_predictor.pth")
    p.add_argument("--supernet", help="a published supernet checkpoint (optional)")
    p.add_argument("--target-ms", type=float, default=25.0)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--generations", type=int, default=500, help="OFA's tutorial: 500")
    p.add_argument("--population", type=int, default=100)
    p.add_argument("--quick", action="store_true", help="1 seed, 5 generations of 10")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.generations, args.population = 1, 5, 10
    if not args.latency_table or not args.predictor:
        print(json.dumps({
            "skipped": True,
            "reason": "no published files given: pass --latency-table DIR (e.g. the note10 "
                      "tables) and --predictor FILE (acc_predictor.pth)",
        }))  # fmt: skip
        return
    torch.set_num_threads(1)
    t = time.perf_counter()
    table = LatencyTable.from_ofa_yaml(args.latency_table)
    space = table.space
    predictor = AccuracyPredictor.load_ofa(args.predictor, space)
    load_s = time.perf_counter() - t
    net = None
    if args.supernet:
        from nasforge.ofa.pretrained import load_pretrained

        net = load_pretrained(args.supernet, space.spec)
    cfg = EvolutionConfig(population=args.population, n_generations=args.generations)
    best, per_seed = [], []
    for seed in range(args.seeds):
        t = time.perf_counter()
        res = evolve(space, predictor, table.predict, args.target_ms, cfg, seed=seed)
        per_seed.append(time.perf_counter() - t)
        row = {
            "seed": seed,
            "accuracy": round(res.accuracy, 6),
            "latency_ms": round(res.cost, 6),
            "arch": to_ofa_arch(space, res.arch),
            "n_evaluated": res.n_evaluated,
        }
        if net is not None:
            from nasforge.ofa.mobilenet import extract

            sub = extract(net, res.arch).eval()
            side = space.resolution(res.arch)
            with torch.no_grad():
                out = sub(torch.randn(1, 3, side, side))
            row["params"] = sum(q.numel() for q in sub.parameters())
            row["logits_finite"] = bool(torch.isfinite(out).all())
        best.append(row)
        logger.info("seed %d: %.4f at %.3f ms (%.1fs)", seed, res.accuracy, res.cost, per_seed[-1])
    print(json.dumps({
        "best": best,
        "search_s": round(sum(per_seed), 3),
        "search_s_per_seed": [round(s, 3) for s in per_seed],
        "target_ms": args.target_ms,
        "width_mult": space.spec.width_mult,
        "resolutions": list(space.spec.resolutions),
        "generations": args.generations,
        "population": args.population,
        "load_s": round(load_s, 3),
    }))  # fmt: skip


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main()
