"""`nasforge stop DIR` reaches every kind that trains: a one-shot, once-for-all and DARTSformer
run stops at its next boundary (recorded ``stopped``, nothing of what finished lost), refuses in
one line what its kind cannot do, and `nasforge resume DIR` finishes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.oneshot.dartsformer.runner import find_data
from nasforge.run.store import Store
from tests.oneshot.test_runner import SPACE
from tests.stopwait import HOLD, stop_at_first_row

ROOT = Path(__file__).resolve().parents[2]
#: requests a training kind without trials to steer refuses (exit 2, nothing left)
REFUSED = [["set", "n_trials=5"], ["stop", "--trial", "1"], ["stop", "--cancel"]]


def _finish(directory: Path) -> Store:
    assert main(["resume", str(directory)]) == 0
    store = Store.open(directory)
    assert store.state() == "finished"
    return store


@pytest.mark.slow
def test_a_one_shot_run_stops_after_its_epoch_and_resumes_to_the_uninterrupted_pick(tmp_path):
    """A DARTS run held at epoch 1 of 4 stops there (one progress row, no pick yet); resumed,
    it ends with the architecture and weights of a run never stopped."""
    body = (
        SPACE
        + HOLD
        + (
            "space = Net()\ndata = load()\nstrategy = 'darts'\n"
            "config = {'epochs': 4, 'batch_size': 16, 'bn_batches': 2,\n"
            "          'callbacks': [HOLD_FIRST_ROW]}\n"
        )
    )
    run_file = tmp_path / "search.py"
    run_file.write_text(body)
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    stop_at_first_row(run_file, stopped, REFUSED)
    with Store.open(stopped) as store:
        assert store.n_progress() == 1 and not store.trials()
        assert any(n["event"] == "stop" for n in store.notes("control"))
    with _finish(stopped) as store:
        resumed = store.trials()[-1]
        assert store.n_progress() == 4
    assert main(["run", str(run_file), "--dir", str(whole)]) == 0
    with Store.open(whole) as store:
        assert store.trials()[-1].arch == resumed.arch
        a = torch.load(store.directory / store.trials()[-1].checkpoint, weights_only=True)
    b = torch.load(stopped / resumed.checkpoint, weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_an_ofa_run_stops_after_its_epoch_and_resumes(tmp_path):
    """An OFA run held at its first epoch stops there with its checkpoint; resumed, it trains
    the remaining epochs and records its supernet."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(120, 1, 28, 28, generator=g)
    torch.save({"x": x, "y": (x.mean(dim=(1, 2, 3)) > 0).long()}, tmp_path / "data.pt")
    run_file = tmp_path / "ofa.py"
    run_file.write_text(HOLD + (
        "kind = 'ofa'\nspace = 'compofa'\n"
        "config = {'data': 'data.pt', 'full_epochs': 1, 'shrink_epochs': 2, 'width_mult': 0.25,"
        " 'n_subnets': 1, 'batch_size': 50, 'probes': False, 'threads': 1,"
        " 'callbacks': [HOLD_FIRST_ROW]}\n"
    ))  # fmt: skip
    directory = tmp_path / "run"
    stop_at_first_row(run_file, directory, REFUSED)
    with Store.open(directory) as store:
        assert store.n_progress() == 1 and store.artifact("supernet") is None
    with _finish(directory) as store:
        assert store.n_progress() == 3 and store.artifact("supernet") is not None


@pytest.mark.slow
def test_a_dartsformer_search_stops_at_its_step_and_resumes(tmp_path):
    """A DARTSformer search held at its first logged step stops there with its state saved;
    resumed, it searches to its last step and records its pick."""
    data = find_data("shared/data/opennmt_toy_ende", ROOT)
    settings = {
        "kind": "dartsformer", "data": str(data), "pairs": 200, "test": 12, "vocab": 300,
        "space": {"d": 24, "e": 8, "n_splits": 2, "s": 1, "repeats": 1, "heads": 4},
        "algorithm": "darts", "max_steps": 12, "batch_tokens": 300,
        "search": {"warmup": 4, "w_lr": 0.002, "a_lr": 0.003}, "log_every": 3,
        "checkpoint_every": 0, "seed": 0, "threads": 1, "progress": "off",
    }  # fmt: skip
    run_file = tmp_path / "dartsformer.py"
    run_file.write_text(HOLD + f"config = {json.dumps(settings)}\n"
                        "config['callbacks'] = [HOLD_FIRST_ROW]\n")  # fmt: skip
    directory = tmp_path / "run"
    stop_at_first_row(run_file, directory, REFUSED)
    with Store.open(directory) as store:
        assert store.n_progress() == 1 and not store.trials()
        state = torch.load(store.artifact("search_state"), weights_only=True)
        assert state["step"] == 3  # saved at the step it stopped, not only at the end
    with _finish(directory) as store:
        assert [r["step"] for r in store.progress()] == [3, 6, 9, 12]
        assert store.trials()


@pytest.mark.slow
def test_a_pipeline_run_stops_at_a_segment_boundary_and_resumes(tmp_path):
    """A pipeline run (2 stages, csp) held at its first segment stops at the next boundary
    with its state saved; resumed, it trains to its last step and evaluates its subnets."""
    run_file = tmp_path / "pipeline.py"
    run_file.write_text(HOLD + (
        "kind = 'pipeline'\n"
        "config = {'steps': 24, 'pipeline': 2, 'checkpoint_every': 8, 'batch_size': 8,\n"
        "          'n_eval': 2, 'callbacks': [HOLD_FIRST_ROW]}\n"
    ))  # fmt: skip
    directory = tmp_path / "run"
    stop_at_first_row(run_file, directory, REFUSED)
    with Store.open(directory) as store:
        assert 8 <= store.n_progress() < 24 and not store.trials()
    with _finish(directory) as store:
        assert store.n_progress() == 24 and len(store.trials()) >= 1
