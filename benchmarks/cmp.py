"""Consecutive model parallel (NASB-CMP §2.2, §3.1): step time of CMP over MP at M = 2, idle
fractions, data-parallel and pipelining baselines, bytes saved for backward per partition, the
simulated ratio at M = 4 and 8 from measured per-cell costs, CMP x DP in the simulator, and
whether a NASB-CMP search on digits finds the one-device architecture.

    python benchmarks/cmp.py                 # CPU: 2 processes (gloo), 1 thread each
    python benchmarks/cmp.py --device cuda   # 2 threads on two CUDA streams of one GPU, and
                                             # NCCL processes when there are >= 2 GPUs
    python benchmarks/cmp.py --quick         # the slow test set's smoke run: 3 cells of 4
                                             # channels on 8x8 inputs, batch 8, one round of
                                             # two steps, a one-epoch quality search on 256
                                             # digits

Step times are medians over timed steps after warm-up, taken in interleaved rounds (MP, CMP,
DP, pipelining in turn) so that a busy machine slows all alike; each ratio is the median of
the per-round ratios. The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nasforge.data import load_digits  # noqa: E402
from nasforge.oneshot import nasb  # noqa: E402
from nasforge.oneshot.cmp import (
    CMPSettings,  # noqa: E402
    cmp_search,  # noqa: E402
    profile_steps,  # noqa: E402
)
from nasforge.oneshot.cmp_partition import phase_costs, units  # noqa: E402
from nasforge.oneshot.cmp_schedule import (  # noqa: E402
    PHASES,
    balanced_partition,
    partition_order,
    simulate,
    theory_ratio,
)
from nasforge.oneshot.search import search, supernet  # noqa: E402
from nasforge.spaces import DartsCellSpace, digits_cell_space  # noqa: E402

log = logging.getLogger("benchmarks.cmp")


def _space(a: argparse.Namespace) -> DartsCellSpace:
    return DartsCellSpace(n_cells=a.cells, channels=a.channels)


def _data(a: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    n = 2 * a.batch * (a.warmup + a.steps)  # enough full batches for every timed step
    x = torch.randn(n, 3, a.size, a.size, generator=g)
    return x, torch.randint(0, 10, (n,), generator=g)


VARIANTS = [("mp", False), ("cmp", False), ("cmp", True)]  # (schedule, defer_arch_grads)
NAMES = ["mp", "cmp", "cmp_deferred"]


def timings(a: argparse.Namespace) -> dict[str, Any]:
    """Returns the measured step times, ratios and idle fractions.

    MP, CMP and deferred CMP run in turn, step by step, in one launch of the workers (so they
    meet the same load on a shared machine); a ratio is the median over steps of the step time
    over the MP step just before it, then the median over rounds. Data parallel and the
    pipelining baseline need other worker layouts: they run in their own launches, each round
    divided by that round's MP."""
    data, common = _data(a), {"batch_size": a.batch, "epochs": 1, "warmup": a.warmup,
                              "steps": a.steps, "device": a.device}  # fmt: skip
    cuda = a.device == "cuda"
    proc = "process" if (not cuda or torch.cuda.device_count() >= 2) else "thread"
    bounds = None
    got: dict[str, list[Any]] = {"process": [], "thread": [], "dp": [], "pipelining": []}
    for rnd in range(a.rounds):
        for workers in dict.fromkeys((proc, "thread")):  # one GPU: threads only
            r = profile_steps(_space(a), "nasb", data, model_parallel=2, workers=workers,
                              variants=VARIANTS, bounds=bounds, **common)  # fmt: skip
            bounds = r["bounds"]  # balanced once by measured unit time, then kept
            got[workers].append(r)
            log.info("round %d %s: %s s/step, paired %s, idle %s", rnd, workers,
                     [round(v, 4) for v in r["step_s"]], [round(v, 3) for v in r["paired"]],
                     r["idle_fraction"])  # fmt: skip
        r = profile_steps(_space(a), "nasb", data, model_parallel=1, replicas=2, workers=proc,
                          **common)  # fmt: skip
        got["dp"].append(r)
        log.info("round %d dp: %.4f s/step", rnd, r["step_s"])
        if not cuda:
            from nasforge.oneshot.cmp_pipelining import profile_pipelining

            cpu = {k: v for k, v in common.items() if k != "device"}
            r = profile_pipelining(_space(a), "nasb", data, model_parallel=2, bounds=bounds,
                                   n_microbatches=a.microbatches, **cpu)  # fmt: skip
            got["pipelining"].append(r)
            log.info("round %d pipelining: %.4f s/step", rnd, r["step_s"])
    med = statistics.median

    def paired(kind: str, v: int) -> float:
        return med(r["paired"][v] for r in got[kind])

    def over_mp(name: str) -> float | None:
        if not got[name]:
            return None
        return med(x["step_s"] / p["step_s"][0] for x, p in zip(got[name], got[proc]))

    def idle(kind: str, v: int) -> list[float]:
        rs = got[kind]
        return [med(r["idle_fraction"][v][k] for r in rs) for k in range(2)]

    step = {f"{n}_{kind}": med(r["step_s"][v] for r in got[kind])
            for kind in dict.fromkeys((proc, "thread")) for v, n in enumerate(NAMES)}  # fmt: skip
    step.update({k: med(r["step_s"] for r in got[k]) for k in ("dp", "pipelining") if got[k]})
    return {
        "cmp_over_mp": paired(proc, 1),
        "cmp_deferred_over_mp": paired(proc, 2),
        "dp_over_mp": over_mp("dp"),
        "pipelining_over_mp": over_mp("pipelining"),
        "thread_cmp_over_mp": paired("thread", 1),
        "thread_cmp_deferred_over_mp": paired("thread", 2),
        "thread_over_process": {
            n: med(t["step_s"][v] / p["step_s"][v] for t, p in zip(got["thread"], got["process"]))
            for v, n in enumerate(NAMES)
        }
        if got["process"]
        else None,
        "idle_fraction": {
            **{n: idle(proc, v) for v, n in enumerate(NAMES)},
            **{f"{n}_thread": idle("thread", v) for v, n in enumerate(NAMES)},
            "dp": [med(r["idle_fraction"][k] for r in got["dp"]) for k in range(2)],
        },
        "step_s": step,
        "bounds": bounds,
        "workers": proc,
    }


def _spin(n: int) -> float:
    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    t0 = time.perf_counter()
    for _ in range(n):
        a = torch.tanh(a @ a)
    return time.perf_counter() - t0


def machine_speedup(n: int = 300) -> float:
    """Returns how much faster two 1-thread processes finish two equal jobs side by side than
    one after the other (2.0 on two free cores): the overlap this machine offers right now."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_spin, [n, n])  # warm both
        t0 = time.perf_counter()
        pool.map(_spin, [n])
        pool.map(_spin, [n])
        serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        pool.map(_spin, [n, n])
        return serial / (time.perf_counter() - t0)


# -- memory -----------------------------------------------------------------------------------


def _hooks(seen: dict[int, int], exclude: set[int]) -> Any:
    """Returns a context that records each saved tensor's storage bytes into ``seen``."""

    def pack(t: torch.Tensor) -> Any:
        s = t.untyped_storage()
        if s.data_ptr() not in exclude:
            seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def partition_bytes(algo: str, space: Any, x: torch.Tensor, bounds: list) -> list[int]:
    """Returns, per partition, the bytes saved for backward while CMP holds both graphs (F_A
    and F_w done, neither backward yet): distinct storages, parameters excluded."""
    net = supernet(space, algo, example=x[:2])
    if algo == "nasb":
        nasb.binarize(net)
    mods = units(net)
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    held: list[dict[int, int]] = [{} for _ in bounds]
    keep = []  # every graph stays alive, as in CMP between F_w and B_w
    for arch in (True, False):  # F_A (architecture in the graph), then F_w (weights only)
        for p in net.arch_parameters():
            p.requires_grad_(arch)
        state: tuple = (x,)
        for k, (lo, hi) in enumerate(bounds):
            state = tuple(t.detach().requires_grad_(k > 0) for t in state)
            with _hooks(held[k], params):
                for m in mods[lo:hi]:
                    state = m(*state)
            keep.append(state)
    for p in net.arch_parameters():
        p.requires_grad_(True)
    return [sum(h.values()) for h in held]


def darts_single_bytes(space: Any, x: torch.Tensor) -> int:
    """Returns the bytes one-device DARTS saves for backward in one pass (its peak: DARTS
    holds one graph at a time)."""
    net = supernet(space, "darts", example=x[:2])
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    seen: dict[int, int] = {}
    with _hooks(seen, params):
        out = net(x)
    del out
    return sum(seen.values())


def memory(a: argparse.Namespace, bounds: list) -> dict[str, Any]:
    """Returns bytes saved for backward per partition (max over partitions) and per device."""
    x, y = (t[: a.batch] for t in _data(a))
    nasb_parts = partition_bytes("nasb", _space(a), x, bounds)
    darts_parts = partition_bytes("darts", _space(a), x, bounds)
    single = darts_single_bytes(_space(a), x)
    return {
        "saved_bytes_per_partition": {
            "nasb_cmp": max(nasb_parts), "darts_cmp": max(darts_parts), "darts_single": single,
        },
        "saved_bytes_partitions": {"nasb_cmp": nasb_parts, "darts_cmp": darts_parts},
        "nasb_cmp_below_darts_single": max(nasb_parts) < single,
    }  # fmt: skip


# -- simulation -------------------------------------------------------------------------------


def simulation(a: argparse.Namespace, t: dict[str, Any]) -> dict[str, Any]:
    """Returns simulated CMP/MP at M = 2, 4, 8 from measured per-cell phase costs of a deeper
    supernet, and CMP x DP configurations of 8 devices."""
    space = DartsCellSpace(n_cells=a.sim_cells, channels=a.channels)
    x, y = (v[: a.batch] for v in _data(a))
    net = supernet(space, "nasb", example=x[:2])
    cell = phase_costs(net, (x, y), repeats=3)
    half = phase_costs(net, (x[: a.batch // 2], y[: a.batch // 2]), repeats=3)
    total = [sum(c.values()) for c in cell]

    def step(
        costs: list[dict[str, float]], m: int, sched: str, sync: Any = None, deferred: bool = False
    ) -> Any:
        parts = balanced_partition([sum(c.values()) for c in costs], m)
        pc = {(k, p): sum(costs[i][p] for i in r) for k, r in enumerate(parts) for p in PHASES}
        if deferred:  # B_A's pass upstream ~ B_w's cost; the rest is the recomputation
            for k in range(m):
                total_ba = pc[(k, "B_A")]
                pc[(k, "B_A")] = min(total_ba, pc[(k, "B_w")])
                pc[(k, "R_A")] = total_ba - pc[(k, "B_A")]
        orders = [partition_order(m, sched, k, deferred) for k in range(m)]
        return simulate(pc, orders, sync=None if sync is None else sync(parts))

    ratios, deferred, equal = {}, {}, {}
    share = {p: sum(c[p] for c in cell) / sum(total) for p in PHASES}
    for m in (2, 4, 8):
        mp = step(cell, m, "mp").time
        ratios[str(m)] = step(cell, m, "cmp").time / mp
        deferred[str(m)] = step(cell, m, "cmp", deferred=True).time / mp
        flat = [dict(share) for _ in range(m)]  # perfectly balanced, measured phase shares
        equal[str(m)] = step(flat, m, "cmp").time / step(flat, m, "mp").time
    # CMP x DP: R replicas each take batch/R; gradient all-reduce of each partition's weights
    # over a ring at the bandwidth the 2-process data-parallel run showed (idle time there is
    # the all-reduce of every weight)
    w_bytes = [sum(p.numel() * p.element_size() for p in m.parameters()) for m in units(net)]
    dp_idle = statistics.median(t["idle_fraction"]["dp"]) * t["step_s"]["dp"]  # the all-reduce
    bw = sum(w_bytes) / max(dp_idle, 1e-6)  # bytes/s
    mxr = {}
    for m, r in ((8, 1), (4, 2), (2, 4), (1, 8)):
        costs = cell if r == 1 else [{p: c[p] * 2 / r for p in c} for c in half]  # ~ linear

        def sync(parts: Any, r: int = r) -> list[float]:
            return [2 * (r - 1) / r * sum(w_bytes[i] for i in rg) / bw for rg in parts]

        sched = "cmp" if m > 1 else "mp"
        s = step(costs, m, sched, sync if r > 1 else None, deferred=True).time
        mxr[f"M{m}xR{r}"] = {"step_s": s, "samples_per_s": a.batch / s}
    return {
        "simulated_cmp_over_mp": ratios,
        "simulated_cmp_deferred_over_mp": deferred,
        "simulated_cmp_over_mp_balanced": equal,
        "phase_share": share,
        "theory_cmp_over_mp": {str(m): theory_ratio(m) for m in (2, 4, 8)},
        "simulated_cmp_dp_8_devices": mxr,
        "unit_cost_s": total,
        "allreduce_bytes_per_s": bw,
    }


# -- quality ----------------------------------------------------------------------------------


def quality(a: argparse.Namespace) -> dict[str, Any]:
    """Returns whether a NASB-CMP search on digits (cell space) finds the same architecture as
    one-device NASB with the same seed, and both wall-clock times."""
    x, y = load_digits(seed=0).train[: a.quality_examples]
    kw = {"epochs": a.quality_epochs, "batch_size": 64, "seed": 0}
    t0 = time.perf_counter()
    one = search(digits_cell_space(), "nasb", (x, y), **kw)
    t1 = time.perf_counter()
    par = cmp_search(digits_cell_space(), "nasb", (x, y), CMPSettings(model_parallel=2), **kw)
    t2 = time.perf_counter()
    return {
        "same_arch_as_single": one.arch == par.arch,
        "same_supernet_bitwise": all(
            torch.equal(v, par.supernet.state_dict()[k])
            for k, v in one.supernet.state_dict().items()
        ),
        "quality_search_s": {"single": t1 - t0, "cmp": t2 - t1},
        "quality_val_acc": {
            "single": one.history[-1]["val_acc"],
            "cmp": par.history[-1]["val_acc"],
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--cells", type=int, default=5)
    ap.add_argument("--sim-cells", type=int, default=8)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--quality-epochs", type=int, default=2)
    ap.add_argument("--quality-examples", type=int, default=None, help="digits (default: all)")
    ap.add_argument("--quick", action="store_true", help="tiny cells, 1 round of 2 steps")
    a = ap.parse_args(argv)
    if a.quick:
        a.cells, a.channels, a.size, a.batch = 3, 4, 8, 8
        a.rounds, a.warmup, a.steps, a.quality_epochs, a.quality_examples = 1, 1, 2, 1, 256
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    torch.set_num_threads(1)
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda needs a CUDA GPU; torch.cuda.is_available() is False here")
    t0 = time.perf_counter()
    speedup = machine_speedup()
    t = timings(a)
    t["machine_parallel_speedup"] = {"before": speedup, "after": machine_speedup()}
    out: dict[str, Any] = {**t, **memory(a, t["bounds"]), **simulation(a, t)}
    out.update(quality(a))
    out["theory_cmp_over_mp_m2"] = theory_ratio(2)
    out["device"] = a.device if a.device == "cpu" else torch.cuda.get_device_name()
    out["seconds"] = time.perf_counter() - t0
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
