"""Tests of the user entry point: train_supernet, export/load, and the CLI subcommand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.errors import ConfigError, ScheduleError
from nasforge.parallel.supernet import ChoiceSupernet
from nasforge.parallel.train import subnet_model, train_supernet


def test_sequential_training_weights_load_into_the_space() -> None:
    """Trained weights load into the space under its own keys, and a subnet uses them."""
    space = ChoiceSupernet(n_blocks=3, n_candidates=2, hidden=8)
    result = train_supernet(space, steps=6, pipeline=1, batch_size=4)
    assert len(result.losses) == 6
    weights = result.space_state_dict()
    loaded = ChoiceSupernet(n_blocks=3, n_candidates=2, hidden=8)
    loaded.load_state_dict(weights)
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


@pytest.mark.slow
def test_cli_pipeline_flag_records_a_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`nasforge train-supernet --pipeline 2` trains on two stages into a run directory that
    the shared commands read; a second run into it is refused unless --overwrite."""
    out = tmp_path / "sn_0.05"
    argv = ["train-supernet", "--blocks", "3", "--candidates", "2", "--steps", "4"]
    argv += ["--pipeline", "2", "--batch-size", "4", "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["run"] == str(out) and summary["final_loss"] is not None
    assert (out / "artifacts" / "supernet.safetensors").exists()
    assert not (tmp_path / "sn_0.safetensors").exists()  # the suffix is part of the name
    assert main(argv) == 2  # never overwritten silently
    assert main([*argv, "--overwrite"]) == 0


@pytest.mark.slow
def test_cli_mirror_flag_trains_what_one_process_trains(tmp_path: Path) -> None:
    """`train-supernet --pipeline 2 --mirror` (layer mirroring) records a run whose supernet
    equals the one-process run's bitwise; --mirror with bsp is refused."""
    from safetensors.torch import load_file

    base = ["train-supernet", "--blocks", "4", "--candidates", "2", "--hidden", "16"]
    base += ["--steps", "6", "--batch-size", "4"]
    assert main([*base, "--out", str(tmp_path / "one")]) == 0
    assert main([*base, "--pipeline", "2", "--mirror", "--out", str(tmp_path / "mir")]) == 0
    one = load_file(str(tmp_path / "one" / "artifacts" / "supernet.safetensors"))
    mir = load_file(str(tmp_path / "mir" / "artifacts" / "supernet.safetensors"))
    assert one.keys() == mir.keys() and all(torch.equal(one[k], mir[k]) for k in one)
    bad = [*base, "--pipeline", "2", "--mirror", "--policy", "bsp", "--out", str(tmp_path / "b")]
    assert main(bad) == 2


@pytest.mark.slow
def test_cli_diverging_pipeline_exports_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--lr 5 --pipeline 2` stops on the NaN loss with exit code 2 and writes no weights."""
    out = tmp_path / "diverging"
    argv = ["train-supernet", "--blocks", "4", "--candidates", "3", "--hidden", "16"]
    argv += ["--steps", "32", "--batch-size", "8", "--lr", "5", "--pipeline", "2"]
    assert main([*argv, "--out", str(out)]) == 2
    assert re.search(r"training diverged: the loss of step \d+ \(subnet \[[\d, ]+\]\)", caplog.text)
    assert not list(out.rglob("*.safetensors")) and not (out / "checkpoints").exists()
