"""Tests of the user entry point: train_supernet, export/load, and the CLI subcommand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.errors import ConfigError, ScheduleError
from nasforge.parallel.supernet import ChoiceSupernet
from nasforge.parallel.train import load_supernet, subnet_model, train_supernet


def test_sequential_train_export_and_load(tmp_path: Path) -> None:
    """Trained weights round-trip through export into the space, and a subnet uses them."""
    space = ChoiceSupernet(n_blocks=3, n_candidates=2, hidden=8)
    result = train_supernet(space, steps=6, pipeline=1, batch_size=4)
    assert len(result.losses) == 6
    wpath, jpath = result.export(tmp_path / "sn")
    loaded, weights = load_supernet(tmp_path / "sn")
    assert wpath.suffix == ".safetensors"
    meta = json.loads(jpath.read_text())
    assert [d["label"] for d in meta["search_space"]["decisions"]] == ["block0", "block1", "block2"]
    for key, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, weights[key])
    assert torch.equal(loaded.blocks[1].candidate(0)[0].weight, result.state["1.0.0.weight"])
    model = subnet_model(loaded, {"block0": 1, "block1": 0, "block2": 1})
    assert model(torch.zeros(2, 64)).shape == (2, 10)


def test_entry_point_rejects_bad_arguments() -> None:
    """pipeline < 1, more stages than blocks and a non-space raise clear errors."""
    with pytest.raises(ConfigError, match="pipeline"):
        train_supernet({"n_blocks": 3}, pipeline=0)
    with pytest.raises(ScheduleError, match="3 choice blocks into 4"):
        train_supernet({"n_blocks": 3}, pipeline=4)
    with pytest.raises(ConfigError, match="got int"):
        train_supernet(3)


def test_cli_pipeline_flag(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`nasforge train-supernet --pipeline 2` trains on two stages and exports both files."""
    out = tmp_path / "run" / "sn"
    argv = ["train-supernet", "--blocks", "3", "--candidates", "2", "--steps", "4"]
    assert main([*argv, "--pipeline", "2", "--batch-size", "4", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["pipeline"] == 2 and summary["steps"] == 4
    assert out.with_suffix(".safetensors").exists() and out.with_suffix(".json").exists()


def test_cli_diverging_pipeline_exports_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--lr 5 --pipeline 2` stops on the NaN loss with exit code 2 and writes no files."""
    out = tmp_path / "run" / "sn"
    argv = ["train-supernet", "--blocks", "4", "--candidates", "3", "--hidden", "16"]
    argv += ["--steps", "32", "--batch-size", "8", "--lr", "5", "--pipeline", "2"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "step 12 (subnet [1, 2, 2, 2]) is nan" in caplog.text
    assert not out.with_suffix(".safetensors").exists() and not out.with_suffix(".json").exists()
