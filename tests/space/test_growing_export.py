"""A search over a space that grows by edits exports its best network, and ``load_model``
rebuilds the same network from the edit history alone (issue 39): a few trials of a
path-level and a WANN space through `nasforge run`, extended by `nasforge resume`, exported
by `nasforge export`; the loaded model gives the outputs the trial measured."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import nasforge as nf
from nasforge.cli import main
from nasforge.run.store import Store
from nasforge.spaces.pathlevel import PathLevelSpace
from nasforge.spaces.wann import WannSpace

SPACES = {
    "pathlevel": "from nasforge.spaces.pathlevel import PathLevelSpace\n"
    "space = PathLevelSpace(8, 3, units=4, max_edits=6)\n",
    "wann": "from nasforge.spaces.wann import WannSpace\n"
    "space = WannSpace(n_inputs=8, n_outputs=3, per_output=1, max_edits=10)\n",
}

#: the spaces of SPACES, built here
SAME = {
    "pathlevel": lambda: PathLevelSpace(8, 3, units=4, max_edits=6),
    "wann": lambda: WannSpace(n_inputs=8, n_outputs=3, per_output=1, max_edits=10),
}

RUN_FILE = """\
import torch

{space}
strategy = {{"name": "evolution", "seed": 0}}
config = {{"n_trials": 3, "executor": "inprocess", "progress": "off", "metric": "fit"}}


def evaluate(model, report):
    torch.manual_seed(0)
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    params = list(model.parameters())
    if params:  # a path-level network: one real training step, so its weights are its own
        opt = torch.optim.SGD(params, lr=0.1)
        model(x).pow(2).mean().backward()
        opt.step()
    else:  # a WANN has one shared weight, a buffer: a value other than the default
        model.weight.fill_(0.7)
    with torch.no_grad():
        out = model(x)
    return {{"fit": -len(str(model.state)), "check": float(out.sum()),
             "check_abs": float(out.abs().sum())}}
"""


@pytest.mark.parametrize("name", list(SPACES))
def test_a_grown_network_exports_and_loads_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """3 trials, resumed to 5 (ids are the networks' ids), exported: load_model rebuilds the
    best network from its edit history with the trial's weights, giving the outputs the trial
    measured, and its mutation_history lists the history's edits."""
    torch.set_num_threads(1)
    source = tmp_path / f"{name}.py"
    source.write_text(RUN_FILE.format(space=SPACES[name]))
    run = tmp_path / "run"
    assert main(["run", str(source), "--dir", str(run)]) == 0
    assert main(["resume", str(run), "--n-trials", "5"]) == 0
    space = SAME[name]()  # the run file's space
    with Store.open(run) as store:
        trials = store.trials()
    assert len(trials) == 5 and {t.status for t in trials} <= {"done", "cached"}
    edits = space.search_space()
    assert all(t.arch_id == edits.id_of(t.arch) for t in trials)
    out = tmp_path / "export"
    assert main(["export", str(run), "--out", str(out), "--top", "2"]) == 0
    folders = sorted(out.iterdir())
    assert len(folders) == 2
    for folder in folders:
        meta = json.loads((folder / "arch.json").read_text())
        assert meta["weights"] == "weights.pt"
        model = nf.load_model(folder)
        x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            y = model(x)
        assert float(y.sum()) == pytest.approx(meta["metrics"]["check"], rel=1e-5, abs=1e-5)
        assert float(y.abs().sum()) == pytest.approx(meta["metrics"]["check_abs"], rel=1e-5)
        history = [m.value for m in nf.mutation_history(model)]
        assert history == meta["arch"]["edits"]
        fresh = nf.freeze(space, meta["arch"])  # untrained: the weights came from the trial
        with torch.no_grad():
            assert not torch.allclose(fresh(x), y)
    # --hf saves Hugging Face models only: one line, exit 2, the nasforge export still loads
    caplog.clear()
    assert main(["export", str(run), "--out", str(tmp_path / "hf"), "--hf"]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "\n" not in errors[0], errors
    assert "--hf saves a Hugging Face model" in errors[0] and "nasforge.load_model" in errors[0]
    (folder,) = (tmp_path / "hf").iterdir()  # --top 1: the best trial's export, without hf/
    assert not (folder / "hf").exists()
    meta = json.loads((folder / "arch.json").read_text())
    best = json.loads((folders[0] / "arch.json").read_text())  # rank1 of the export above
    assert meta["rank"] == 1 and meta["trial"] == best["trial"]
    with torch.no_grad():
        y = nf.load_model(folder)(x)  # the trial's own weights, as in the export above
    assert float(y.sum()) == pytest.approx(meta["metrics"]["check"], rel=1e-5, abs=1e-5)
