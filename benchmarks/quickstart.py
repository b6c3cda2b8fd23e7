"""The README's Quickstart, timed: its commands, read from README.md, run as printed.

Runs every command of the Quickstart's search block (``examples/digits_evolution.py``, then
``nasforge status`` and ``nasforge export``) in order, in a fresh folder with ``examples`` and
``.venv`` linked in as in a clone, each in its own process with the library's default threads
(``NASFORGE_THREADS`` unset), exactly as a user types them. The README quotes the total.

    python benchmarks/quickstart.py [--quick]

Last line: one JSON object with ``quickstart_s`` (all commands, start-up included),
``command_s`` (per command), the example's own summary (best test accuracy of the search and
of random search, the random median, whether the search's best is one of its random draws),
``cores`` and the load average before and after. ``--quick`` (the slow test set's smoke run)
runs the same commands with ``--trials 4`` given to the example (4 trials of each search).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The venv whose python runs this script (not resolved: a venv's python is a symlink out of it).
VENV = Path(sys.executable).parent.parent


def quickstart_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """Returns the command lines of the Quickstart's search block: the first block after
    ``## Quickstart`` that the docs test runs (marked ``docs-test: slow``)."""
    text = readme.read_text()
    section = text[text.index("## Quickstart") :]
    section = section[: section.index("\n## ", 1)]
    block = re.search(r"<!-- docs-test: slow -->\n```bash\n(.*?)```", section, re.S)
    if block is None:
        raise SystemExit("README.md: no '<!-- docs-test: slow -->' bash block under Quickstart")
    lines = [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines()]
    return [ln for ln in lines if ln]


def main() -> None:
    """Runs the commands, then prints the JSON line last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the example with --trials 4")
    args = parser.parse_args()
    commands = quickstart_commands()
    if args.quick:
        commands = [c + " --trials 4" if c.endswith(".py") else c for c in commands]
    env = {k: v for k, v in os.environ.items() if k != "NASFORGE_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    load_before = os.getloadavg()
    seconds, summary = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "examples").symlink_to(ROOT / "examples")
        (work / ".venv").symlink_to(VENV)
        t0 = time.perf_counter()
        for cmd in commands:
            start = time.perf_counter()
            proc = subprocess.run(
                ["bash", "-c", cmd], cwd=work, env=env, capture_output=True, text=True
            )
            seconds.append(round(time.perf_counter() - start, 1))
            if proc.returncode != 0:
                sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
                raise SystemExit(f"`{cmd}` exited with {proc.returncode}")
            last = proc.stdout.strip().splitlines()[-1:] or [""]
            if last[0].startswith("{"):  # the example prints its summary as JSON
                summary = json.loads(last[0])
        total = time.perf_counter() - t0
    result = {
        "quickstart_s": round(total, 1),
        "command_s": dict(zip(commands, seconds)),
        "n_search_n_random": [summary.get("n_search"), summary.get("n_random")],
        "best_test_accuracy": summary.get("best_test_accuracy"),
        "random_best_test_accuracy": summary.get("random_best_test_accuracy"),
        "median_random_test_accuracy": summary.get("median_random_test_accuracy"),
        "best_is_a_random_draw": summary.get("best_is_a_random_draw"),
        "cores": len(os.sched_getaffinity(0)),
        "load_average_before_after": [round(load_before[0], 1), round(os.getloadavg()[0], 1)],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
