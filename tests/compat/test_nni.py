"""NNI 3.0 model spaces on nasforge (issue 53): a space written against NNI, loaded unchanged,
searched multi-trial and one-shot, exported as a plain PyTorch module; what cannot be mapped is
one line naming it."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
import nasforge.compat.nni as nni
from nasforge import oneshot
from nasforge.compat.nni import _importer, load
from nasforge.engine import Experiment
from nasforge.errors import ConfigError, SpaceError
from nasforge.run.export import export_top, load_model
from nasforge.space import modules as nf_modules
from nasforge.strategy import RegularizedEvolution

HERE = Path(__file__).parent
SPACE_FILE = str(HERE.parents[1] / "examples" / "nni" / "every_kind.py")

#: every decision of EveryKind: label -> kind, with NNI's labels (prefix ``net``)
KINDS = {
    "net/kernel": "layer",
    "net/pool": "layer",
    "net/depth": "depth",
    "net/act0": "layer",
    "net/act1": "layer",
    "net/act2": "layer",
    "net/skip": "input",
    "net/cell/input_1_0": "input",
    "net/cell/op_1_0": "layer",
    "net/cell/input_2_0": "input",
    "net/cell/op_2_0": "layer",
    "net/hidden": "layer",
}


def _space() -> nn.Module:
    return load(SPACE_FILE).EveryKind()


def _space_modules(model: nn.Module) -> list[str]:
    """Returns the paths of the modules of ``model`` that hold a choice (a frozen Cell, as in
    NNI, is a plain module of its chosen ops and inputs)."""
    kinds = (nf_modules.LayerChoice, nf_modules.InputChoice, nf_modules.Repeat)
    return [p for p, m in model.named_modules() if isinstance(m, kinds)]


def _digits(n: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    from nasforge.data import load_digits

    X, y = load_digits(seed=0).train[:]
    return X[:n].reshape(-1, 1, 8, 8), y[:n]


def test_every_choice_kind_records_with_nni_labels() -> None:
    """The NNI file loads unchanged; each choice kind is a decision under the label NNI gives
    it; the mutable layers' choices (kernel, hidden*2) are layer decisions over their values."""
    ss = _space().search_space()
    assert {d.label: d.kind for d in ss.decisions} == KINDS
    values = {d.label: d.values for d in ss.decisions}
    assert values["net/kernel"] == (1, 3) and values["net/hidden"] == (4, 8)
    assert values["net/depth"] == (1, 2, 3)


def test_an_nni_architecture_freezes_to_a_plain_module() -> None:
    """An architecture in NNI's form (an InputChoice as a one-item list) freezes to a model
    with no space module left, the chosen sizes built, and the right output shape."""
    space = _space()
    arch = space.search_space().sample(0)
    arch.update({"net/kernel": 3, "net/hidden": 8, "net/depth": 2, "net/skip": [1]})
    model = space.freeze(arch)
    assert _space_modules(model) == []
    assert isinstance(model.conv, nn.Conv2d) and type(model.conv) is nn.Conv2d
    assert model.conv.kernel_size == (3, 3) and model.conv.padding == (1, 1)
    assert model.fc1.out_features == 16 and model.fc2.in_features == 16
    assert len(model.blocks) == 2
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 10)


def test_space_survives_deepcopy() -> None:
    """copy.deepcopy of the space (what a supernet does) keeps every decision."""
    space = _space()
    twin = copy.deepcopy(space)
    assert twin.search_space().decisions == space.search_space().decisions


@pytest.mark.slow
def test_multi_trial_search_and_export(tmp_path: Path) -> None:
    """Regularized evolution searches the NNI space through the engine; the best trial exports
    and loads back as a plain PyTorch module that runs."""
    X, y = _digits(64)

    def score(model: nn.Module, report: object) -> dict[str, float]:
        with torch.no_grad():
            return {"default": float((model(X).argmax(1) == y).float().mean())}

    d = tmp_path / "run"
    strategy = RegularizedEvolution(population_size=3, sample_size=2, seed=0)
    Experiment(_space(), score, strategy, directory=d, n_trials=5, executor="inprocess",
               progress="off").run()  # fmt: skip
    (folder,) = export_top(d, 1)
    model = load_model(folder)
    assert _space_modules(model) == []
    assert model(X[:2]).shape == (2, 10)


@pytest.mark.slow
def test_one_shot_spos_search() -> None:
    """SPOS trains a supernet of the NNI space and evolves over it; its architecture covers
    every decision and freezes to a plain module that runs."""
    X, y = _digits(128)
    space = _space()
    settings = {"population": 3, "cycles": 3, "sample_size": 2, "bn_batches": 1}
    result = oneshot.search(
        space, "spos", (X, y), epochs=1, batch_size=32, progress="off", threads=1, **settings
    )
    assert set(result.arch) == set(KINDS)
    space.search_space().validate(result.arch)
    model = nf.freeze(space, result.arch)
    assert _space_modules(model) == []
    assert model(X[:2]).shape == (2, 10)


def test_unmappable_constructs_are_one_line_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NNI constructs with no nasforge meaning fail in one line that names the construct:
    an unbounded nni.normal, InputChoice(n_chosen=None), nni.mutable.Constraint, and an NNI
    module outside the space language while NNI is absent."""

    class Normal(nni.ModelSpace, label_prefix="m"):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nni.MutableLinear(4, nni.normal("width", 8, 2))

    class AnyInputs(nni.ModelSpace, label_prefix="m"):
        def __init__(self) -> None:
            super().__init__()
            self.pick = nni.InputChoice(3, n_chosen=None, label="pick")

    cases = [
        (Normal, r"NNI construct not mapped: Numerical\(.*label='m/width'\).*nni\.normal"),
        (AnyInputs, r"NNI construct not mapped: InputChoice 'm/pick' with n_chosen=None"),
    ]
    for cls, pattern in cases:
        with pytest.raises(SpaceError, match=pattern) as info:
            cls()
        assert "\n" not in str(info.value)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load() puts the file's folder first
    f = tmp_path / "constrained.py"
    f.write_text("from nni.mutable import Constraint\n")
    with pytest.raises(SpaceError, match=r"NNI construct not mapped: Constraint") as info:
        load(str(f))
    assert "\n" not in str(info.value)
    g = tmp_path / "oneshot_import.py"
    g.write_text("import nni.nas.oneshot.pytorch\n")
    monkeypatch.setattr(_importer, "_nni_installed", lambda: False)
    with pytest.raises(ConfigError, match=r"not mapped: `import nni\.nas\.oneshot\.pytorch`"):
        load(str(g))
