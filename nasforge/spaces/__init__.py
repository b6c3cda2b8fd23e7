"""Example model spaces shipped with nasforge, and the same networks written by hand."""

from typing import Any

from nasforge.spaces.cnn import DigitsBase, DigitsCNN, digits_mutated_space
from nasforge.spaces.darts_cell import (
    DartsCellSpace,
    arch_to_genotype,
    digits_cell_space,
    genotype_to_arch,
)

#: moved to nasforge.oneshot.dartsformer.space; reached through the deprecated module
#: nasforge.spaces.seq2seq (which warns) until the next release
_MOVED = {"Seq2SeqSpace", "TransformerSeq2Seq", "space_size"}


def __getattr__(name: str) -> Any:
    """Returns a name that moved out of the example spaces (with a DeprecationWarning).

    Raises:
        AttributeError: no such name.
    """
    if name in _MOVED:
        from nasforge.spaces import seq2seq

        return getattr(seq2seq, name)
    raise AttributeError(f"module 'nasforge.spaces' has no attribute {name!r}")


__all__ = [
    "DartsCellSpace",
    "DigitsBase",
    "DigitsCNN",
    "arch_to_genotype",
    "digits_cell_space",
    "digits_mutated_space",
    "genotype_to_arch",
]
