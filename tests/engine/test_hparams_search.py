"""Range decisions through the engine: a search, its record, a resume, an export, and a run
file whose space is a mapping with ranges."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import torch
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.run.export import export_top
from nasforge.run.files import load_run_file, rebuild_runner
from nasforge.space.search_space import SearchSpace


def _space() -> SearchSpace:
    return SearchSpace.from_spec(
        {
            "op": ["a", "b"],
            "lr": {"uniform": [1e-4, 1e-1], "log": True},
            "warmup": {"integer": [0, 50], "step": 5},
        }
    )


def _score(arch: dict, report) -> float:
    report(0.5)
    return -((math.log10(arch["lr"]) + 2) ** 2) - arch["warmup"] / 100 + (arch["op"] == "b")


def test_search_with_ranges_records_resumes_and_exports(tmp_path: Path) -> None:
    """TPE searches a space with ranges; the record holds canonical values; a resume keeps
    the finished trials and continues; the export's arch.json validates."""
    kwargs = dict(directory=tmp_path / "run", executor="inprocess", progress="off")
    first = Experiment(_space(), _score, "tpe", n_trials=6, **kwargs).run()
    trials = first.trials()
    assert len(trials) == 6
    for t in trials:
        assert _space().validate(t.arch) == t.arch
        assert type(t.arch["lr"]) is float and type(t.arch["warmup"]) is int
    resumed = Experiment(_space(), _score, "tpe", n_trials=9, **kwargs).resume()
    after = resumed.trials()
    assert len(after) == 9
    assert [t.arch for t in after[:6]] == [t.arch for t in trials]
    folder = export_top(tmp_path / "run", out=tmp_path / "export")[0]
    arch = json.loads((folder / "arch.json").read_text())
    arch = arch.get("arch", arch)
    assert _space().validate(arch) == arch


def test_a_python_run_file_with_a_mapping_space_runs_and_resumes(tmp_path: Path) -> None:
    """A run file's ``space`` mapping with uniform/integer entries runs, and the run rebuilds
    from its file to resume."""
    path = tmp_path / "hp.py"
    path.write_text(
        textwrap.dedent(
            """
            import math

            space = {
                "lr": {"uniform": [1e-4, 1e-1], "log": True},
                "dropout": {"uniform": [0.0, 0.5]},
                "layers": {"integer": [1, 4]},
            }
            strategy = {"name": "evolution", "population_size": 4, "sample_size": 2}
            config = {"n_trials": 6, "executor": "inprocess", "progress": "off"}


            def evaluate(arch, report):
                return -abs(math.log10(arch["lr"]) + 2) - arch["dropout"] + arch["layers"]
            """
        )
    )
    runner = load_run_file(path, directory=str(tmp_path / "r")).run()
    assert len(runner.trials()) == 6
    again = rebuild_runner(tmp_path / "r", n_trials=8).resume()
    archs = [t.arch for t in again.trials()]
    assert len(archs) == 8 and all(1 <= a["layers"] <= 4 for a in archs)


class _Net(nf.ModelSpace):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, nf.choice([4, 8], label="width"))
        self.head = nn.Linear(self.fc.out_features, 2)
        self.lr = nf.uniform(1e-3, 1e-1, log=True, label="lr")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc(x)))


def _train(model: nn.Module, report) -> float:
    hp = nf.hparams(model)
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    opt = torch.optim.SGD(model.parameters(), lr=hp["lr"])
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        report(-loss.item())
    return -loss.item()


def test_model_space_hyperparameters_reach_the_trial(tmp_path: Path) -> None:
    """A ModelSpace's nf.uniform arrives in the trial's frozen model (nf.hparams) and the
    exported model loads with the same value."""
    exp = Experiment(
        _Net(),
        _train,
        "random",
        directory=tmp_path / "m",
        n_trials=3,
        executor="inprocess",
        progress="off",
    ).run()
    lrs = {t.arch["lr"] for t in exp.trials()}
    assert len(lrs) == 3 and all(1e-3 <= lr <= 1e-1 for lr in lrs)
    folder = export_top(tmp_path / "m", out=tmp_path / "e")[0]
    model = nf.load_model(folder, space=_Net())
    assert nf.hparams(model)["lr"] in lrs
