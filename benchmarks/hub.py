"""The model space hub checked against the papers' tables: every registered space's size
beside the size its paper states, and every published architecture, frozen at its paper's
resolution and class count, with its parameters and multiply-adds beside the paper's.

    python benchmarks/hub.py [--only NAME ...] [--quick]

``--quick`` (the slow test set's smoke run): one space and one architecture
(``nasbench201``, ``mnasnet-a1``).

Parameters count every parameter of the frozen model; multiply-adds count convolutions and
fully connected layers on one input (:func:`nasforge.hub.profile`), as the papers' "Mult-Adds"
do. A relative error is ``measured / paper - 1``; the targets are 2% (parameters) and 5%
(multiply-adds). The entries iterate over the hub's registry, so every family's spaces and
architectures appear. The paper's number is the baseline of each figure.

A figure outside its target (a size not equal to the paper's, parameters off by more than 2%,
multiply-adds by more than 5%) is an exception: the entry's ``exception`` key names the
paragraph of docs/hub.md ("Where a number is not met, and why") that explains it.

Last line: {"spaces": {name: {"size", "size_paper", "size_distinct"}}, "archs": {name:
{"params", "params_paper", "madds", "madds_paper", "source"}}, "max_params_rel_error",
"max_madds_rel_error", "exceptions": {name: reason-key}, "space_exceptions": {name:
reason-key}, "unexplained": [...], "stale_exceptions": [...]} (``size_paper``/``*_paper``
null where the paper states none; ``size_distinct`` the distinct networks the paper counts
where encodings repeat, NAS-Bench-101's 423,624 cells, else null; ``unexplained`` lists the
misses without a key, each "space:NAME" or "arch:NAME:params|madds"; ``stale_exceptions``
the keys of entries that meet their targets). The exit status is 1 when something is unexplained.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from nasforge import hub


def _rel(measured: float, paper: float | None) -> float | None:
    return None if paper is None else measured / paper - 1.0


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.1f}%"


def _spaces(names: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    print(f"{'space':<16}{'size':>14}{'paper':>14}  equal  note")
    for name in names:
        info = hub.space_info(name)
        size = hub.space(name).search_space().size
        out[name] = {
            "size": size,
            "size_paper": info.size_paper,
            "size_distinct": info.size_distinct,
        }
        same = "" if info.size_paper is None else ("yes" if size == info.size_paper else "NO")
        paper = "-" if info.size_paper is None else f"{info.size_paper:.3g}"
        print(f"{name:<16}{size:>14.4g}{paper:>14}  {same:<5}  {info.note}", flush=True)
    return out


def _archs(names: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    print(f"\n{'architecture':<20}{'params':>10}{'paper':>8}{'err':>8}"
          f"{'MAdds':>10}{'paper':>8}{'err':>8}  source")  # fmt: skip
    for name in names:
        info = hub.arch_info(name)
        prof = hub.profile(hub.model(name), hub.example_input(name))
        out[name] = {
            "params": prof.params,
            "params_paper": info.params_paper,
            "madds": prof.madds,
            "madds_paper": info.madds_paper,
            "source": info.source,
        }
        pp = "-" if info.params_paper is None else f"{info.params_paper / 1e6:.2f}M"
        mp = "-" if info.madds_paper is None else f"{info.madds_paper / 1e6:.0f}M"
        e_p = _pct(_rel(prof.params, info.params_paper))
        e_m = _pct(_rel(prof.madds, info.madds_paper))
        print(
            f"{name:<20}{prof.params / 1e6:>9.3f}M{pp:>8}{e_p:>8}"
            f"{prof.madds / 1e6:>9.1f}M{mp:>8}{e_m:>8}  {info.source}",
            flush=True,
        )
    return out


_TARGETS = {"params": 0.02, "madds": 0.05}


def _exceptions(
    spaces: dict[str, dict[str, Any]], archs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Returns the misses (figures outside the targets) with their reason keys, the misses
    without one, and the keys registered on entries that miss nothing."""
    out: dict[str, Any] = {
        "exceptions": {},
        "space_exceptions": {},
        "unexplained": [],
        "stale_exceptions": [],
    }
    for name, s in spaces.items():
        key = hub.space_info(name).exception
        if s["size_paper"] is not None and s["size"] != s["size_paper"]:
            if key:
                out["space_exceptions"][name] = key
            else:
                out["unexplained"].append(f"space:{name}")
        elif key:
            out["stale_exceptions"].append(f"space:{name}:{key}")
    for name, a in archs.items():
        key = hub.arch_info(name).exception
        missed = [
            k
            for k, target in _TARGETS.items()
            if (e := _rel(a[k], a[f"{k}_paper"])) is not None and abs(e) > target
        ]
        if missed and key:
            out["exceptions"][name] = key
        elif missed:
            out["unexplained"] += [f"arch:{name}:{k}" for k in missed]
        elif key:
            out["stale_exceptions"].append(f"arch:{name}:{key}")
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", help="space or architecture names (default: all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="--only nasbench201 mnasnet-a1")
    args = p.parse_args(argv)
    if args.quick:
        args.only = ["nasbench201", "mnasnet-a1"]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    only = set(args.only or hub.spaces() + hub.archs())
    t = time.perf_counter()
    spaces = _spaces([n for n in hub.spaces() if n in only])
    archs = _archs([n for n in hub.archs() if n in only])
    errors = {
        key: [abs(e) for a in archs.values() if (e := _rel(a[key], a[f"{key}_paper"])) is not None]
        for key in ("params", "madds")
    }
    for name, info in ((n, hub.arch_info(n)) for n in archs):
        if info.note:
            print(f"note {name}: {info.note}")
    misses = _exceptions(spaces, archs)
    for name, key in {**misses["space_exceptions"], **misses["exceptions"]}.items():
        print(f"exception {name}: explained in docs/hub.md under {key!r}")
    for what in misses["unexplained"]:
        print(f"UNEXPLAINED {what}: outside its target and no reason registered")
    print(f"({time.perf_counter() - t:.0f} s)")
    print(json.dumps({
        "spaces": spaces,
        "archs": archs,
        "max_params_rel_error": max(errors["params"], default=None),
        "max_madds_rel_error": max(errors["madds"], default=None),
        **misses,
    }))  # fmt: skip
    if misses["unexplained"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
