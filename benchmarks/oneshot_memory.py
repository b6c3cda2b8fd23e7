"""Activation memory of one search step, DARTS vs NASB vs SPOS vs ProxylessNAS vs the
standalone network.

Bytes of tensors saved for backward (``saved_tensors_hooks``, deduplicated by storage, parameters
excluded) by the forward pass of one step on the 8-cell, 16-channel DARTS/NASP cell space at one
batch size, with the architecture parameters requiring gradients (the architecture pass, the
larger of a step's two graphs). NASB's G, SPOS's path and ProxylessNAS's active paths are set
to the standalone network's architecture; ProxylessNAS's architecture pass also holds a second
sampled candidate per mixed op (recomputed in backward, for Eq. 4). Largest batch in a fixed
budget: activation bytes are linear in the batch, so it is budget // (bytes per example).

Targets (issue 4): NASB <= 0.35 x DARTS, NASB <= 1.5 x standalone, SPOS <= 1.1 x standalone;
(issue 39) ProxylessNAS <= 2.5 x standalone, beside DARTS and NASB over standalone.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _oneshot_common import setup  # noqa: E402

from nasforge.oneshot.memory import saved_bytes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="16x16 images, batch 8")
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--budget-gib", type=float, default=8.0)
    args = parser.parse_args()
    image, batch = (16, 8) if args.quick else (args.image, args.batch)
    torch.set_num_threads(1)
    s = setup(image, batch)
    out = {name: saved_bytes(net, s["x"], s["y"]) for name, net in s["nets"].items()}
    budget = int(args.budget_gib * 2**30)
    result = {
        "saved_bytes": out,
        "ratios": {
            "nasb_to_darts": out["nasb"] / out["darts"],
            "nasb_to_standalone": out["nasb"] / out["standalone"],
            "spos_to_standalone": out["spos"] / out["standalone"],
            "proxylessnas_to_standalone": out["proxylessnas"] / out["standalone"],
            "darts_to_standalone": out["darts"] / out["standalone"],
        },
        "targets_met": {
            "nasb_le_0.35_darts": out["nasb"] <= 0.35 * out["darts"],
            "nasb_le_1.5_standalone": out["nasb"] <= 1.5 * out["standalone"],
            "spos_le_1.1_standalone": out["spos"] <= 1.1 * out["standalone"],
            "proxylessnas_le_2.5_standalone": out["proxylessnas"] <= 2.5 * out["standalone"],
        },
        "max_batch_in_budget": {k: budget // max(1, v // batch) for k, v in out.items()},
        "budget_bytes": budget,
        "batch": batch,
        "image": image,
        "space": "DartsCellSpace(n_cells=8, channels=16)",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
