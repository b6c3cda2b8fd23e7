"""Every kind of run through the same commands: run, status, export --top 1, resume, plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.errors import ConfigError
from nasforge.run.export import load_model
from nasforge.run.store import Store
from tests.ofa._runfile import ofa_run_file

SPACE = """
import torch
from torch import nn
import nasforge as nf


class Net(nf.ModelSpace):
    def __init__(self, width: int = 4):
        super().__init__()
        self.stem = nn.Conv2d(1, width, 3, padding=1)
        self.op = nf.LayerChoice(
            {"conv": lambda: nn.Conv2d(width, width, 3, padding=1),
             "pool": lambda: nn.AvgPool2d(3, 1, 1)},
            label="op",
        )
        self.blocks = nf.Repeat(lambda i: nn.Conv2d(width, width, 1), (1, 2), label="depth")
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc(self.blocks(torch.relu(self.op(self.stem(x)))).mean((2, 3)))


def evaluate(model, report):
    n = sum(p.numel() for p in model.parameters())
    report(n / 1000)
    return {"accuracy": (n % 97) / 97, "params": float(n)}
"""

FILES = {
    "multitrial": "space = Net(width=4)\nstrategy = {'name': 'random', 'seed': 0}\n"
    "config = {'n_trials': 3, 'executor': 'inprocess', 'progress': 'off', 'metric': 'accuracy'}\n",
    "darts": "space = Net()\ndata = 'digits'\nstrategy = 'darts'\n"
    "config = {'epochs': 1, 'batch_size': 128, 'progress': 'off', 'threads': 1}\n",
    "nasb": "space = Net()\ndata = 'digits'\nstrategy = {'name': 'nasb', 'epochs': 1}\n"
    "config = {'batch_size': 128, 'progress': 'off', 'threads': 1}\n",
    "spos": "space = Net()\ndata = 'digits'\n"
    "strategy = {'name': 'spos', 'epochs': 1, 'cycles': 3, 'population': 2}\n"
    "config = {'batch_size': 128, 'progress': 'off', 'threads': 1, 'bn_batches': 1}\n",
}


def _ofa_file(tmp_path: Path) -> Path:
    return ofa_run_file(
        tmp_path,
        "{targets: [1.0, 3.0], latency: flops, accuracy: predictor, n_pairs: 6,"
        " population: 6, generations: 2}",
    )


def _pipeline_file(tmp_path: Path) -> Path:
    f = tmp_path / "pipe.toml"
    f.write_text(
        'kind = "pipeline"\nsteps = 8\npipeline = 1\nbatch_size = 16\nn_eval = 3\n'
        "space_kwargs = {n_blocks = 3, n_candidates = 2, hidden = 16}\n"
    )
    return f


def _dartsformer_file(tmp_path: Path) -> Path | None:
    """Returns a tiny dartsformer run file, or None when the toy translation data is absent."""
    from nasforge.oneshot.dartsformer.runner import find_data

    try:
        data = find_data("shared/data/opennmt_toy_ende", Path(__file__).resolve().parents[2])
    except ConfigError:
        return None
    f = tmp_path / "dartsformer.yaml"
    f.write_text(
        f"kind: dartsformer\ndata: {data}\npairs: 120\ntest: 6\nvocab: 300\n"
        "space: {d: 24, e: 8, n_splits: 2, s: 1, heads: 4}\nmax_steps: 4\nlog_every: 2\n"
        "batch_tokens: 300\nretrain: {steps: 2}\nthreads: 1\nprogress: 'off'\n"
    )
    return f


def _runs(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "kinds_space.py").write_text(SPACE)
    files = {}
    for name, body in FILES.items():
        f = tmp_path / f"{name}.py"
        imports = "Net, evaluate" if name == "multitrial" else "Net"
        f.write_text(f"from kinds_space import {imports}\n" + body)
        files[name] = f
    files["ofa"] = _ofa_file(tmp_path)
    files["pipeline"] = _pipeline_file(tmp_path)
    seq2seq = _dartsformer_file(tmp_path)
    if seq2seq is not None:  # needs the toy translation data
        files["dartsformer"] = seq2seq
    return files


@pytest.mark.slow
def test_every_kind_runs_and_reads_through_the_same_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Multi-trial, DARTS, NASB, SPOS, once-for-all (training + search), pipeline and
    dartsformer (when its data is there) runs are each started with `nasforge run FILE`, and
    `status`, `export --top 1` (loaded back with `load_model` alone), `resume` and `plot` work
    on each, with the same code path."""
    monkeypatch.chdir(tmp_path)
    kinds = {"multitrial": "multitrial", "darts": "oneshot", "nasb": "oneshot",
             "spos": "oneshot", "ofa": "ofa", "pipeline": "pipeline",
             "dartsformer": "dartsformer"}  # fmt: skip
    for name, f in _runs(tmp_path).items():
        d = tmp_path / "runs" / name
        assert main(["run", str(f), "--dir", str(d)]) == 0, name
        with Store.open(d) as store:
            assert store.kind == kinds[name] and store.state() == "finished"
            trials = store.trials()
        assert trials, name
        capsys.readouterr()
        assert main(["status", str(d)]) == 0
        out = capsys.readouterr().out
        assert f"{kinds[name]} run, finished" in out and "best first" in out, name
        assert main(["export", str(d), "--top", "1"]) == 0
        (folder,) = capsys.readouterr().out.split()
        meta = json.loads((Path(folder) / "arch.json").read_text())
        assert meta["kind"] == kinds[name]
        model = load_model(folder)  # nothing but the export folder
        assert isinstance(model, torch.nn.Module) and not model.training
        assert main(["resume", str(d)]) == 0  # a finished run: nothing more to do
        with Store.open(d) as store:
            assert len(store.trials()) == len(trials), name
        assert main(["plot", str(d)]) == 0
        assert (d / "plot.png").stat().st_size > 1000


@pytest.mark.slow
def test_pipeline_run_feeds_an_spos_search_by_name(tmp_path: Path) -> None:
    """A SPOS search names a pipeline-trained run: its supernet starts from those weights
    (epochs 0: no training), and its evolution records the architectures it scored."""
    pipe = tmp_path / "pipe"
    assert main(["run", str(_pipeline_file(tmp_path)), "--dir", str(pipe)]) == 0
    f = tmp_path / "spos.yaml"
    f.write_text(
        "space: {object: 'nasforge.parallel.supernet:ChoiceSupernet', "
        "kwargs: {n_blocks: 3, n_candidates: 2, hidden: 16}}\n"
        "strategy: {name: spos, epochs: 0, cycles: 4, population: 2}\n"
        "data: digits-flat\nsupernet: pipe\nthreads: 1\nprogress: 'off'\n"
    )
    d = tmp_path / "spos"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    from safetensors.torch import load_file

    trained = load_file(str(pipe / "artifacts" / "supernet.safetensors"))
    with Store.open(d) as store:
        used = torch.load(store.artifact("supernet"), weights_only=True)
        trials = store.trials()
        assert store.config()["oneshot"]["supernet"] == str(pipe.resolve())
    for key, tensor in trained.items():
        assert torch.equal(used[f"model.{key}"], tensor), key
    assert len(trials) >= 2 and {t.evaluation for t in trials} == {"inherited"}
    assert all(0.0 <= t.metrics["accuracy"] <= 1.0 for t in trials)


def test_a_misspelled_strategy_suggests_the_closest_names(tmp_path: Path) -> None:
    """`strategy = "evolutoin"` with `n_trials` is reported as unknown, with the closest known
    names, instead of being sent to the one-shot side."""
    from nasforge.run.files import load_run_file

    (tmp_path / "kinds_space.py").write_text(SPACE)
    f = tmp_path / "typo.py"
    f.write_text(
        "from kinds_space import Net, evaluate\nspace = Net()\nstrategy = 'evolutoin'\n"
        "config = {'n_trials': 3}\n"
    )
    import nasforge.runners  # noqa: F401

    with pytest.raises(ConfigError, match="unknown strategy 'evolutoin'; did you mean 'evolution'"):
        load_run_file(f)
    f.write_text(f.read_text().replace("'evolutoin'", "{'name': 'evolution', 'seed': 3}"))
    exp = load_run_file(f, directory=str(tmp_path / "x"))
    assert exp.strategy.name == "evolution" and exp.strategy.config()["seed"] == 3
