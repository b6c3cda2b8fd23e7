"""Example model spaces shipped with nasforge, and the same networks written by hand."""

from nasforge._deprecated import module_getattr
from nasforge.spaces.cnn import DigitsBase, DigitsCNN, digits_mutated_space
from nasforge.spaces.darts_cell import (
    DartsCellSpace,
    arch_to_genotype,
    digits_cell_space,
    genotype_to_arch,
)

#: Seq2SeqSpace, TransformerSeq2Seq and space_size moved to nasforge.oneshot.dartsformer.space;
#: the old names warn (nasforge._deprecated.MOVED)
__getattr__ = module_getattr(__name__)

__all__ = [
    "DartsCellSpace",
    "DigitsBase",
    "DigitsCNN",
    "arch_to_genotype",
    "digits_cell_space",
    "digits_mutated_space",
    "genotype_to_arch",
]
