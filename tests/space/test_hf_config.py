"""A searched Hugging Face model saves with a config.json of its frozen sizes and loads back
with ``from_pretrained`` (GPT-2 and Llama from tiny configs, no hub)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.errors import SpaceError
from nasforge.space import mutator as mutator_module
from nasforge.space.hf_config import check_config, sync_config

transformers = pytest.importorskip("transformers")

H = 16  # hidden width of both tiny models
TOKENS = torch.randint(0, 40, (2, 8), generator=torch.Generator().manual_seed(0))


# -- candidate factories ------------------------------------------------------------------------
def gpt2_ffn(old: nn.Module, width: int) -> nn.Module:
    """Returns a copy of a GPT-2 MLP with ``width`` hidden units."""
    from transformers.pytorch_utils import Conv1D

    new = copy.deepcopy(old)
    new.c_fc, new.c_proj = Conv1D(width, H), Conv1D(H, width)
    return new


def gpt2_heads(old: nn.Module, heads: int) -> nn.Module:
    """Returns a GPT-2 attention with ``heads`` heads and the old one's weights (GPT-2's head
    count splits the width; it changes no shape)."""
    from transformers.models.gpt2.modeling_gpt2 import GPT2Attention

    cfg = copy.deepcopy(old.config)
    cfg.n_head = heads
    new = GPT2Attention(cfg, layer_idx=old.layer_idx)
    new.load_state_dict(old.state_dict())
    return new


def first_layers(old: nn.Module, n: int) -> nn.Module:
    """Returns the first ``n`` blocks of a block list."""
    return nn.ModuleList(list(old)[:n])


def llama_ffn(old: nn.Module, width: int) -> nn.Module:
    """Returns a copy of a Llama MLP with ``width`` hidden units."""
    new = copy.deepcopy(old)
    new.gate_proj, new.up_proj = nn.Linear(H, width, bias=False), nn.Linear(H, width, bias=False)
    new.down_proj = nn.Linear(width, H, bias=False)
    return new


def llama_heads(old: nn.Module, heads: int) -> nn.Module:
    """Returns a Llama attention with ``heads`` query heads (two key/value heads, the same
    head width)."""
    from transformers.models.llama.modeling_llama import LlamaAttention

    cfg = copy.deepcopy(old.config)
    cfg.num_attention_heads, cfg.head_dim = heads, old.head_dim
    return LlamaAttention(cfg, old.layer_idx)


# -- the models ---------------------------------------------------------------------------------
def gpt2() -> nn.Module:
    cfg = transformers.GPT2Config(
        vocab_size=40, n_positions=16, n_embd=H, n_layer=3, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


def llama() -> nn.Module:
    cfg = transformers.LlamaConfig(
        vocab_size=40, hidden_size=H, intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(cfg)


def gpt2_space(tie: bool = True) -> nf.MutatedSpace:
    ffn = nf.ModuleMutator("transformer.h.*.mlp", [64, 8], gpt2_ffn, label="ffn", tie=tie)
    heads = nf.ModuleMutator("transformer.h.*.attn", [4, 2], gpt2_heads, "heads", tie=True)
    layers = nf.ModuleMutator("transformer.h", [3, 2], factory=first_layers, label="layers")
    return nf.MutatedSpace(gpt2(), [ffn, heads, layers])


def llama_space(tie: bool = True) -> nf.MutatedSpace:
    ffn = nf.ModuleMutator("model.layers.*.mlp", [32, 8], llama_ffn, label="ffn", tie=tie)
    heads = nf.ModuleMutator("model.layers.*.self_attn", [4, 2], llama_heads, "heads", tie=True)
    layers = nf.ModuleMutator("model.layers", [3, 2], factory=first_layers, label="layers")
    return nf.MutatedSpace(llama(), [ffn, heads, layers])


# the frozen sizes each case asks for, and the config attributes that must hold them
CASES = {
    "gpt2": (
        gpt2_space,
        {"ffn": 8, "heads": 2, "layers/transformer.h": 2},
        {"n_inner": 8, "n_head": 2, "n_layer": 2},
    ),
    "llama": (
        llama_space,
        {"ffn": 8, "heads": 2, "layers/model.layers": 2},
        {"intermediate_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_searched_model_loads_back_with_from_pretrained(name: str, tmp_path: Path) -> None:
    """Frozen with a narrower FFN, fewer heads and fewer layers, the model saves a config.json
    of those sizes; AutoModelForCausalLM.from_pretrained rebuilds it with equal outputs."""
    make, arch, sizes = CASES[name]
    space = make()
    model = nf.freeze(space, arch).eval()
    assert {k: getattr(model.config, k) for k in sizes} == sizes
    base = space.base_model.config  # the base model's config is untouched
    assert all(getattr(base, k) != v for k, v in sizes.items())
    model.save_pretrained(tmp_path / "hf")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(loaded) is type(model)
    with torch.no_grad():
        want = model(input_ids=TOKENS, use_cache=False).logits
        got = loaded(input_ids=TOKENS, use_cache=False).logits
    torch.testing.assert_close(got, want)
    ids = loaded.generate(TOKENS[:1, :4], max_new_tokens=3, min_new_tokens=3, do_sample=False)
    assert ids.shape == (1, 7)


@pytest.mark.parametrize("name", list(CASES))
def test_per_layer_sizes_a_config_cannot_hold_are_named(name: str, caplog) -> None:
    """FFN widths chosen per layer differ across layers: the freeze warns, naming the config
    attribute and the fix, leaves the config as it was, and check_config refuses."""
    make, _, _ = CASES[name]
    space = make(tie=False)
    labels = [lb for lb in space.search_space() if lb.startswith("ffn/")]
    arch = {lb: d.values[0] for lb, d in zip(space.search_space(), space.search_space().decisions)}
    arch[labels[0]] = 8  # layer 0 narrower than the others
    attr = "n_inner" if name == "gpt2" else "intermediate_size"
    mutator_module._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="nasforge.space.mutator"):
        model = nf.freeze(space, arch)
    assert f"{attr} differs across layers (layer 0: 8, layer 1:" in caplog.text
    assert "tie=True" in caplog.text
    assert getattr(model.config, attr) == getattr(space.base_model.config, attr)
    with pytest.raises(SpaceError, match=f"cannot hold its sizes: {attr} differs"):
        check_config(model)


def test_an_unknown_family_with_resized_weights_is_named() -> None:
    """A family nasforge cannot map (BERT here) whose weights changed shape is reported, not
    silently saved with the base sizes; an unchanged one is fine."""
    cfg = transformers.BertConfig(
        vocab_size=40, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16,
    )  # fmt: skip
    base = transformers.BertModel(cfg)
    model = copy.deepcopy(base)
    assert sync_config(model, base) == {}
    model.encoder.layer[0].intermediate.dense = nn.Linear(H, 8)
    unmapped = sync_config(model, base)
    assert list(unmapped) == ["(weights)"]
    assert "encoder.layer.0.intermediate.dense" in unmapped["(weights)"]
    assert sync_config(nn.Linear(2, 2)) == {}  # not a Hugging Face model: nothing to do
