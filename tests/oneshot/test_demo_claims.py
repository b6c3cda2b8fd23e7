"""The one-shot guide says what its ProxylessNAS run file picks, and the file picks that."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.run.store import Store

DOC = Path(__file__).parents[2] / "docs" / "oneshot.md"
#: the operations of the cell space that have no parameters of their own
FREE = {"skip_connect", "avg_pool_3x3", "max_pool_3x3", "max_pool_5x5", "max_pool_7x7"}


def _claim(text: str) -> tuple[int, float]:
    """Returns the parameters and the accuracy that the guide's paragraph on the run file
    states for its pick."""
    found = re.search(
        r"\*\*What the run file above shows.*?pick is such a cell: ([\d,]+) parameters"
        r".*?chance accuracy \((0\.\d+) ",
        text,
        re.S,
    )
    assert found, "docs/oneshot.md does not say what the ProxylessNAS run file picks"
    return int(found.group(1).replace(",", "")), float(found.group(2))


@pytest.mark.slow
def test_the_proxylessnas_run_file_picks_what_the_guide_says(tmp_path: Path) -> None:
    """The guide's ProxylessNAS run file picks a cell of pooling and skips, with the parameter
    count and the chance accuracy that the paragraph after it states."""
    text = DOC.read_text()
    params, accuracy = _claim(text)
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    (run_file,) = [b for b in blocks if "name: proxylessnas" in b]
    (tmp_path / "proxyless.yaml").write_text(run_file)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NASFORGE_THREADS": "1"}
    cmd = [sys.executable, "-m", "nasforge", "run", "proxyless.yaml", "--dir", "run"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with Store.open(tmp_path / "run") as store:
        (pick,) = store.trials()
    ops = {v for k, v in pick.arch.items() if not k.endswith(".in")}
    assert ops <= FREE, ops
    assert int(pick.metrics["params"]) == params
    assert round(pick.metrics["accuracy"], 2) == accuracy < 0.2  # 10 classes: chance is 0.1
