"""Models out for Hugging Face models: a frozen transformers model exports verified, taking
its main input by name and returning its logits, with no key-value cache in the graph."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nasforge.run.deploy import TOLERANCE, export_model, onnx_session

transformers = pytest.importorskip("transformers")


def _tiny_gpt2() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(cfg).eval()


def test_a_tiny_gpt2_exports_to_torchscript_returning_its_logits(tmp_path: Path) -> None:
    """A GPT-2 built from its config traces to TorchScript on derived token ids, verified,
    and the file maps a batch of another size to the model's logits."""
    model = _tiny_gpt2()
    r = export_model(model, tmp_path / "gpt2", "torchscript")
    assert r["max_abs_diff"] <= TOLERANCE and r["dynamic_batch"] and r["input_shape"] == [2, 16]
    ids = torch.randint(0, 50, (3, 16))
    with torch.no_grad():
        got, want = torch.jit.load(r["path"])(ids), model(input_ids=ids).logits
    assert got.shape == want.shape == (3, 16, 50) and (got - want).abs().max() <= TOLERANCE


@pytest.mark.slow
def test_a_tiny_gpt2_exports_to_onnx_with_its_input_names(tmp_path: Path) -> None:
    """The same model exports to ONNX (input ``input_ids``, output ``logits``) and as an
    exported program, each verified with a dynamic batch; onnxruntime runs another batch."""
    model = _tiny_gpt2()
    for fmt in ("onnx", "exported-program"):
        r = export_model(model, tmp_path / fmt, fmt)
        assert r["max_abs_diff"] <= TOLERANCE and r["dynamic_batch"], (fmt, r)
    sess = onnx_session(tmp_path / "onnx.onnx")
    assert [i.name for i in sess.get_inputs()] == ["input_ids"]
    assert [o.name for o in sess.get_outputs()] == ["logits"]
    ids = torch.randint(0, 50, (3, 16))
    (got,) = sess.run(None, {"input_ids": ids.numpy()})
    with torch.no_grad():
        want = model(input_ids=ids).logits
    assert (torch.from_numpy(got) - want).abs().max() <= TOLERANCE
