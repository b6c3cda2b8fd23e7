"""NNI 3.0 against nasforge on NNI's own spaces (issue 53): ``nni_equal``.

Run:  python benchmarks/nni_equal.py [--n 50] [--seed 0] [--spaces NasBench201 ...]
      python benchmarks/nni_equal.py --quick   (2 architectures of Hello NAS and NasBench201)

For NNI's "Hello NAS" tutorial space (``examples/nni/hello_nas.py``, NNI's code unchanged) and
NNI's hub spaces, built once by the installed NNI and once by ``nasforge.compat.nni.load``
from the same source, ``--n`` architectures drawn by NNI's sampler are frozen by both; NNI's
weights are loaded into nasforge's model and both run on the same input
(:func:`nasforge.compat.nni.conformance.compare`). An architecture counts as equal when the
parameter counts match, the state dict loads strictly and the outputs differ by at most 1e-6.
NNI's network is the one NNI 3.0 builds for an exported architecture (the space under
``model_context``); ``nni_equal_freeze`` counts against NNI's in-place ``space.freeze`` too,
which gives another network for ``MobileNetV3Space`` (docs/from-nni.md).

A space nasforge cannot map is not measured: null, its construct named under ``unmapped``.
Needs ``nni==3.0`` installed. The last line is one JSON object::

    {"nni_equal": {space: fraction}, "nni_equal_freeze": {space: fraction}, "n": ...,
     "max_abs_diff": {space: ...},
     "unmapped": {space: error}, "mismatch": {space: first mismatch}, "seconds": ...,
     "nni_freeze_differences": {space: {why: count}}}

(the last only for a space where NNI's in-place freeze differed: why, with how many).

``benchmarks/deploy.py`` calls :func:`nni_equal` for its ``nni_equal`` field.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
HELLO = str(ROOT / "examples" / "nni" / "hello_nas.py")
HUB = "nni.nas.hub.pytorch"

#: space name -> (source, class, constructor keywords, input shape); the hub spaces at small
#: sizes (fewer cells, narrower) so that 50 architectures each run in minutes on a CPU
SPACES: dict[str, tuple[str, str, dict[str, Any], tuple[int, ...]]] = {
    "hello_nas": (HELLO, "MyModelSpace", {}, (2, 1, 28, 28)),
    "NasBench201": (HUB, "NasBench201", {"stem_out_channels": 8, "num_modules_per_stack": 2},
                    (2, 3, 32, 32)),
    "DARTS": (HUB, "DARTS", {"width": 8, "num_cells": 4}, (2, 3, 32, 32)),
    "ENAS": (HUB, "ENAS", {"width": 8, "num_cells": 4}, (2, 3, 32, 32)),
    "ProxylessNAS": (HUB, "ProxylessNAS", {}, (2, 3, 64, 64)),
    "ShuffleNetSpace": (HUB, "ShuffleNetSpace", {}, (2, 3, 64, 64)),
    "MobileNetV3Space": (HUB, "MobileNetV3Space", {}, (2, 3, 64, 64)),
    "NasBench101": (HUB, "NasBench101", {"stem_out_channels": 16, "num_stacks": 1,
                                         "num_modules_per_stack": 1}, (2, 3, 32, 32)),
    "AutoformerSpace": (HUB, "AutoformerSpace", {}, (2, 3, 224, 224)),
}  # fmt: skip


def nni_equal(n: int = 50, seed: int = 0, spaces: list[str] | None = None) -> dict[str, Any]:
    """Returns ``{"nni_equal": {space: fraction}, "nni_equal_freeze": ..., "max_abs_diff":
    ..., "unmapped": ..., "mismatch": ...}`` (and ``"nni_freeze_differences"`` where NNI's
    in-place freeze differed) over ``n`` NNI-sampled architectures of each
    space (all of :data:`SPACES` when ``spaces`` is None).

    Raises:
        ConfigError: NNI is not installed.
    """
    from nasforge.compat.nni.conformance import compare, pair, require_nni
    from nasforge.errors import SpaceError

    require_nni()
    out: dict[str, Any] = {
        "nni_equal": {}, "nni_equal_freeze": {}, "max_abs_diff": {}, "unmapped": {}, "mismatch": {}
    }  # fmt: skip
    for name in spaces or list(SPACES):
        source, cls, kwargs, shape = SPACES[name]
        try:
            theirs, ours = pair(source, cls, **kwargs)
        except SpaceError as e:
            out["nni_equal"][name] = out["nni_equal_freeze"][name] = None  # not measured
            out["unmapped"][name] = str(e)
            continue
        result = compare(theirs, ours, shape, n=n, seed=seed, name=name)
        out["nni_equal"][name] = result.fraction
        out["nni_equal_freeze"][name] = result.fraction_freeze
        out["max_abs_diff"][name] = result.max_abs_diff
        if result.freeze_differences:
            out.setdefault("nni_freeze_differences", {})[name] = result.freeze_differences
        if result.mismatches:
            first = dict(result.mismatches[0])
            first["count"] = len(result.mismatches)
            out["mismatch"][name] = first
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="architectures per space")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spaces", nargs="*", choices=list(SPACES), default=None)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 architectures of hello_nas and NasBench201")  # fmt: skip
    args = parser.parse_args()
    if importlib.util.find_spec("nni") is None:
        reason = "NNI is not installed (pip install nni==3.0)"
        print(json.dumps({"skipped": True, "reason": reason}))
        return 0
    if args.quick:
        args.n, args.spaces = 2, ["hello_nas", "NasBench201"]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    warnings.filterwarnings("ignore", module="nni")  # NNI 3.0 on torch 2.13: version warnings
    torch.set_num_threads(1)
    start = time.perf_counter()
    out = nni_equal(args.n, args.seed, args.spaces)
    out["n"] = args.n
    out["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
