"""Time per search step, as ratios to the standalone network's training step, in one run.

On the 8-cell, 16-channel DARTS/NASP cell space at one batch size, single-threaded, interleaved
repetitions, median times:

    standalone  forward + backward + SGD step of the frozen network of one architecture
    spos        sample-and-activate that path + forward + backward + SGD step on the supernet
    nasb        one NASB step (Algorithm 1: F_A, B_A on val, F_w, B_w on train, both updates)
    darts       one first-order DARTS step (alpha on val, then weights on train)

NASB and DARTS steps hold two forward/backward passes each (architecture and weights), so their
ratios also appear per pass. Target (issue 4): SPOS <= 1.15 x standalone. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _oneshot_common import setup  # noqa: E402

from nasforge.oneshot import activate, config_for  # noqa: E402
from nasforge.oneshot.common import arch_optimizer, weight_optimizer  # noqa: E402
from nasforge.oneshot.darts import darts_step  # noqa: E402
from nasforge.oneshot.nasb import nasb_step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="16x16 images, batch 8, 5 reps")
    parser.add_argument("--image", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    image, batch, reps = (16, 8, 5) if args.quick else (args.image, args.batch, args.reps)
    torch.set_num_threads(1)
    s = setup(image, batch)
    nets, x, y, arch = s["nets"], s["x"], s["y"], s["arch"]
    cfg = config_for("nasb")  # the loop's defaults; NASB's step reads its order
    opts = {
        name: weight_optimizer(
            list(net.weights()) if hasattr(net, "weights") else list(net.parameters()), cfg, 100
        )[0]
        for name, net in nets.items()
    }
    arch_opts = {n: arch_optimizer(nets[n].arch_parameters(), cfg) for n in ("darts", "nasb")}

    def plain(name: str) -> None:
        if name == "spos":
            activate(nets["spos"], arch)
        loss = torch.nn.functional.cross_entropy(nets[name](x), y)
        loss.backward()
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)

    steps = {
        "standalone": lambda: plain("standalone"),
        "spos": lambda: plain("spos"),
        "nasb": lambda: nasb_step(
            nets["nasb"], opts["nasb"], arch_opts["nasb"], (x, y), (x, y), cfg
        ),
        "darts": lambda: darts_step(
            nets["darts"], opts["darts"], arch_opts["darts"], (x, y), (x, y), cfg
        ),
    }
    for fn in steps.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(reps):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = {k: med[k] / med["standalone"] for k in ("spos", "nasb", "darts")}
    result = {
        "step_time_ratio_to_standalone": ratio,
        "per_pass_ratio_to_standalone": {k: ratio[k] / 2 for k in ("nasb", "darts")},
        "nasb_to_darts": med["nasb"] / med["darts"],
        "step_seconds": med,
        "targets_met": {"spos_le_1.15_standalone": ratio["spos"] <= 1.15},
        "batch": batch,
        "image": image,
        "reps": reps,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
