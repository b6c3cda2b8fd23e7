"""Translate with a model exported from a ``dartsformer`` run: the export folder holds the
model (``nasforge.run.load_model``) and a copy of the tokenizer it was trained with.

Run:  python examples/dartsformer_translate.py EXPORT_FOLDER "A sentence ." ...

Prints one translation per sentence (greedy decoding).
"""

from __future__ import annotations

import sys

import torch

from nasforge.data.translation import PAD
from nasforge.oneshot.dartsformer.runner import load_tokenizer
from nasforge.oneshot.dartsformer.train import greedy_decode
from nasforge.run import load_model

__all__ = ["translate"]


def translate(export: str, sentences: list[str]) -> list[str]:
    """Returns the greedy translation of each sentence by the exported model."""
    model, bpe = load_model(export), load_tokenizer(export)
    ids = bpe.encode(sentences)
    src = torch.full((len(ids), max(map(len, ids))), PAD, dtype=torch.long)
    for i, row in enumerate(ids):
        src[i, : len(row)] = torch.tensor(row)
    return bpe.decode(greedy_decode(model, src))


if __name__ == "__main__":
    torch.set_num_threads(1)
    for line in translate(sys.argv[1], sys.argv[2:]):
        sys.stdout.write(line + "\n")
