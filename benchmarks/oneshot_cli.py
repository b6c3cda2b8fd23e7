"""The documented one-shot example, end to end, with the library's default thread count.

Runs ``nasforge run`` on the experiment file of docs/oneshot.md (the DARTS/NASP cell space for
the digits, NASB, 8 epochs, batch 64) in a fresh process, exactly as a user would, and reads
the per-epoch seconds from the run record. Before the library chose its thread count, one
epoch took 267 s on a busy 2-core machine (torch's default threads) and 6 s with one thread.

    python benchmarks/oneshot_cli.py [--epochs 8] [--quick]

``--quick`` (the slow test set's smoke run): one epoch.

Last line: one JSON object with ``seconds_per_epoch`` (mean), ``first_epoch_s``,
``total_s`` (the whole command, start-up included), ``threads`` and ``cores``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXPERIMENT = """
from nasforge.spaces import digits_cell_space

space = digits_cell_space()
data = "digits"
strategy = {{"name": "nasb", "epochs": {epochs}, "batch_size": 64}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="one epoch")
    args = ap.parse_args()
    if args.quick:
        args.epochs = 1
    sys.path.insert(0, str(ROOT))
    from nasforge.run.store import Store
    from nasforge.runtime.threads import default_threads

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "my_oneshot.py"
        f.write_text(EXPERIMENT.format(epochs=args.epochs))
        env = {k: v for k, v in os.environ.items() if k != "NASFORGE_THREADS"}
        env["PYTHONPATH"] = str(ROOT)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir", f"{tmp}/run"],
            env=env,
            check=True,
            cwd=tmp,
        )
        total = time.perf_counter() - t0
        with Store.open(f"{tmp}/run") as store:
            rows = store.progress()
            best = store.trials()[-1].metrics
    seconds = [r["seconds"] for r in rows]
    result = {
        "epochs": len(rows),
        "seconds_per_epoch": round(sum(seconds) / len(seconds), 2),
        "first_epoch_s": round(seconds[0], 2),
        "total_s": round(total, 1),
        "threads": default_threads(),
        "cores": len(os.sched_getaffinity(0)),
        "found_accuracy": round(best["accuracy"], 4),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
