"""Real datasets that need no download, with deterministic splits and loaders."""

from nasforge.data.mnist import mnist_tensors
from nasforge.data.splits import Splits, load_digits, split_dataset, to_tensors
from nasforge.data.text import tinyshakespeare
from nasforge.data.translation import Bpe, Pairs, bleu, load_pairs, split_pairs, token_batches

__all__ = [
    "Bpe",
    "Pairs",
    "Splits",
    "bleu",
    "load_digits",
    "load_pairs",
    "mnist_tensors",
    "split_dataset",
    "split_pairs",
    "tinyshakespeare",
    "to_tensors",
    "token_batches",
]
