"""`nasforge export --hf` of a searched Hugging Face model writes a folder that
``from_pretrained`` loads (issue 37 item 6): a tiny GPT-2 built from its config (no hub) is
searched for a few trials through `nasforge run`, exported with `--hf`, and loaded back by
``AutoModelForCausalLM.from_pretrained`` with the outputs of ``nasforge.load_model``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import nasforge as nf
from nasforge.cli import main

transformers = pytest.importorskip("transformers")

from tests.space.test_hf_config import TOKENS, gpt2_space  # noqa: E402 - after the importorskip

RUN_FILE = """\
import torch

from tests.space.test_hf_config import TOKENS, gpt2_space

space = gpt2_space(tie={tie})
strategy = {{"name": "random", "seed": 0}}
config = {{"n_trials": 4, "executor": "inprocess", "progress": "off", "metric": "score"}}


def evaluate(model, report):
    # one real training step, so the exported weights are not the base model's
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(input_ids=TOKENS, labels=TOKENS).loss.backward()
    opt.step()
    widths = {{b.mlp.c_fc.weight.shape[1] for b in model.transformer.h}}
    # tied: the smallest model wins; untied: a model whose FFN widths differ per layer wins
    n = sum(p.numel() for p in model.parameters())
    return {{"score": len(widths) * 1e6 - n}}
"""


def _search(tmp_path: Path, tie: bool) -> Path:
    """Returns the run directory of a 4-trial search of the tiny GPT-2 space."""
    source = tmp_path / f"gpt2_{tie}.py"
    source.write_text(RUN_FILE.format(tie=tie))
    run = tmp_path / f"run_{tie}"
    assert main(["run", str(source), "--dir", str(run)]) == 0
    return run


@pytest.mark.slow  # a 4-trial search through `nasforge run` (~10 s on an idle machine)
def test_export_hf_loads_back_with_from_pretrained(tmp_path: Path) -> None:
    """The best trial's `hf/` folder holds a config.json of its searched sizes (n_inner,
    n_head, n_layer), and from_pretrained rebuilds a model whose logits equal those of
    nasforge.load_model on the same export; arch.json names the folder."""
    run = _search(tmp_path, tie=True)
    out = tmp_path / "export"
    assert main(["export", str(run), "--hf", "--out", str(out)]) == 0
    (folder,) = out.iterdir()
    meta = json.loads((folder / "arch.json").read_text())
    assert meta["hf"] == "hf" and meta["hf_note"] is None
    arch = meta["arch"]
    config = json.loads((folder / "hf" / "config.json").read_text())
    want = {
        "n_inner": arch["ffn"],
        "n_head": arch["heads"],
        "n_layer": arch["layers/transformer.h"],
    }
    assert {k: config[k] for k in want} == want
    assert want != {"n_inner": 64, "n_head": 4, "n_layer": 3}  # the search shrank the base
    loaded = transformers.AutoModelForCausalLM.from_pretrained(folder / "hf").eval()
    ours = nf.load_model(folder)
    with torch.no_grad():
        got = loaded(input_ids=TOKENS, use_cache=False).logits
        expected = ours(input_ids=TOKENS, use_cache=False).logits
    torch.testing.assert_close(got, expected)
    base = nf.freeze(
        gpt2_space(tie=True), arch
    ).eval()  # untrained: the trial's training step shows
    with torch.no_grad():
        assert not torch.allclose(base(input_ids=TOKENS, use_cache=False).logits, got)


def test_export_hf_names_sizes_the_config_cannot_hold(tmp_path: Path, caplog) -> None:
    """FFN widths chosen per layer: `export --hf` still writes arch.json and the weights, logs
    a warning naming n_inner, records it under hf_note, writes no hf/ folder and exits 2."""
    run = _search(tmp_path, tie=False)
    out = tmp_path / "export"
    with caplog.at_level(logging.WARNING, logger="nasforge.run"):
        assert main(["export", str(run), "--hf", "--out", str(out)]) == 2
    (folder,) = out.iterdir()
    meta = json.loads((folder / "arch.json").read_text())
    widths = {v for k, v in meta["arch"].items() if k.startswith("ffn/")}
    assert len(widths) > 1  # the search picked per-layer widths, as the evaluator asks
    assert meta["hf"] is None and "n_inner differs across layers" in meta["hf_note"]
    assert "no Hugging Face folder" in caplog.text and "n_inner differs" in caplog.text
    assert not (folder / "hf").exists()
    assert nf.load_model(folder) is not None  # nasforge still loads it
