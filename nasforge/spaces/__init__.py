"""Example model spaces shipped with nasforge, and the same networks written by hand."""

from typing import Any

from nasforge.spaces.cnn import DigitsBase, DigitsCNN, digits_mutated_space
from nasforge.spaces.darts_cell import (
    DartsCellSpace,
    arch_to_genotype,
    digits_cell_space,
    genotype_to_arch,
)

_LAZY = {"Seq2SeqSpace", "TransformerSeq2Seq", "space_size"}  # imported on first use


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from nasforge.spaces import seq2seq

        return getattr(seq2seq, name)
    raise AttributeError(f"module 'nasforge.spaces' has no attribute {name!r}")


__all__ = [
    "DartsCellSpace",
    "DigitsBase",
    "DigitsCNN",
    "Seq2SeqSpace",
    "TransformerSeq2Seq",
    "arch_to_genotype",
    "digits_cell_space",
    "digits_mutated_space",
    "genotype_to_arch",
    "space_size",
]
