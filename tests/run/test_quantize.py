"""int8 models out: `nasforge export --format onnx --quantize int8` writes onnxruntime's
dynamic quantization beside the fp32 model with its accuracy change and latency gain."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import onnx
import pytest
import torch
from torch import nn

from nasforge.cli import main
from nasforge.errors import ConfigError
from nasforge.run.deploy import export_model, onnx_session
from nasforge.run.export import export_top
from nasforge.run.quantize import int8_path, quantize_onnx, saturates_int8


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()


def test_quantize_onnx_writes_an_int8_model_and_reports_its_cost_and_gain(tmp_path: Path) -> None:
    """The int8 file holds integer matrix products, runs close to the fp32 model, and the
    report has both accuracies on the data, the output difference and both latencies."""
    model = _mlp()
    x = torch.randn(2, 16)
    fp32 = export_model(model, tmp_path / "model.onnx", "onnx", example=x, dynamo=False)["path"]
    data_x = torch.randn(64, 16)
    with torch.no_grad():
        labels = model(data_x).argmax(-1)  # the fp32 model's own answers: accuracy 1.0
    r = quantize_onnx(fp32, x, (data_x, labels), n_runs=3, n_warmup=1)
    assert r["path"] == str(tmp_path / "model.int8.onnx") == str(int8_path(fp32))
    assert r["reduce_range"] == saturates_int8()  # 7-bit weights where 8 would saturate
    ops = {n.op_type for n in onnx.load(r["path"]).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops, ops
    acc = r["accuracy"]
    assert acc["fp32"] == 1.0 and acc["n"] == 64 and acc["change"] == acc["int8"] - 1.0
    assert acc["int8"] >= 0.9  # int8 weights of a 2-layer MLP flip few argmaxes
    sess = onnx_session(r["path"])
    got = torch.from_numpy(sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0])
    with torch.no_grad():
        assert 0 < (got - model(x)).abs().max() < 0.05  # quantized: close, not equal
    assert 0 < r["max_abs_diff"] < 0.05 and r["input_shape"] == [1, 16]
    assert r["latency_ms"]["fp32"] > 0 and r["latency_ms"]["int8"] > 0
    assert r["speedup"] == r["latency_ms"]["fp32"] / r["latency_ms"]["int8"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.int8.onnx", "model.onnx"]
    assert quantize_onnx(fp32, x, n_runs=1, n_warmup=0)["accuracy"] is None


def test_int8_products_saturate_on_x86_without_vnni_only() -> None:
    """An x86 CPU without a VNNI flag saturates (7-bit weights then); with avx512_vnni,
    avx_vnni or amx_int8 it does not, nor does another architecture."""
    assert saturates_int8("flags : fpu sse2 avx2 fma", "x86_64")
    for flag in ("avx512_vnni", "avx_vnni", "amx_int8"):
        assert not saturates_int8(f"flags : fpu avx2 {flag} fma", "x86_64")
    assert not saturates_int8("Features : fp asimd", "aarch64")


def test_quantize_without_onnx_is_one_line(tmp_path: Path, caplog) -> None:
    """--quantize with only another format fails in one line naming the fix, before reading
    the run or writing anything."""
    caplog.set_level(logging.ERROR, logger="nasforge")
    out = tmp_path / "out"
    argv = ["export", str(tmp_path / "no-run"), "--format", "torchscript", "--quantize", "int8"]
    assert main([*argv, "--out", str(out)]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.name == "nasforge"]
    assert "\n" not in message and "add --format onnx" in message and "torchscript" in message
    assert not out.exists()
    with pytest.raises(ConfigError, match="'int8'"):
        export_top(tmp_path, formats=["onnx"], quantize="int4")


@pytest.mark.slow
def test_a_run_exports_int8_with_the_accuracy_change_on_its_evaluator_data(
    tmp_path: Path, capsys
) -> None:
    """A multi-trial run's best model exported with --quantize int8 gets model.int8.onnx and
    a report whose accuracies are on the run's validation split, printed in one line."""
    from nasforge.data import load_digits
    from nasforge.engine import Experiment
    from nasforge.engine.classification import ClassificationEvaluator
    from nasforge.spaces import DigitsCNN

    d = tmp_path / "run"
    evaluator = ClassificationEvaluator("digits", epochs=1, batch_size=128, seed=0)
    Experiment(DigitsCNN(widths=(4, 8), depths=(1, 2)), evaluator, "random", n_trials=1,
               executor="inprocess", directory=d, progress="off").run()  # fmt: skip
    capsys.readouterr()
    assert main(["export", str(d), "--format", "onnx", "--quantize", "int8"]) == 0
    out = capsys.readouterr().out.splitlines()
    folder = Path(out[0])
    meta = json.loads((folder / "arch.json").read_text())
    q = meta["quantized"]
    assert (folder / q["path"]).is_file() and q["path"] == "model.int8.onnx"
    assert q["accuracy"]["n"] == len(load_digits(seed=0).val) and "validation" in q["data"]
    assert abs(q["accuracy"]["fp32"] - meta["metrics"]["accuracy"]) < 0.01  # the same data
    assert any("int8  accuracy" in line and "ms (" in line for line in out), out
