"""Tests of keep_checkpoints: only the best trials' weight files stay, through kills and resumes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import nasforge as nf
from nasforge.engine import Experiment, Store
from nasforge.errors import ConfigError, StoreError
from nasforge.run.export import export_top, load_model
from nasforge.run.files import rebuild_runner
from nasforge.run.results import rank_trials

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("kill_experiment", HERE / "kill_experiment.py")
kx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kx)


class Wide(nf.ModelSpace):
    """36 architectures: 6 widths x 2 activations x 3 depths."""

    def __init__(self):
        super().__init__()
        c = nf.choice([2, 3, 4, 5, 6, 7], label="width")
        self.inp = nn.Linear(4, c)
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")
        self.blocks = nf.Repeat(lambda i: nn.Linear(c, c), nf.choice([1, 2, 3], label="depth"))


def _score(model, report):
    n = sum(p.numel() for p in model.parameters())
    act = 1 if isinstance(model.act, nn.Tanh) else 0
    return {"default": (n * 7 + act * 13) % 101 / 101, "params": float(n)}


def _files(directory: Path) -> set[str]:
    return {f"checkpoints/{p.name}" for p in (directory / "checkpoints").iterdir()}


def _check_invariant(directory: Path, keep: int) -> list:
    """Asserts that the files on disk are exactly those the records name, which are those of
    the ``keep`` best ranked trials; returns the trials."""
    with Store.open(directory) as store:
        trials, obj = store.trials(), store.objective()
    named = {t.checkpoint for t in trials if t.checkpoint}
    assert _files(directory) == named  # no file without a record, no record without a file
    best = rank_trials(trials, obj["metric"], obj["mode"], obj["constraints"])[:keep]
    assert named == {t.checkpoint for t in best} and len(named) == keep
    by_id = {t.id: t for t in trials}
    for t in trials:  # a cached trial names exactly the file its original names
        if t.status == "cached":
            assert t.checkpoint == by_id[t.cached_from].checkpoint
    return trials


def test_twenty_trials_keep_exactly_the_best_three_files(tmp_path):
    """A 20-trial run with keep_checkpoints=3 ends with the files of its 3 best feasible
    trials, and every other trial's record names no file."""
    d = tmp_path / "run"
    exp = Experiment(
        Wide(), _score, "random", directory=d, n_trials=20, executor="inprocess",
        progress="off", keep_checkpoints=3, constraints=["params <= 120"],
    )  # fmt: skip
    exp.run()
    trials = _check_invariant(d, 3)
    trained = [t for t in trials if t.status == "done"]
    assert len(trained) == 20
    feasible = sorted(
        (t for t in trained if t.metrics["params"] <= 120),
        key=lambda t: (-t.metrics["default"], t.id),
    )
    assert len(feasible) > 3 and any(t.metrics["params"] > 120 for t in trained)
    assert {t.id for t in trained if t.checkpoint} == {t.id for t in feasible[:3]}
    with Store.open(d) as store:
        assert store.notes("checkpoints")[-1]["keep"] == 3  # status prints it


def test_a_trial_below_the_kept_scores_writes_no_weights(tmp_path, monkeypatch):
    """Once keep_checkpoints trials are kept, a trial that ends below the lowest kept score
    writes no file (the keeper would delete it at once); the run ends with the same files as
    when every trial wrote one and the keeper dropped them."""
    import nasforge.engine.trial as trial_module

    written: list[str] = []
    real = trial_module.save_weights

    def spy(model, path):
        written.append(Path(path).name)
        return real(model, path)

    monkeypatch.setattr(trial_module, "save_weights", spy)
    d = tmp_path / "run"
    Experiment(Wide(), _score, "random", directory=d, n_trials=20, executor="inprocess",
               progress="off", keep_checkpoints=3).run()  # fmt: skip
    trials = _check_invariant(d, 3)
    assert 3 <= len(written) < 20
    done = sorted((t for t in trials if t.status == "done"), key=lambda t: t.id)
    for i, t in enumerate(done):  # unwritten: below the 3rd best of the trials before it
        before = sorted((u.metrics["default"] for u in done[:i]), reverse=True)
        if f"trial_{t.id}.pt" not in written:
            assert len(before) >= 3 and t.metrics["default"] < before[2]


def test_keep_all_and_bad_values(tmp_path):
    """keep_checkpoints=None keeps every file; 0 or a non-int is a ConfigError up front."""
    d = tmp_path / "all"
    Experiment(Wide(), _score, "random", directory=d, n_trials=6, executor="inprocess",
               progress="off", keep_checkpoints=None).run()  # fmt: skip
    assert len(_files(d)) == 6
    for bad in (0, 2.5, True):
        with pytest.raises(ConfigError, match="keep_checkpoints must be a positive int"):
            Experiment(Wide(), _score, "random", n_trials=2, keep_checkpoints=bad)


def test_export_and_load_model_say_when_weights_were_not_kept(tmp_path):
    """Exporting past the kept trials writes no weights and says why; load_model raises that
    message instead of returning an untrained model; the kept ones load with their weights."""
    d = tmp_path / "run"
    Experiment(Wide(), _score, "random", directory=d, n_trials=6, executor="inprocess",
               progress="off", keep_checkpoints=2).run()  # fmt: skip
    folders = export_top(d, 4)
    model = load_model(folders[0])
    saved = torch.load(folders[0] / "weights.pt", weights_only=True)
    assert all(torch.equal(v, saved[k]) for k, v in model.state_dict().items())
    assert (folders[1] / "weights.pt").exists()
    for folder in folders[2:]:
        assert not (folder / "weights.pt").exists()
        with pytest.raises(StoreError, match=r"weights not kept: keep_checkpoints=2"):
            load_model(folder)


def test_a_stored_run_without_the_setting_keeps_every_file_on_resume(tmp_path):
    """A record written before keep_checkpoints existed resumes keeping all files (None), and
    an interrupted drop (record cleared, file left) is cleaned up by the resume."""
    d = tmp_path / "run"
    Experiment(Wide(), _score, "random", directory=d, n_trials=4, executor="inprocess",
               progress="off", keep_checkpoints=None).run()  # fmt: skip
    with Store.open(d, readonly=False) as store:
        config = store.config()
        del config["multitrial"]["keep_checkpoints"]
        store.set_config(config)
        trials = store.trials()
        copied = {t.cached_from for t in trials}
        lost = next(t for t in trials if t.status == "done" and t.id not in copied)
        store.clear_checkpoints([lost.id])  # as if killed between clearing it and its file
    assert (d / lost.checkpoint).exists()
    runner = rebuild_runner(d, n_trials=5)
    assert runner.settings.keep_checkpoints is None
    runner.resume()
    with Store.open(d) as store:
        named = {t.checkpoint for t in store.trials() if t.checkpoint}
    assert len(named) == 4 and _files(d) == named  # the orphan file is gone, no other


@pytest.mark.parametrize("executor", ["inprocess", "pool"])
def test_sigkill_then_resume_keeps_the_invariant(tmp_path, executor):
    """A run killed with SIGKILL mid-way names only existing files, at most 3; resumed, it
    ends with exactly the files of its 3 best trials."""
    d = tmp_path / "run"
    before = kx.kill_after(d, n_done=7, executor=executor, keep=3, timeout=120.0)
    assert 7 <= sum(t.status != "running" for t in before) < 14
    named = {t.checkpoint for t in before if t.checkpoint and t.status != "running"}
    assert len(named) <= 3 and all((d / c).exists() for c in named)
    kx.make(d, executor=executor, keep_checkpoints=3).resume()
    trials = _check_invariant(d, 3)
    assert sum(t.status not in ("cached", "running") for t in trials) == 14
