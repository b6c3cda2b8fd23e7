"""Multi-trial search over a small Hugging Face GPT-2, unmodified, on tinyshakespeare characters.

Run:  python examples/gpt_shakespeare.py [--data PATH] [--trials 12] [--steps 300]
                                         [--out runs/gpt_shakespeare]

The base model is ``GPT2LMHeadModel(GPT2Config(...))`` built from its config (no weights, no
hub). Module-level mutators make it a space without touching its code: the feed-forward width
of each layer (``n_inner``), the attention heads of each layer, and the activation (one choice
for all layers). Each trial trains a frozen architecture ``--steps`` steps on character-level
tinyshakespeare and reports its validation loss; the engine's process pool runs two trials at
a time. The best architecture is exported, loaded back with ``nasforge.load_model`` — still a
``GPT2LMHeadModel`` — and generates a few lines. The last line printed is JSON. About 3-6
minutes on 2 cores with the defaults.

``--data`` defaults to the first 200,000 characters of tinyshakespeare, which nasforge ships
(``nasforge.data.tinyshakespeare()``); pass the full file's path for all 1.1 M characters. A
path that is not a file is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

import nasforge as nf
from nasforge.data import tinyshakespeare
from nasforge.engine import Experiment
from nasforge.run.export import export_top, load_model
from nasforge.strategy import RegularizedEvolution

torch.set_num_threads(1)  # one thread per trial: the pool runs two trials on two cores
#: the tinyshakespeare subset the package ships (its first 200,000 characters)
DEFAULT_DATA = tinyshakespeare()
BLOCK = 64  # context length in characters


# -- the space: an unmodified transformers model plus module-level mutators --------------------
def ffn_width(old: nn.Module, width: int) -> nn.Module:
    """Returns a copy of a GPT-2 MLP with ``width`` hidden units (what ``n_inner`` sets)."""
    from transformers.pytorch_utils import Conv1D

    new = copy.deepcopy(old)
    d = old.c_fc.weight.shape[0]
    new.c_fc, new.c_proj = Conv1D(width, d), Conv1D(d, width)
    return new


def attention_heads(old: nn.Module, heads: int) -> nn.Module:
    """Returns a copy of a GPT-2 attention that splits its width into ``heads`` heads."""
    new = copy.deepcopy(old)
    new.num_heads, new.head_dim = heads, old.embed_dim // heads
    new.scaling = new.head_dim**-0.5 if old.scale_attn_weights else 1.0
    if old.scale_attn_by_inverse_layer_idx:
        new.scaling /= float(old.layer_idx + 1)
    return new


class GPTSpace(nf.MutatedSpace):
    """Returns the space of a tiny GPT-2: per-layer FFN width and heads, one activation."""

    def __init__(
        self,
        vocab_size: int = 65,
        n_embd: int = 64,
        n_layer: int = 2,
        widths: tuple[int, ...] = (64, 128, 256),
        heads: tuple[int, ...] = (2, 4, 8),
    ) -> None:
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(
            vocab_size=vocab_size, n_positions=BLOCK, n_embd=n_embd, n_layer=n_layer, n_head=2,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=None,
        )  # fmt: skip
        acts = {"gelu": None, "relu": nn.ReLU(), "silu": nn.SiLU()}  # None keeps GPT-2's own
        mutators = [
            nf.ModuleMutator("transformer.h.*.mlp", list(widths), factory=ffn_width, label="ffn"),
            nf.ModuleMutator(
                "transformer.h.*.attn", list(heads), factory=attention_heads, label="heads"
            ),
            nf.ModuleMutator("transformer.h.*.mlp.act", acts, label="act", tie=True),
        ]
        super().__init__(GPT2LMHeadModel(cfg), mutators)


# -- the evaluator: train a few hundred steps, report the validation loss ----------------------
class CharLM:
    """Returns ``{"val_loss", "params"}`` of a model trained ``steps`` steps on the characters
    of ``path`` (90% train, 10% validation); rebuilt by reference on ``nasforge resume``."""

    def __init__(self, path: str, steps: int = 300, batch: int = 16, lr: float = 3e-3) -> None:
        self.path, self.steps, self.batch, self.lr = path, steps, batch, lr
        self._data: tuple[torch.Tensor, torch.Tensor, list[str]] | None = None

    def init_args(self) -> tuple[list[Any], dict[str, Any]]:
        return [self.path], {"steps": self.steps, "batch": self.batch, "lr": self.lr}

    def data(self) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """Returns (train ids, validation ids, vocabulary); read once (forked workers share)."""
        if self._data is None:
            text = Path(self.path).read_text()
            vocab = sorted(set(text))
            index = {c: i for i, c in enumerate(vocab)}
            ids = torch.tensor([index[c] for c in text], dtype=torch.long)
            n = int(0.9 * len(ids))
            self._data = ids[:n], ids[n:], vocab
        return self._data

    def batches(self, ids: torch.Tensor, n: int, seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, len(ids) - BLOCK - 1, (n, self.batch), generator=g)
        return torch.stack([torch.stack([ids[s : s + BLOCK + 1] for s in row]) for row in start])

    def __call__(self, model: nn.Module, report: Any) -> dict[str, float]:
        torch.manual_seed(0)
        train, val, _ = self.data()
        opt = torch.optim.AdamW(model.parameters(), lr=self.lr)
        model.train()
        for step, xy in enumerate(self.batches(train, self.steps, seed=1)):
            loss = model(input_ids=xy[:, :-1], labels=xy[:, :-1], use_cache=False).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if (step + 1) % 100 == 0:
                report(-float(loss.detach()))
        model.eval()
        with torch.no_grad():
            losses = [
                float(model(input_ids=xy[:, :-1], labels=xy[:, :-1], use_cache=False).loss)
                for xy in self.batches(val, 8, seed=2)
            ]
        params = sum(p.numel() for p in model.parameters())
        return {"val_loss": sum(losses) / len(losses), "params": float(params)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("runs/gpt_shakespeare"))
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"tinyshakespeare not found at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    evaluator = CharLM(str(args.data.resolve()), steps=args.steps)
    _, _, vocab = evaluator.data()  # read before the pool forks: workers inherit it
    space = GPTSpace(vocab_size=len(vocab))
    ss = space.search_space()
    logging.info("space: %d decisions, %d architectures", len(ss), ss.size)
    start = time.perf_counter()
    exp = Experiment(
        space, evaluator, RegularizedEvolution(population_size=6, sample_size=3, seed=0),
        metric="val_loss", mode="min", n_trials=args.trials, executor="pool", concurrency=2,
        directory=args.out, progress="off",
    )  # fmt: skip
    exp.run()
    seconds = time.perf_counter() - start
    (folder,) = export_top(args.out, k=1)
    model = load_model(folder)  # the space is rebuilt from the export's reference
    assert type(model).__name__ == "GPT2LMHeadModel", type(model)
    prompt = torch.tensor([[vocab.index(c) for c in "ROMEO:\n"]])
    torch.manual_seed(0)
    out = model.generate(prompt, max_new_tokens=BLOCK - prompt.shape[1], do_sample=True, top_k=10)
    print("".join(vocab[i] for i in out[0].tolist()))
    best = json.loads((folder / "arch.json").read_text())
    val = best["metrics"]["val_loss"]
    print(json.dumps({
        "best_arch": best["arch"], "val_loss": round(val, 4), "val_ppl": round(math.exp(val), 3),
        "trials": args.trials, "search_s": round(seconds, 1), "export": str(folder),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
