"""Cross-model optimizations of the multi-trial engine (issue 14), ratios measured in one run.

    --parts supergraph   a weight-sharing search (1 SGD batch per sampled architecture, SPOS
                         style) through the three places for shared weights: an in-memory
                         super-graph vs checkpoint-to-file and checkpoint-to-dict, at batch 32
                         and 256; trials per second, interleaved rounds (target >= 2x over file
                         at batch 32)
    --parts opbatch      4/16/64 adapter models over a frozen backbone: batched (prefix once,
                         adapters stacked with vmap) vs one by one (target >= 2x at 16)
    --parts shareddata   2 and 4 concurrent trials on augmented MNIST: one producer in shared
                         memory vs one loader per trial (target >= 1.5x at 4)
    --parts e2e          a weight-sharing search on MNIST through the engine, cross-model
                         optimizations on vs off: the same trials, less time; and a
                         classification grid search of 16 heads over a frozen backbone, on
                         (operator batching, groups of 8) vs off
    --parts mixed        mixed parallelism: 2 gloo workers, different architectures, averaged
                         shared gradients vs data parallel with synchronised batch norm

Single-threaded processes; ``--device cuda`` runs the parts that train on one GPU. Last line:
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _crossmodel_common import MnistAdapters, MnistHeads, MnistSpos, mnist  # noqa: E402

import nasforge as nf  # noqa: E402
from nasforge.engine.crossmodel import pipelines  # noqa: E402, F401 - registers mnist/augment
from nasforge.engine.crossmodel.opbatch import MergedModels  # noqa: E402
from nasforge.engine.crossmodel.shareddata import DataSpec, SharedFeed, make_batch  # noqa: E402
from nasforge.engine.crossmodel.supergraph import SharedWeightsEvaluator  # noqa: E402

log = logging.getLogger("benchmarks.crossmodel")
PARTS = ("supergraph", "opbatch", "shareddata", "mixed", "e2e")


def bench_supergraph(device: str, quick: bool) -> dict[str, Any]:
    """Returns trials/s of each sharing mode and the super-graph's ratios, per batch size."""
    x, y = mnist()
    space = MnistSpos()
    rng = random.Random(0)
    out: dict[str, Any] = {"vs_file": {}, "vs_dict": {}, "trials_per_s": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for bs in (32, 256):
            n_trials = (8 if bs == 32 else 4) if quick else (16 if bs == 32 else 4)
            rounds = 2 if quick else 7
            evs = {
                mode: SharedWeightsEvaluator(
                    (x, y),
                    None,
                    batch_size=bs,
                    sharing=mode,
                    path=Path(tmp) / f"{bs}.pt",
                    device=device,
                )
                for mode in ("file", "dict", "supergraph")
            }
            archs = [space.search_space().sample(rng) for _ in range(n_trials * (rounds + 1))]
            secs: dict[str, list[float]] = {m: [] for m in evs}
            for ev in evs.values():  # warm-up: first trial builds the initial state
                ev.evaluate(space, archs[0], lambda *_: None)
            for r in range(rounds):
                batch = archs[(r + 1) * n_trials : (r + 2) * n_trials]
                for m, ev in evs.items():
                    t = time.perf_counter()
                    for a in batch:
                        ev.evaluate(space, a, lambda *_: None)
                    if device == "cuda":
                        torch.cuda.synchronize()
                    secs[m].append((time.perf_counter() - t) / len(batch))
            per = {m: statistics.median(v) for m, v in secs.items()}
            out["trials_per_s"][str(bs)] = {m: round(1 / v, 2) for m, v in per.items()}
            out["vs_file"][str(bs)] = round(per["file"] / per["supergraph"], 2)
            out["vs_dict"][str(bs)] = round(per["dict"] / per["supergraph"], 2)
            log.info("supergraph batch %d: %s", bs, out["trials_per_s"][str(bs)])
    return out


def bench_opbatch(device: str, quick: bool) -> dict[str, Any]:
    """Returns model-steps/s of 4/16/64 adapter models trained one by one and merged (vmap and
    loop), and the best merged way's ratio over one by one."""
    x, y = mnist()
    bs, steps = 64, (3 if quick else 6)
    batches = [
        (x[i * bs : (i + 1) * bs].to(device), y[i * bs : (i + 1) * bs].to(device))
        for i in range(steps + 1)
    ]
    space = MnistAdapters()
    sp = space.search_space()
    out: dict[str, Any] = {"speedup": {}, "vmap": {}, "loop": {}, "model_steps_per_s": {}}
    for n in (4, 16, 64):
        rng = random.Random(n)
        archs = [sp.sample(rng) for _ in range(n)]

        def build(archs: list[dict[str, Any]] = archs) -> list[torch.nn.Module]:
            models = []
            for i, a in enumerate(archs):
                torch.manual_seed(i)
                models.append(nf.freeze(space, a).to(device))
            return models

        def sync() -> None:
            if device == "cuda":
                torch.cuda.synchronize()

        models = build()
        opts = [
            torch.optim.Adam([p for p in m.parameters() if p.requires_grad], 1e-3) for m in models
        ]
        secs: dict[str, float] = {}
        for rep in range(steps + 1):  # step 0 warms up
            xb, yb = batches[rep]
            t = time.perf_counter()
            for m, o in zip(models, opts):
                loss = torch.nn.functional.cross_entropy(m(xb), yb)
                o.zero_grad(set_to_none=True)
                loss.backward()
                o.step()
            sync()
            if rep:
                secs["alone"] = secs.get("alone", 0.0) + time.perf_counter() - t
        for mode in ("vmap", "loop"):
            merged = MergedModels(
                build(), lambda ps: torch.optim.Adam(ps, 1e-3), example=batches[0][0], mode=mode
            )
            for rep in range(steps + 1):
                xb, yb = batches[rep]
                t = time.perf_counter()
                merged.step(xb, yb)
                sync()
                if rep:
                    secs[mode] = secs.get(mode, 0.0) + time.perf_counter() - t
        rate = {k: n * steps / v for k, v in secs.items()}
        out["model_steps_per_s"][str(n)] = {k: round(v, 1) for k, v in rate.items()}
        out["vmap"][str(n)] = round(rate["vmap"] / rate["alone"], 2)
        out["loop"][str(n)] = round(rate["loop"] / rate["alone"], 2)
        out["speedup"][str(n)] = max(out["vmap"][str(n)], out["loop"][str(n)])
        log.info("opbatch %d models: %s", n, out["model_steps_per_s"][str(n)])
    return out


def _small_cnn() -> torch.nn.Module:
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )  # fmt: skip


def _trial(batches: Any, seed: int) -> float:
    """Trains a small CNN on the batches; returns its last loss (the trial's work)."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = _small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = torch.zeros(())
    for x, y in batches:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return float(loss)


def bench_shareddata(quick: bool) -> dict[str, Any]:
    """Returns the wall-time ratio of N concurrent trials with one loader each over N trials
    fed by one shared producer, and the preprocessing and model-step costs per batch."""
    import multiprocessing as mp

    spec = DataSpec("mnist", "augment", 64, 0)
    n_batches = 40 if quick else 150
    make_batch(spec, 0)  # load before forking
    t = time.perf_counter()
    sample = [make_batch(spec, b) for b in range(10)]
    prep = (time.perf_counter() - t) / 10
    _trial(sample, 0)  # warm-up
    t = time.perf_counter()
    _trial(sample, 0)
    step = (time.perf_counter() - t) / 10
    ctx = mp.get_context("fork")

    def local(i: int) -> None:
        _trial((make_batch(spec, b) for b in range(n_batches)), i)

    def shared(feed: SharedFeed, i: int) -> None:
        _trial(feed.consumer(i), i)

    def run(n: int, share: bool) -> float:
        t = time.perf_counter()
        feed = SharedFeed(spec, n, n_batches) if share else None
        procs = [
            ctx.Process(target=shared if share else local, args=((feed, i) if share else (i,)))
            for i in range(n)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if feed is not None:
            feed.close()
        return time.perf_counter() - t

    out: dict[str, Any] = {"speedup": {}, "seconds": {}}
    for n in (2, 4):
        secs: dict[str, list[float]] = {"independent": [], "shared": []}
        for _ in range(1 if quick else 2):
            secs["independent"].append(run(n, False))
            secs["shared"].append(run(n, True))
        med = {k: statistics.median(v) for k, v in secs.items()}
        out["seconds"][str(n)] = {k: round(v, 2) for k, v in med.items()}
        out["speedup"][str(n)] = round(med["independent"] / med["shared"], 2)
        log.info("shared data, %d trials: %s", n, out["seconds"][str(n)])
    out["preprocess_ms_per_batch"] = round(prep * 1e3, 2)
    out["model_step_ms_per_batch"] = round(step * 1e3, 2)
    return out


def bench_e2e(device: str, quick: bool) -> dict[str, Any]:
    """Returns the seconds of one weight-sharing random search on MNIST with the engine's
    cross-model optimizations off (a process per trial, or in-process, sharing a checkpoint
    file) and on (the engine picks the super-graph), and whether the trials are the same."""
    from nasforge.engine import Experiment
    from nasforge.engine.crossmodel.plan import events
    from nasforge.run.store import Store
    from nasforge.strategy import get_strategy

    x, y = mnist()
    n = 20 if quick else 60
    out: dict[str, Any] = {"n_trials": n}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        ways = [("off_inprocess", "inprocess", False), ("on", "pool", True)]
        if device == "cpu":  # CUDA cannot be used in processes forked after it started
            ways.insert(0, ("off_pool", "pool", False))
        for name, executor, on in ways:
            ev = SharedWeightsEvaluator(
                (x[:4000], y[:4000]), (x[4000:], y[4000:]), batch_size=32, val_size=256,
                sharing="file", path=Path(tmp) / f"{name}.pt", device=device,
            )  # fmt: skip
            exp = Experiment(
                MnistSpos(), ev, get_strategy("random", seed=0), n_trials=n,
                directory=Path(tmp) / name, executor=executor, concurrency=1, crossmodel=on,
                progress="off", save_weights=False,
            )  # fmt: skip
            t = time.perf_counter()
            exp.run()
            out[f"seconds_{name}"] = round(time.perf_counter() - t, 2)
            with Store.open(Path(tmp) / name) as store:
                runs[name] = [(t.arch_id, t.metrics) for t in store.trials()]
                if on:
                    out["events"] = [
                        {k: v for k, v in e.items() if k != "time"} for e in events(store)
                    ]
    ref = runs["off_inprocess"]
    out["same_results"] = all(
        [a for a, _ in r] == [a for a, _ in ref]
        and all(m1["accuracy"] == m2["accuracy"] for (_, m1), (_, m2) in zip(r, ref))
        for r in runs.values()
    )
    if "seconds_off_pool" in out:
        out["speedup_vs_pool"] = round(out["seconds_off_pool"] / out["seconds_on"], 2)
    out["speedup_vs_inprocess"] = round(out["seconds_off_inprocess"] / out["seconds_on"], 2)
    log.info("e2e: %s", out)
    return out


def bench_mixed(quick: bool) -> dict[str, Any]:
    """Returns seconds per epoch of 2 gloo workers training the MNIST super-graph with mixed
    parallelism vs data parallel with synchronised batch norm, and the mean accuracy of 20
    random sub-networks of each (inherited weights, recalibrated batch norm)."""
    from nasforge.engine.crossmodel.mixed import run_gloo, subnet_accuracy, train_worker

    x, y = mnist()
    train_x, train_y = x[:4000], y[:4000]
    val = (x[4000:], y[4000:])
    epochs, bs = (1, 64) if quick else (6, 64)
    out: dict[str, Any] = {"workers": 2, "epochs": epochs, "batch_per_model": bs}
    for mode in ("mixed", "dp"):
        results = run_gloo(
            2,
            lambda r, mode=mode: train_worker(
                r, 2, MnistSpos(), train_x, train_y, mode, bs, 0.1, 0, epochs
            ),
        )
        state, seconds = results[0]
        out[f"{mode}_epoch_s"] = round(max(s for _, s in results) / epochs, 2)
        out[f"{mode}_mean_subnet_accuracy"] = round(
            subnet_accuracy(MnistSpos(), state, train_x, val, k=20, seed=1), 4
        )
        log.info("mixed parallel %s: %s", mode, out)
    out["epoch_s_ratio_vs_syncbn_dp"] = round(out["dp_epoch_s"] / out["mixed_epoch_s"], 2)
    return out


def bench_e2e_heads(device: str, quick: bool) -> dict[str, Any]:
    """Returns the seconds of a 16-architecture classification grid search over a frozen MNIST
    backbone with cross-model optimizations off (process pool / in-process) and on (the
    engine batches the heads), and the largest accuracy difference between the two."""
    from torch.utils.data import TensorDataset

    from nasforge.data import Splits
    from nasforge.engine import Experiment
    from nasforge.engine.classification import ClassificationEvaluator
    from nasforge.engine.crossmodel.plan import events
    from nasforge.run.store import Store

    x, y = mnist()
    n = 2000 if quick else 4000
    data = Splits(
        TensorDataset(x[:n], y[:n]), TensorDataset(x[4000:4500], y[4000:4500]),
        TensorDataset(x[4500:], y[4500:]), 10,
    )  # fmt: skip
    out: dict[str, Any] = {"n_trials": 16, "concurrency": 8}
    runs = {}
    ways = [("off_inprocess", "inprocess", False), ("on", "pool", True)]
    if device == "cpu":
        ways.insert(0, ("off_pool", "pool", False))
    with tempfile.TemporaryDirectory() as tmp:
        for name, executor, on in ways:
            ev = ClassificationEvaluator(data=data, epochs=1, batch_size=64, lr=3e-3,
                                         device=device)  # fmt: skip
            exp = Experiment(
                MnistHeads(), ev, "grid", directory=Path(tmp) / name, executor=executor,
                concurrency=8, crossmodel=on, progress="off",
            )  # fmt: skip
            t = time.perf_counter()
            exp.run()
            out[f"seconds_{name}"] = round(time.perf_counter() - t, 2)
            with Store.open(Path(tmp) / name) as store:
                runs[name] = {t.arch_id: t.metrics for t in store.trials()}
                if on:
                    out["events"] = [
                        {k: v for k, v in e.items() if k != "time"} for e in events(store)
                    ]
    ref = runs["off_inprocess"]
    out["same_architectures"] = all(sorted(r) == sorted(ref) for r in runs.values())
    out["max_accuracy_difference"] = max(
        abs(r[a]["accuracy"] - ref[a]["accuracy"]) for r in runs.values() for a in ref
    )
    for base in ("off_pool", "off_inprocess"):
        if f"seconds_{base}" in out:
            out[f"speedup_vs_{base[4:]}"] = round(out[f"seconds_{base}"] / out["seconds_on"], 2)
    log.info("e2e heads: %s", {k: v for k, v in out.items() if k != "events"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"a subset of {PARTS}")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="fewer trials and batches")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {PARTS}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    result: dict[str, Any] = {
        "shared_data_speedup": None,
        "op_batching_speedup": None,
        "supergraph_speedup_vs_file": None,
        "supergraph_speedup_vs_dict": None,
        "mixed_parallel": None,
        "device": args.device,
    }
    if "supergraph" in parts:
        sg = bench_supergraph(args.device, args.quick)
        result["supergraph_speedup_vs_file"] = sg["vs_file"]
        result["supergraph_speedup_vs_dict"] = sg["vs_dict"]
        result["supergraph_trials_per_s"] = sg["trials_per_s"]
    if "opbatch" in parts:
        ob = bench_opbatch(args.device, args.quick)
        result["op_batching_speedup"] = ob["speedup"]
        result["op_batching_vmap_speedup"] = ob["vmap"]
        result["op_batching_loop_speedup"] = ob["loop"]
        result["op_batching_model_steps_per_s"] = ob["model_steps_per_s"]
    if "shareddata" in parts:
        sd = bench_shareddata(args.quick)
        result["shared_data_speedup"] = sd["speedup"]
        result["shared_data_seconds"] = sd["seconds"]
        result["shared_data_preprocess_ms_per_batch"] = sd["preprocess_ms_per_batch"]
        result["shared_data_model_step_ms_per_batch"] = sd["model_step_ms_per_batch"]
    if "mixed" in parts:
        mp_ = bench_mixed(args.quick)
        result["mixed_parallel"] = {
            "epoch_s_ratio_vs_syncbn_dp": mp_["epoch_s_ratio_vs_syncbn_dp"],
            "mean_subnet_accuracy": mp_["mixed_mean_subnet_accuracy"],
            "syncbn_dp_mean_subnet_accuracy": mp_["dp_mean_subnet_accuracy"],
            **mp_,
        }
    if "e2e" in parts:
        result["e2e_weight_sharing_search"] = bench_e2e(args.device, args.quick)
        result["e2e_frozen_backbone_search"] = bench_e2e_heads(args.device, args.quick)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
