"""The examples run from a user's clone, which has no ../shared/data."""

from __future__ import annotations

import shutil
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
