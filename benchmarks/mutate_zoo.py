"""Cost of making third-party models into spaces: building the space and freezing one
architecture, against building the model itself from its config.

Models (transformers and efficientnet_pytorch, built from configs, no weights): BERT-small
(4 layers, width 512), GPT-2 (6 layers, width 384), ViT-tiny (12 layers, width 192, 224 px)
and EfficientNet-B0. Each space has module-level mutators only (per-layer FFN width and one
tied activation; for EfficientNet one tied activation and the head width), so nothing is
traced. ``space_s`` is ``MutatedSpace(base, mutators)`` given an already built base model;
``freeze_s`` is ``nf.freeze(space, arch)`` of a sampled architecture; ``build_s`` is building the
base model from its config. Each is the median of ``--repeats`` runs, one thread.

With ``--graph``, also a space with the same mutators plus one graph mutator (an insertion after
the final norm), timed once: ``graph_capture`` (fx or export), ``graph_space_s``,
``graph_freeze_s`` (an exported model is captured again at every freeze, as module-level
choices change its graph).

Target (issue 26): space_s and freeze_s <= 2 x build_s (module-level spaces).
Last line: {"models": {name: {"space_s", "freeze_s", "build_s", ...}}}
``--quick`` (the slow test set's smoke run): BERT-small alone, one repeat, with ``--graph``.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nasforge as nf  # noqa: E402
from nasforge.space.module_mutator import MutableModel  # noqa: E402

ACTS = {"keep": None, "relu": nn.ReLU(), "silu": nn.SiLU()}


def _linear_ffn(up: str, down: str) -> Callable[[nn.Module, int], nn.Module]:
    """Returns a factory that copies a block and resizes its two FFN linears to ``width``."""

    def factory(old: nn.Module, width: int) -> nn.Module:
        new = copy.deepcopy(old)
        a, b, edit = new.get_submodule(up), new.get_submodule(down), MutableModel(new)
        edit.replace(up, nn.Linear(a.in_features, width))
        edit.replace(down, nn.Linear(width, b.out_features))
        return new

    return factory


def gpt2_ffn(old: nn.Module, width: int) -> nn.Module:
    from transformers.pytorch_utils import Conv1D

    new = copy.deepcopy(old)
    d = old.c_fc.weight.shape[0]
    new.c_fc, new.c_proj = Conv1D(width, d), Conv1D(d, width)
    return new


def effnet_head(old: nn.Module, width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(old.in_features, width), nn.ReLU(), nn.Linear(width, 10))


def models() -> dict[str, tuple[Callable[[], nn.Module], Callable[[], list[Any]]]]:
    """Returns name -> (build the model from its config, its module-level mutators)."""
    import transformers as tf
    from efficientnet_pytorch import EfficientNet

    bert_cfg = tf.BertConfig(
        hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048
    )
    gpt_cfg = tf.GPT2Config(n_embd=384, n_layer=6, n_head=6)
    vit_cfg = tf.ViTConfig(
        hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768
    )
    return {
        "bert": (
            lambda: tf.BertForSequenceClassification(bert_cfg),
            lambda: [
                nf.ModuleMutator(
                    "bert.encoder.layer.*", [512, 1024, 2048],
                    factory=_linear_ffn("intermediate.dense", "output.dense"),
                ),
                nf.ModuleMutator("*.intermediate_act_fn", ACTS, tie=True, label="act"),
            ],
        ),
        "gpt2": (
            lambda: tf.GPT2LMHeadModel(gpt_cfg),
            lambda: [
                nf.ModuleMutator("transformer.h.*.mlp", [384, 768, 1536], factory=gpt2_ffn),
                nf.ModuleMutator("transformer.h.*.mlp.act", ACTS, tie=True, label="act"),
            ],
        ),
        "vit": (
            lambda: tf.ViTForImageClassification(vit_cfg),
            lambda: [
                nf.ModuleMutator(
                    "vit.layers.*.mlp", [384, 768], factory=_linear_ffn("fc1", "fc2")
                ),
                nf.ModuleMutator("*.activation_fn", ACTS, tie=True, label="act"),
            ],
        ),
        "effnet": (
            lambda: EfficientNet.from_name("efficientnet-b0", num_classes=10),
            lambda: [
                nf.ModuleMutator("_blocks.*._swish", ACTS, tie=True, label="act"),
                nf.ModuleMutator("_fc", [128, 256], factory=effnet_head),
            ],
        ),
    }  # fmt: skip


def graph_parts() -> dict[str, tuple[str, Any]]:
    """Returns name -> (the module after which a graph mutator inserts, example inputs)."""
    ids = torch.randint(0, 100, (1, 16))
    return {
        "bert": ("bert.pooler.activation", {"input_ids": ids}),
        "gpt2": ("transformer.ln_f", {"input_ids": ids, "use_cache": False}),
        "vit": ("vit.layernorm", {"pixel_values": torch.randn(1, 3, 224, 224)}),
        "effnet": ("_bn1", None),  # torch.fx traces it
    }


def _time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="model names to run")
    parser.add_argument(
        "--graph", action="store_true", help="also time a space with one graph mutator (once)"
    )
    parser.add_argument("--quick", action="store_true", help="bert only, one repeat, --graph")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.only, args.graph = 1, ["bert"], True
    torch.set_num_threads(1)
    torch.manual_seed(0)
    result: dict[str, dict[str, float]] = {}
    for name, (build, mutators) in models().items():
        if args.only and name not in args.only:
            continue
        build_s, base = _time(build, args.repeats)
        space_s, space = _time(lambda b=base, m=mutators: nf.MutatedSpace(b, m()), args.repeats)
        arch = space.search_space().sample(0)
        freeze_s, model = _time(lambda s=space, a=arch: nf.freeze(s, a), args.repeats)
        assert type(model) is type(base)
        row = {
            "space_s": round(space_s, 4),
            "freeze_s": round(freeze_s, 4),
            "build_s": round(build_s, 4),
            "space_ratio": round(space_s / build_s, 2),
            "freeze_ratio": round(freeze_s / build_s, 2),
            "n_decisions": len(space.search_space()),
            "params_m": round(sum(p.numel() for p in base.parameters()) / 1e6, 2),
        }
        if args.graph:
            where, example = graph_parts()[name]
            extra = nf.InsertMutator(where, {"none": None, "id": nn.Identity})
            g_s, g_space = _time(
                lambda b=base, m=mutators, e=extra, x=example: nf.MutatedSpace(
                    b, [*m(), e], example_inputs=x
                ),
                1,
            )
            g_arch = g_space.search_space().sample(0)
            g_f, _ = _time(lambda s=g_space, a=g_arch: nf.freeze(s, a), 1)
            row.update(graph_capture=g_space.capture, graph_space_s=round(g_s, 3))
            row.update(graph_freeze_s=round(g_f, 3))
        result[name] = row
        print(f"{name:8s} {row}", flush=True)
    print(json.dumps({"models": result}))


if __name__ == "__main__":
    main()
