"""Run files (nasforge/run/files.py): `nasforge run FILE` reads its file once, and a resume of
a run started from a file keeps the settings the run ran with, for every kind: the record's
section is the run's settings, the file (read again) gives only its objects, and resume
overrides win over both."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.cli import main
from nasforge.errors import ConfigError
from nasforge.oneshot.runner import OneShotSearch
from nasforge.run import files
from nasforge.run.files import load_run_file, rebuild_runner
from nasforge.run.runner import BaseRunner
from nasforge.run.store import Store


def _record(run: BaseRunner) -> Path:
    """Returns the directory of the record ``run`` starts, as `nasforge run` writes it (its
    config, nothing run yet): what a resume reads."""
    Store.create(run.directory, run.config()).close()
    return run.directory


def test_run_reads_its_file_once(tmp_path: Path, monkeypatch) -> None:
    """`nasforge run FILE --n-trials 2` reads FILE once: the second phase of the command line
    reads it to find its kind's flags, and the run is built from what it read."""
    f = tmp_path / "exp.yaml"
    f.write_text(
        "space: {x: [1, 2, 3]}\nevaluator: tf_score:evaluate\nstrategy: random\n"
        "n_trials: 5\nexecutor: inprocess\nprogress: 'off'\n"
    )
    (tmp_path / "tf_score.py").write_text("def evaluate(arch, report):\n    return arch['x']\n")
    reads: list[Path] = []
    read = files.read_run_file

    def counted(path):
        reads.append(Path(path))
        return read(path)

    monkeypatch.setattr(files, "read_run_file", counted)
    assert main(["run", str(f), "--dir", str(tmp_path / "run"), "--n-trials", "2"]) == 0
    assert reads == [f]
    with Store.open(tmp_path / "run") as s:
        assert sum(t.status == "done" for t in s.trials()) == 2  # --n-trials, not the file's 5


def test_a_yaml_run_resumes_with_its_record_and_its_files_objects(tmp_path, monkeypatch):
    """A YAML run whose space is a mapping (the record cannot reference it) and whose
    evaluator is a module beside the file resumes from another folder: the space and the
    evaluator come from the file, every setting and the objective from the record, even
    after the file's values changed."""
    f = tmp_path / "exp.yaml"
    f.write_text(
        "space: {x: [1, 2, 3]}\nevaluator: tf_loss:evaluate\nstrategy: random\nn_trials: 5\n"
        "executor: inprocess\nprogress: 'off'\nmode: min\n"
    )
    (tmp_path / "tf_loss.py").write_text("def evaluate(arch, report):\n    return arch['x']\n")
    run = load_run_file(f, directory=str(tmp_path / "run"), n_trials=2, stopper="median")
    d = _record(run)
    f.write_text(f.read_text().replace("n_trials: 5", "n_trials: 9").replace("min", "max"))
    monkeypatch.chdir(tmp_path.parent)
    back = rebuild_runner(d)
    assert back.n_trials == 2 and back.mode == "min"  # type: ignore[attr-defined]
    assert back.stopper.config()["rule"] == "median"  # type: ignore[attr-defined]
    assert back.search_space.to_dict() == run.search_space.to_dict()  # type: ignore[attr-defined]
    assert rebuild_runner(d, n_trials=7).n_trials == 7  # type: ignore[attr-defined]


class Net(nf.ModelSpace):
    """A two-op space a one-shot supernet mixes (module level: its record rebuilds it)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.op = nf.LayerChoice({"conv": nn.Conv2d(4, 4, 3, padding=1), "id": nn.Identity()},
                                 label="op")  # fmt: skip
        self.fc = nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.op(self.stem(x))).mean((2, 3)))


def tiny_data() -> tuple[torch.Tensor, torch.Tensor]:
    """Returns 64 random 8x8 images and labels (module level: a record rebuilds it)."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 1, 8, 8, generator=g), torch.randint(0, 10, (64,), generator=g)


ONESHOT = """
import torch
from tests.run.test_files import Net

space = Net()
data = (torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,)))
strategy = {"name": "darts", "epochs": 1}
config = {"batch_size": 32, "progress": "off", "threads": 1}
"""


def test_a_oneshot_run_resumes_with_the_settings_it_ran_with(tmp_path: Path) -> None:
    """A one-shot run started with `--set epochs=2 --set batch_size=16` resumes with them,
    not the file's (inside or beside its strategy); a resume override wins."""
    f = tmp_path / "search.py"
    f.write_text(ONESHOT)
    run = load_run_file(f, directory=str(tmp_path / "run"), epochs=2, batch_size=16)
    d = _record(run)
    back = rebuild_runner(d)
    assert isinstance(back, OneShotSearch) and back.section() == run.section()
    assert (back.strategy.config.epochs, back.strategy.config.batch_size) == (2, 16)
    again = rebuild_runner(d, epochs=3)
    assert isinstance(again, OneShotSearch)
    assert (again.strategy.config.epochs, again.strategy.config.batch_size) == (3, 16)


def test_a_oneshot_run_started_from_python_rebuilds_from_its_record(tmp_path: Path) -> None:
    """A one-shot run started from Python (no run file) rebuilds from the references its
    record holds (it failed: the stored `search_space` reached the search settings)."""
    run = OneShotSearch(Net(), {"name": "darts", "epochs": 2}, tiny_data, batch_size=32,
                        directory=tmp_path / "run", progress="off")  # fmt: skip
    back = rebuild_runner(_record(run))
    assert isinstance(back, OneShotSearch) and back.section() == run.section()


PIPE = (
    'kind = "pipeline"\nsteps = 8\npipeline = 1\nbatch_size = 16\nn_eval = 3\n'
    "space_kwargs = {n_blocks = 3, n_candidates = 2, hidden = 16}\n"
)


def test_a_pipeline_run_resumes_with_the_settings_it_ran_with(tmp_path: Path) -> None:
    """A pipeline run started with `--set steps=3` resumes with 3 steps, even after the file
    changed its own; a resume override wins."""
    f = tmp_path / "pipe.toml"
    f.write_text(PIPE)
    run = load_run_file(f, directory=str(tmp_path / "run"), steps=3)
    d = _record(run)
    f.write_text(PIPE.replace("steps = 8", "steps = 20"))
    back = rebuild_runner(d)
    assert back.settings.steps == 3 and back.section() == run.section()  # type: ignore[attr-defined]
    assert rebuild_runner(d, n_eval=1).settings.n_eval == 1  # type: ignore[attr-defined]


def test_an_ofa_run_resumes_with_the_plan_it_ran_with(tmp_path: Path) -> None:
    """An ofa run started with `--full-epochs 1` resumes with the plan that built (the file
    says 2, and the resume was refused as made with other settings); `--threads` on resume
    applies, and a setting the recorded plan fixes is refused in one line."""
    f = tmp_path / "ofa.yaml"
    f.write_text("kind: ofa\nspace: compofa\nwidth_mult: 0.25\nfull_epochs: 2\n"
                 "shrink_epochs: 1\nthreads: 1\n")  # fmt: skip
    run = load_run_file(f, directory=str(tmp_path / "run"), full_epochs=1)
    d = _record(run)
    back = rebuild_runner(d)
    assert back.section() == run.section()
    assert rebuild_runner(d, threads=2).threads == 2  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"\['full_epochs'\] cannot change"):
        rebuild_runner(d, full_epochs=3)


def test_an_ofa_deploy_run_resumes_with_the_settings_it_ran_with(tmp_path: Path) -> None:
    """An ofa-deploy run started with `--population 12` resumes with it; the file's
    `resolutions`, read again beside the record's narrowed tables, narrows them to the same
    tables (it looked for a table inside a table file)."""
    from tests.ofa._synthetic import write_ofa_predictor, write_ofa_tables

    write_ofa_tables(tmp_path / "tables", width=1.2, resolutions=(160, 176))
    write_ofa_predictor(tmp_path / "pred.pth")
    f = tmp_path / "deploy.yaml"
    f.write_text(
        "kind: ofa-deploy\nlatency_table: tables\nresolutions: [160]\n"
        "predictor: pred.pth\ntargets: [20]\npopulation: 20\ngenerations: 2\n"
    )
    run = load_run_file(f, directory=str(tmp_path / "run"), population=12)
    d = _record(run)
    back = rebuild_runner(d)
    assert back.section() == run.section() and back.section()["population"] == 12
    assert back.section()["latency_table"] == [str(tmp_path / "tables" / "160_lookup_table.yaml")]


def test_a_dartsformer_run_resumes_with_the_settings_it_ran_with(tmp_path: Path) -> None:
    """A dartsformer run started with `--max-steps 2` resumes with 2 search steps, not the
    file's 4; a resume override wins."""
    from tests.run.test_kinds import _dartsformer_file

    f = _dartsformer_file(tmp_path)
    if f is None:
        pytest.skip("needs the toy translation data (shared/data)")
    run = load_run_file(f, directory=str(tmp_path / "run"), max_steps=2)
    d = _record(run)
    back = rebuild_runner(d)
    assert back.section() == run.section() and back.section()["max_steps"] == 2
    assert rebuild_runner(d, max_steps=5).section()["max_steps"] == 5
