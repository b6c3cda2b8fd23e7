"""The model space hub checked against the papers' tables: every registered space's size
beside the size its paper states, and every published architecture, frozen at its paper's
resolution and class count, with its parameters and multiply-adds beside the paper's.

    python benchmarks/hub.py [--only NAME ...]

Parameters count every parameter of the frozen model; multiply-adds count convolutions and
fully connected layers on one input (:func:`nasforge.hub.profile`), as the papers' "Mult-Adds"
do. A relative error is ``measured / paper - 1``; the targets are 2% (parameters) and 5%
(multiply-adds). The entries iterate over the hub's registry, so every family's spaces and
architectures appear. The paper's number is the baseline of each figure.

Last line: {"spaces": {name: {"size", "size_paper"}}, "archs": {name: {"params",
"params_paper", "madds", "madds_paper", "source"}}, "max_params_rel_error",
"max_madds_rel_error"} (``size_paper``/``*_paper`` null where the paper states none).
"""

from __future__ import annotations

import argparse
import json
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
        out[name] = {"size": size, "size_paper": info.size_paper}
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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", help="space or architecture names (default: all)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
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
    print(f"({time.perf_counter() - t:.0f} s)")
    print(json.dumps({
        "spaces": spaces,
        "archs": archs,
        "max_params_rel_error": max(errors["params"], default=None),
        "max_madds_rel_error": max(errors["madds"], default=None),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
