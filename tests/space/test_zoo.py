"""Mutators on third-party models (transformers, efficientnet_pytorch) built from tiny configs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.run.export import export_top, load_model

transformers = pytest.importorskip("transformers")
efficientnet = pytest.importorskip("efficientnet_pytorch")

H = 16  # hidden width of every tiny transformer here
NO_DROP = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


# -- candidate factories (module level, so spaces pickle and rebuild by reference) -------------
def bert_ffn(old: nn.Module, width: int) -> nn.Module:
    """Returns a copy of a BERT/ViT layer whose feed-forward has ``width`` hidden units."""
    new = copy.deepcopy(old)
    new.intermediate.dense = nn.Linear(H, width)
    new.output.dense = nn.Linear(width, H)
    return new


def gpt2_ffn(old: nn.Module, width: int) -> nn.Module:
    """Returns a copy of a GPT-2 MLP with ``width`` hidden units."""
    from transformers.pytorch_utils import Conv1D

    new = copy.deepcopy(old)
    new.c_fc, new.c_proj = Conv1D(width, H), Conv1D(H, width)
    return new


def vit_ffn(old: nn.Module, width: int) -> nn.Module:
    """Returns a copy of a ViT MLP with ``width`` hidden units."""
    new = copy.deepcopy(old)
    new.fc1, new.fc2 = nn.Linear(H, width), nn.Linear(width, H)
    return new


def layer_norm() -> nn.Module:
    return nn.LayerNorm(H)


# -- the models ---------------------------------------------------------------------------------
def bert() -> nn.Module:
    cfg = transformers.BertConfig(
        vocab_size=40, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=3, **NO_DROP,
    )  # fmt: skip
    return transformers.BertForSequenceClassification(cfg)


def gpt2() -> nn.Module:
    cfg = transformers.GPT2Config(
        vocab_size=40, n_positions=16, n_embd=H, n_layer=2, n_head=2,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def vit() -> nn.Module:
    cfg = transformers.ViTConfig(
        image_size=8, patch_size=4, num_channels=3, hidden_size=H, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, num_labels=3, **NO_DROP,
    )  # fmt: skip
    return transformers.ViTForImageClassification(cfg)


def effnet() -> nn.Module:
    return efficientnet.EfficientNet.from_name(
        "efficientnet-b0", num_classes=3, image_size=16, width_coefficient=0.25,
        depth_coefficient=0.25, dropout_rate=0.0, drop_connect_rate=0.0,
    )  # fmt: skip


TOKENS = torch.randint(0, 40, (2, 8), generator=torch.Generator().manual_seed(0))
IMAGES = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
LABELS = torch.tensor([0, 2])

# name -> (inputs as keyword arguments, loss of the outputs)
CASES: dict[str, tuple[dict[str, Any], Callable[[Any], torch.Tensor]]] = {
    "bert": ({"input_ids": TOKENS}, lambda out: nn.functional.cross_entropy(out.logits, LABELS)),
    "gpt2": (
        {"input_ids": TOKENS, "use_cache": False},
        lambda out: nn.functional.cross_entropy(
            out.logits[:, :-1].reshape(-1, 40), TOKENS[:, 1:].reshape(-1)
        ),
    ),
    "vit": ({"pixel_values": IMAGES}, lambda out: nn.functional.cross_entropy(out.logits, LABELS)),
    "effnet": (
        {"inputs": torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))},
        lambda out: nn.functional.cross_entropy(out, LABELS),
    ),
}


class ZooSpace(nf.MutatedSpace):
    """One space per zoo model: module-level choices, plus one graph mutator when ``graph``."""

    def __init__(self, name: str, graph: bool = True) -> None:
        inputs = CASES[name][0]
        ln = {"none": None, "ln": layer_norm}
        if name == "bert":
            base = bert()
            mutators = [
                nf.ModuleMutator("bert.encoder.layer.*", [32, 8], factory=bert_ffn, label="ffn"),
                nf.ModuleMutator(
                    "*.intermediate.intermediate_act_fn",
                    {"gelu": None, "relu": nn.ReLU()},
                    label="act",
                    tie=True,
                ),  # fmt: skip
            ]
            graph_mutator = nf.InsertMutator("bert.pooler.activation", ln)
        elif name == "gpt2":
            base = gpt2()
            mutators = [
                nf.ModuleMutator("transformer.h.*.mlp", [64, 8], factory=gpt2_ffn, label="ffn"),
                nf.ModuleMutator(
                    "transformer.h.*.mlp.act", {"gelu": None, "relu": nn.ReLU()}, label="act"
                ),
            ]
            graph_mutator = nf.InsertMutator("transformer.ln_f", ln)
        elif name == "vit":
            base = vit()
            mutators = [
                nf.ModuleMutator("vit.layers.*.mlp", [32, 8], factory=vit_ffn),
                nf.ModuleMutator("*.activation_fn", {"gelu": None, "silu": nn.SiLU()}, tie=True),
            ]
            graph_mutator = nf.InsertMutator("vit.layernorm", ln)
        else:
            base = effnet()
            mutators = [
                nf.ModuleMutator("_blocks.*._swish", {"swish": None, "relu": nn.ReLU()}, tie=True)
            ]
            graph_mutator = nf.InsertMutator("_bn1", {"none": None, "relu": nn.ReLU})
        mutators += [graph_mutator] if graph else []
        super().__init__(base, mutators, example_inputs=inputs)


TRAINED: dict[str, nn.Module] = {}  # the model each in-process trial trained, by case
_CURRENT = [""]  # the case the in-process trial runs


def one_step(model: nn.Module, report: Any) -> dict[str, float]:
    """Trains ``model`` one step on the case's batch; returns the loss."""
    inputs, loss_of = CASES[_CURRENT[0]]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = loss_of(model(**inputs))
    loss.backward()
    opt.step()
    TRAINED[_CURRENT[0]] = model
    return {"loss": float(loss.detach())}


@pytest.mark.parametrize("name", list(CASES))
def test_zoo_model_searches_freezes_trains_exports(name: str, tmp_path: Path) -> None:
    """Sample, freeze, forward, one training step, export and load_model give equal outputs."""
    inputs, loss_of = CASES[name]
    space = ZooSpace(name)
    labels = list(space.search_space())
    assert any(lb.startswith("insert/") for lb in labels)  # the graph mutator's decision
    assert len(labels) >= 2
    model = nf.freeze(space, space.search_space().sample(1))
    loss = loss_of(model(**inputs))
    assert torch.isfinite(loss)

    _CURRENT[0] = name
    exp = Experiment(
        space, one_step, "random", metric="loss", mode="min", n_trials=1,
        executor="inprocess", directory=tmp_path / "run", progress="off",
    )  # fmt: skip
    exp.run()
    (folder,) = export_top(tmp_path / "run")
    loaded = load_model(folder)
    trained = TRAINED[name].eval()
    with torch.no_grad():
        want, got = trained(**inputs), loaded(**inputs)
    want = getattr(want, "logits", want)
    got = getattr(got, "logits", got)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("name", ["bert", "gpt2", "vit"])
def test_module_level_space_keeps_the_transformers_model(name: str, tmp_path: Path) -> None:
    """Module-level choices alone freeze to the transformers class itself: same output type,
    save_pretrained works, and GPT-2 still generates."""
    inputs, loss_of = CASES[name]
    space = ZooSpace(name, graph=False)
    assert space.capture is None  # nothing traced or exported
    arch = {lb: d.values[-1] for lb, d in zip(space.search_space(), space.search_space().decisions)}
    model = nf.freeze(space, arch)
    assert type(model) is type(space.base_model)
    out = model(**inputs)
    assert type(out) is type(space.base_model(**inputs))
    loss_of(out).backward()
    model.save_pretrained(tmp_path / "hf")
    assert any((tmp_path / "hf").iterdir())
    if name == "gpt2":
        assert model.transformer.h[0].mlp.c_fc.weight.shape == (H, 8)
        ids = model.generate(TOKENS[:1, :4], max_new_tokens=3, min_new_tokens=3, do_sample=False)
        assert ids.shape == (1, 7)


def test_spos_supernet_over_ffn_widths_trains_one_step() -> None:
    """A SPOS supernet over GPT-2's module-level FFN widths trains a sampled path one step, and
    a frozen architecture inherits its weights and computes the same output."""
    from nasforge.oneshot.spos import Spos, activate
    from nasforge.oneshot.supernet import Supernet, inherit_weights

    inputs, loss_of = CASES["gpt2"]
    space = ZooSpace("gpt2", graph=False)
    net = Supernet(space, Spos)
    opt = torch.optim.SGD(net.weights(), lr=0.1)
    arch = space.search_space().sample(3)
    activate(net, arch)
    before = [p.detach().clone() for p in net.weights()]
    loss = loss_of(net(**inputs))
    loss.backward()
    opt.step()
    changed = sum(not torch.equal(a, p) for a, p in zip(before, net.weights()))
    assert 0 < changed < len(before)  # only the sampled path's weights moved
    model = inherit_weights(net, arch)
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, net(**inputs).logits)


def gpt2_step(model: nn.Module, report: Any) -> dict[str, float]:
    """Trains a GPT-2 one step on the fixed batch; returns its loss (a pool worker's trial)."""
    torch.set_num_threads(1)
    inputs, loss_of = CASES["gpt2"]
    loss = loss_of(model(**inputs))
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return {"loss": float(loss.detach())}


def test_pool_executor_and_resume_rebuild_the_space(tmp_path: Path) -> None:
    """Forked pool workers freeze and train a transformers space, and `nasforge resume` in a
    new process rebuilds the space from its reference and runs the trials left."""
    root = Path(__file__).resolve().parents[2]
    run = tmp_path / "run"
    exp = Experiment(
        ZooSpace("gpt2", graph=False), gpt2_step, "random", metric="loss", mode="min",
        n_trials=2, executor="pool", concurrency=2, directory=run, progress="off",
    )  # fmt: skip
    exp.run()
    assert [t.status for t in exp.trials()] == ["done", "done"]
    proc = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", "resume", str(run), "--n-trials", "3",
         "--executor", "inprocess"],
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    from nasforge.run.store import Store

    with Store.open(run) as store:
        trials = store.trials()
    assert len(trials) == 3 and all(t.status == "done" for t in trials)
    (folder,) = export_top(run)
    assert type(load_model(folder)).__name__ == "GPT2LMHeadModel"
