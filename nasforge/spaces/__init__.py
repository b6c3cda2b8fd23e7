"""Example model spaces shipped with nasforge, and the same networks written by hand.

Importing this package imports nothing else (but :mod:`nasforge._lazy`): its names load from
their modules when first used, so the pure modules (:mod:`~nasforge.spaces.cell_canon`,
:mod:`~nasforge.spaces.wann_edits`, :mod:`~nasforge.spaces.path_edits`) import without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasforge._lazy import Target, lazy_names

#: name -> the module that defines it (loaded on first use)
_EXPORTS: dict[str, Target] = {
    "DigitsBase": "nasforge.spaces.cnn",
    "DigitsCNN": "nasforge.spaces.cnn",
    "digits_mutated_space": "nasforge.spaces.cnn",
    "DartsCellSpace": "nasforge.spaces.darts_cell",
    "arch_to_genotype": "nasforge.spaces.darts_cell",
    "digits_cell_space": "nasforge.spaces.darts_cell",
    "genotype_to_arch": "nasforge.spaces.darts_cell",
}

__all__ = [
    "DartsCellSpace",
    "DigitsBase",
    "DigitsCNN",
    "arch_to_genotype",
    "digits_cell_space",
    "digits_mutated_space",
    "genotype_to_arch",
]

__getattr__, __dir__ = lazy_names(globals(), _EXPORTS, __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nasforge.spaces.cnn import DigitsBase, DigitsCNN, digits_mutated_space
    from nasforge.spaces.darts_cell import (
        DartsCellSpace,
        arch_to_genotype,
        digits_cell_space,
        genotype_to_arch,
    )
