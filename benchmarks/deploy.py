"""Models out: how many models export verified in each format, and how well a latency table
built on onnxruntime predicts onnxruntime's measured end-to-end latency (issue 53, item 5).

- ``export_ok`` {format: fraction}: hub architectures (``--hub all`` by default; ``small``:
  the CIFAR-sized ones; ``--quick``: one; ``hub_archs`` lists those used),
  ``--n-ofa`` random sub-networks of the small elastic MobileNetV3 (28x28 greyscale,
  ``small_spec``) and the demo model (a ``DigitsCNN``
  architecture) and the Hugging Face demo models (``--hf all`` by default: the GPT-2 space of
  ``examples/gpt_shakespeare.py`` and the BERT, GPT-2 and ViT of ``benchmarks/mutate_zoo.py``,
  each built from its config and frozen at its space's first sampled architecture; ``demo``:
  the first alone; ``--quick``: ``demo``), each exported with
  :func:`nasforge.run.deploy.export_model`, which verifies it; ``max_abs_diff``: the largest
  verified difference over them (target 1e-4, fp32);
  ``failures`` names each export that failed, in one line.
- ``table_vs_measured``: for ``--n-ofa`` random sub-networks of the same supernet, the layer
  table's prediction against measured end-to-end latency on onnxruntime, both with 1 thread,
  batch 1, medians of ``--repeats`` calls (50, the table's shipped default) on the calling
  thread's CPU clock (``clock``; the wall clock's medians on a loaded machine measure the
  scheduler): Spearman rho and the median
  absolute relative error. The table is built in this run as a deployment search builds it
  (:func:`nasforge.ofa.deploy.make_latency`, ``mode: table``): every distinct layer shape
  timed interleaved, then calibrated (``scale * sum + offset``) on ``calibrate`` other
  sampled networks (seeds from ``CALIBRATION_SEED``; the evaluated ones are seeds 10000 on),
  timed in the same rounds; here the evaluated networks are timed in those rounds too, since
  on a loaded machine the level of the CPU clock drifts by a fifth between phases minutes
  apart (which would count as the table's error).
  ``raw`` gives rho and the error of the uncalibrated sum; ``load`` the 1-minute load average
  before and after.
- ``onnxruntime_over_torch``: the median over the same sub-networks of onnxruntime's latency
  over eager PyTorch's (1 thread each).
- ``nni_equal``: NNI conformance, from ``nni_equal`` of ``benchmarks/nni_equal.py``
  (``NNI_EQUAL_HOOK``), with ``--n-nni`` architectures per space; null with
  ``nni_equal_reason`` when it cannot run (NNI is not installed).

Weights are random (initialised with seed 0): exports and latency do not depend on training.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from nasforge import hub
from nasforge.errors import NasforgeError
from nasforge.ofa.deploy import CALIBRATE, CALIBRATION_SEED, N_RUNS
from nasforge.ofa.latency import LatencyTable, distinct_shapes
from nasforge.ofa.measure import network_latencies, table_latencies
from nasforge.ofa.mobilenet import OFAMobileNetV3, extract
from nasforge.ofa.spaces import small_spec
from nasforge.run.deploy import FORMATS, TOLERANCE, export_model
from nasforge.space.model_space import freeze
from nasforge.spaces import DigitsCNN

#: module (benchmarks/nni_equal.py) and function whose result's ``nni_equal`` is {space:
#: fraction of architectures with equal parameter count and outputs in NNI and nasforge}
NNI_EQUAL_HOOK = ("nni_equal", "nni_equal")
QUICK_HUB = ("nasbench201-resnet",)  # one: --quick exports the HF demo model too

log = logging.getLogger("deploy")


def _hub_names(which: str) -> list[str]:
    """Returns the hub architectures ``which`` names: all, small (CIFAR-sized: 32x32 input)
    or quick (``QUICK_HUB``)."""
    if which == "quick":
        return list(QUICK_HUB)
    names = hub.archs()
    return names if which == "all" else [n for n in names if hub.arch_info(n).shape[-1] <= 32]


def _models(n_ofa: int, hub_names: list[str]) -> list[tuple[str, torch.nn.Module, torch.Tensor]]:
    """Returns (name, model in eval mode, example input of batch 2) of every export target."""
    out = []
    for name in hub_names:
        torch.manual_seed(0)
        out.append((f"hub:{name}", hub.model(name).eval(), hub.example_input(name, batch=2)))
    torch.manual_seed(0)
    net = OFAMobileNetV3(small_spec("ofa")).eval()
    space = net.search_space()
    for seed in range(n_ofa):
        model = extract(net, space.sample_dims(seed)).eval()
        out.append((f"ofa:{seed}", model, torch.randn(2, 1, 28, 28)))
    digits = DigitsCNN()
    torch.manual_seed(0)
    out.append(("demo:DigitsCNN", freeze(digits, digits.search_space().sample(0)).eval(),
                torch.randn(2, 1, 8, 8)))  # fmt: skip
    return out


def _hf_models(which: str) -> list[tuple[str, torch.nn.Module, torch.Tensor]]:
    """Returns (name, model in eval mode, example input of batch 2) of the Hugging Face demo
    models ``which`` names: all, demo (``examples/gpt_shakespeare.py``'s GPT-2) or none."""
    if which == "none":
        return []
    import nasforge as nf

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from gpt_shakespeare import BLOCK, GPTSpace

    torch.manual_seed(0)
    demo = GPTSpace()
    out = [("hf:gpt_shakespeare", nf.freeze(demo, demo.search_space().sample(0)).eval(),
            torch.randint(0, 65, (2, BLOCK)))]  # fmt: skip
    if which == "demo":
        return out
    from mutate_zoo import models  # the mutator zoo, beside this script

    inputs = {"bert": torch.randint(0, 100, (2, 16)), "gpt2": torch.randint(0, 100, (2, 16)),
              "vit": torch.randn(2, 3, 224, 224)}  # fmt: skip
    for name, (build, mutators) in models().items():
        if name in inputs:
            torch.manual_seed(0)
            space = nf.MutatedSpace(build(), mutators())
            model = nf.freeze(space, space.search_space().sample(0)).eval()
            out.append((f"hf:{name}", model, inputs[name]))
    return out


def export_ok(
    models: list[tuple[str, torch.nn.Module, torch.Tensor]], formats: list[str]
) -> dict[str, Any]:
    """Returns export_ok, max_abs_diff, failures and seconds per format over ``models``."""
    ok = {f: 0 for f in formats}
    diffs: list[float] = []
    failures: list[str] = []
    seconds = {f: 0.0 for f in formats}
    with tempfile.TemporaryDirectory(prefix="nasforge-deploy-") as d:
        for name, model, x in models:
            for fmt in formats:
                t = time.perf_counter()
                try:
                    r = export_model(model, Path(d) / name.replace(":", "_"), fmt, example=x)
                except Exception as exc:  # counted and named: the benchmark goes on
                    failures.append(f"{name} {fmt}: {str(exc).splitlines()[0][:300]}")
                else:
                    ok[fmt] += 1
                    diffs.append(r["max_abs_diff"])
                seconds[fmt] += time.perf_counter() - t
                log.info("%s %s %.1fs", name, fmt, time.perf_counter() - t)
    return {
        "export_ok": {f: round(ok[f] / len(models), 4) for f in formats},
        "max_abs_diff": max(diffs) if diffs else None,
        "failures": failures,
        "export_seconds": {f: round(s, 1) for f, s in seconds.items()},
    }


def _spearman(a: list[float], b: list[float]) -> float:
    """Returns Spearman's rank correlation of ``a`` and ``b`` (ties get their mean rank)."""

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def table_vs_measured(n: int, repeats: int, calibrate: int = CALIBRATE) -> dict[str, Any]:
    """Returns table_vs_measured and onnxruntime_over_torch for ``n`` random sub-networks."""
    torch.manual_seed(0)
    net = OFAMobileNetV3(small_spec("ofa")).eval()
    space = net.search_space()
    load = [round(os.getloadavg()[0], 2)]
    t = time.perf_counter()
    cal = [space.sample_dims(CALIBRATION_SEED + i) for i in range(calibrate)]
    archs = [space.sample_dims(10_000 + i) for i in range(n)]
    on: dict[str, Any] = {"n_runs": repeats, "threads": 1, "clock": "cpu"}
    # make_latency's table mode, with the evaluated networks timed in the same rounds
    shapes = distinct_shapes(space)
    entries, measured = table_latencies(net, shapes, cal + archs, runtime="onnxruntime", **on)
    table = LatencyTable(space, entries)
    scale, offset = table.calibrate(cal, measured[:calibrate]) if calibrate else (1.0, 0.0)
    table_s = time.perf_counter() - t
    meas = measured[calibrate:]
    eager = network_latencies(net, archs, runtime="torch", **on)
    ratio = [m / e for m, e in zip(meas, eager, strict=True)]
    pred = [table(a) for a in archs]
    sums = [(p - offset) / scale for p in pred]
    load.append(round(os.getloadavg()[0], 2))

    def error(p: list[float]) -> float:
        return round(statistics.median(abs(a - b) / b for a, b in zip(p, meas, strict=True)), 4)

    return {
        "table_vs_measured": {
            "spearman_rho": round(_spearman(pred, meas), 4),
            "median_abs_rel_error": error(pred),
            "raw": {
                "spearman_rho": round(_spearman(sums, meas), 4),
                "median_abs_rel_error": error(sums),
            },
            "calibration": {
                "networks": calibrate,
                "scale": round(scale, 4),
                "offset_ms": round(offset, 4),
            },
            "clock": "cpu",
            "n_subnets": n,
            "n_layer_shapes": len(shapes),
            "table_seconds": round(table_s, 1),
            "repeats": repeats,
            "load": load,
            "measured_ms_median": round(statistics.median(meas), 4),
            "predicted_ms_median": round(statistics.median(pred), 4),
        },
        "onnxruntime_over_torch": round(statistics.median(ratio), 4),
    }


def nni_equal(n_archs: int) -> dict[str, Any]:
    """Returns {"nni_equal": {space: fraction}, "nni_equal_freeze": ...} from
    ``NNI_EQUAL_HOOK``, or null and why."""
    module, name = NNI_EQUAL_HOOK
    try:
        out = getattr(importlib.import_module(module), name)(n=n_archs)
        return {k: out[k] for k in ("nni_equal", "nni_equal_freeze", "unmapped")}
    except (ImportError, AttributeError, NasforgeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {"nni_equal": None, "nni_equal_reason": f"{module}.{name}: {reason}"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-ofa", type=int, default=50, help="random OFA sub-networks")
    p.add_argument("--repeats", type=int, default=N_RUNS["table"],
                   help="timed calls per latency (median; a table's shipped default)")  # fmt: skip
    p.add_argument("--n-nni", type=int, default=50, help="architectures per NNI space")
    p.add_argument("--formats", default=",".join(FORMATS), help="comma-separated formats")
    p.add_argument(
        "--hub",
        choices=("all", "small", "quick"),
        default="all",
        help="hub architectures: all, the CIFAR-sized ones, or one (--quick)",
    )
    p.add_argument(
        "--hf",
        choices=("all", "demo", "none"),
        default="all",
        help="Hugging Face demo models: all four, the GPT-2 of examples/gpt_shakespeare.py, none",
    )
    p.add_argument(
        "--quick", action="store_true", help="1 hub arch, 3 sub-networks, the demo HF model"
    )
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    torch.set_num_threads(1)
    n_ofa = 3 if args.quick else args.n_ofa
    repeats = 5 if args.quick else args.repeats
    formats = args.formats.split(",")
    names = _hub_names("quick" if args.quick else args.hub)
    hf = _hf_models("demo" if args.quick else args.hf)
    models = _models(n_ofa, names) + hf
    result: dict[str, Any] = {
        "hub_archs": names,
        "hf_models": [name for name, _, _ in hf],
        "tolerance": TOLERANCE,
    }
    result.update(export_ok(models, formats))
    result["n_models"] = len(models)
    result.update(table_vs_measured(n_ofa, repeats))
    result.update(nni_equal(5 if args.quick else args.n_nni))
    result["threads"] = 1
    print(json.dumps(result))


if __name__ == "__main__":
    main()
