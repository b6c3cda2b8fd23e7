"""Models out: `nasforge export --format` writes verified ONNX, TorchScript and exported
programs of a multi-trial and a one-shot result; an unexportable operator is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from nasforge.cli import main
from nasforge.errors import ExportError
from nasforge.run.deploy import FORMATS, TOLERANCE, export_model, onnx_session
from nasforge.run.export import load_model
from tests.oneshot.test_runner import _write

FLAGS = [a for f in FORMATS for a in ("--format", f)]


def _run_file(fmt: str, path: Path, x: torch.Tensor) -> torch.Tensor:
    """Returns the output on ``x`` of the file at ``path``, loaded back in format ``fmt``."""
    if fmt == "onnx":
        sess = onnx_session(path)
        return torch.from_numpy(sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0])
    if fmt == "torchscript":
        return torch.jit.load(str(path))(x)
    return torch.export.load(str(path)).module()(x)


def _check_exports(folder: Path) -> None:
    """Asserts that each format's file in ``folder`` runs and matches the PyTorch model on a
    batch of a size the export never saw."""
    meta = json.loads((folder / "arch.json").read_text())
    assert sorted(meta["deploy"]) == sorted(FORMATS)
    model = load_model(folder)
    x = torch.load(folder / meta["example"], weights_only=True)
    x = torch.cat([x, x, x[:1]])  # batch 5: the batch axis is dynamic
    with torch.no_grad():
        want = model(x)
    for fmt, r in meta["deploy"].items():
        assert r["max_abs_diff"] <= r["tolerance"] == TOLERANCE and r["dynamic_batch"]
        got = _run_file(fmt, folder / r["path"], x)
        assert got.shape == want.shape and (got - want).abs().max() <= TOLERANCE


@pytest.mark.slow
def test_multi_trial_result_exports_in_every_format(tmp_path: Path, capsys) -> None:
    """A multi-trial run's best model exports as ONNX, TorchScript and an exported program;
    each is verified, reported on stdout and runs another batch size."""
    from nasforge.data import load_digits
    from nasforge.engine import Experiment
    from nasforge.engine.classification import ClassificationEvaluator
    from nasforge.spaces import DigitsCNN

    d = tmp_path / "run"
    evaluator = ClassificationEvaluator(load_digits(seed=0), epochs=1, batch_size=128, seed=0)
    Experiment(DigitsCNN(widths=(4, 8), depths=(1, 2)), evaluator, "random", n_trials=2,
               executor="inprocess", directory=d, progress="off").run()  # fmt: skip
    capsys.readouterr()
    assert main(["export", str(d), *FLAGS, "--input-shape", "1,8,8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum("max |diff|" in line for line in out) == len(FORMATS)
    folder = Path(out[0])
    assert json.loads((folder / "arch.json").read_text())["deploy"]["onnx"]["input_shape"] == [
        2,
        1,
        8,
        8,
    ]
    _check_exports(folder)
    bad = tmp_path / "bad"  # an input the model does not take: exit 2, nothing written
    assert (
        main(["export", str(d), "--format", "onnx", "--input-shape", "5,8,8", "--out", str(bad)])
        == 2
    )
    assert not bad.exists()


@pytest.mark.slow
def test_one_shot_result_exports_in_every_format(tmp_path: Path, capsys) -> None:
    """A one-shot (SPOS) run's pick exports in every format with a derived example input."""
    f = _write(tmp_path, {"name": "spos", "cycles": 2, "population": 2})
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    capsys.readouterr()
    assert main(["export", str(d), *FLAGS]) == 0
    _check_exports(Path(capsys.readouterr().out.splitlines()[0]))


@torch.library.custom_op("nasforge_test::scramble", mutates_args=())
def scramble(x: torch.Tensor) -> torch.Tensor:
    """Returns ``x`` reversed on its last axis: an operator ONNX has no function for."""
    return x.flip(-1)


@scramble.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Scrambler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scramble(self.fc(x))


@pytest.mark.slow
def test_an_unexportable_operator_is_one_line_naming_it(tmp_path: Path) -> None:
    """An operator without an ONNX function fails the export in one line that names it, and
    leaves no file; the formats that can hold it still export."""
    with pytest.raises(ExportError) as info:
        export_model(Scrambler(), tmp_path / "m", "onnx")
    message = str(info.value)
    assert "\n" not in message and "nasforge_test.scramble" in message
    assert list(tmp_path.iterdir()) == []
    r = export_model(Scrambler(), tmp_path / "m", "exported-program")
    assert r["max_abs_diff"] <= TOLERANCE and Path(r["path"]).name == "m.pt2"


def test_a_torchscript_export_is_verified_and_keeps_a_dynamic_batch(tmp_path: Path) -> None:
    """export_model writes a traced Linear, reports its difference and a dynamic batch."""
    torch.manual_seed(0)
    r = export_model(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), tmp_path / "m", "torchscript")
    assert r["path"].endswith("m.ts") and r["max_abs_diff"] <= TOLERANCE
    assert r["dynamic_batch"] and r["input_shape"] == [2, 3]


def _every_format(model: nn.Module, x: torch.Tensor, folder: Path) -> None:
    """Asserts that ``model`` exports verified in every format with a dynamic batch, and
    that each written file matches the model on a batch of a size the export never saw."""
    y = torch.cat([x, x, x[:1]])
    with torch.no_grad():
        want = model.eval()(y)
    for fmt in FORMATS:
        r = export_model(model, folder / fmt.replace("-", "_"), fmt, example=x)
        assert r["max_abs_diff"] <= TOLERANCE and r["dynamic_batch"], (fmt, r)
        got = _run_file(fmt, Path(r["path"]), y)
        assert got.shape == want.shape and (got - want).abs().max() <= TOLERANCE, fmt


@pytest.mark.slow
def test_an_ofa_sub_network_exports_in_every_format(tmp_path: Path) -> None:
    """A sub-network extracted from a once-for-all supernet (non-trivial elastic choices)
    exports as ONNX, TorchScript and an exported program, each verified."""
    from nasforge.ofa.mobilenet import OFAMobileNetV3, extract
    from tests.ofa.conftest import tiny_spec

    torch.manual_seed(0)
    net = OFAMobileNetV3(tiny_spec("ofa")).eval()
    space = net.search_space()
    arch = space.sample_dims(3)
    assert arch != space.largest() and arch != space.smallest()
    _every_format(extract(net, arch), torch.randn(2, 1, 16, 16), tmp_path)


@pytest.mark.slow
def test_a_hub_architecture_exports_in_every_format(tmp_path: Path) -> None:
    """A published hub architecture (NAS-Bench-201's ResNet cell, CIFAR-sized) exports in
    every format, each verified, from its own example input."""
    from nasforge import hub

    torch.manual_seed(0)
    name = "nasbench201-resnet"
    _every_format(hub.model(name), hub.example_input(name, batch=2), tmp_path)


@pytest.mark.slow
def test_a_vision_transformer_of_the_hub_exports_in_every_format(tmp_path: Path) -> None:
    """AutoFormer-Tiny (224x224, relative position embeddings) exports in every format: the
    token grid's side is computed from a traced shape (TorchScript's trace once refused
    ``round`` of it)."""
    from nasforge import hub

    torch.manual_seed(0)
    name = "autoformer-tiny"
    _every_format(hub.model(name), hub.example_input(name, batch=2), tmp_path)


@pytest.mark.slow
def test_a_compofa_run_exports_its_sub_networks_in_every_format(tmp_path: Path, capsys) -> None:
    """`nasforge export --per target --format ...` of a CompOFA run writes each target's
    sub-network in every format, verified, that runs another batch size."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(120, 1, 28, 28, generator=g)
    torch.save({"x": x, "y": (x.mean(dim=(1, 2, 3)) > 0).long()}, tmp_path / "data.pt")
    run = tmp_path / "run"
    assert main(["ofa", "train", "--space", "compofa", "--out", str(run), "--data",
                 str(tmp_path / "data.pt"), "--full-epochs", "1", "--shrink-epochs", "1",
                 "--width-mult", "0.25", "--n-subnets", "1", "--batch-size", "60",
                 "--no-probes"]) == 0  # fmt: skip
    assert main(["ofa", "search", str(run), "--targets", "1", "2", "--latency", "flops",
                 "--accuracy", "predictor", "--n-pairs", "6", "--population", "4",
                 "--generations", "1", "--data", str(tmp_path / "data.pt")]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["export", str(run), "--per", "target", *FLAGS]) == 0
    folders = [Path(line) for line in capsys.readouterr().out.splitlines() if line[:1] != " "]
    assert folders
    for folder in folders:
        _check_exports(folder)
