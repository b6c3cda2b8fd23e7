"""Moved to ``nasforge.oneshot.dartsformer.ops``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.oneshot.dartsformer.ops import (
    CONV_WIDTHS,
    DYN_WIDTHS,
    CrossAttn,
    DynConv,
    FFNOp,
    GLUOp,
    SelfAttn,
    StdConv,
    Wrapped,
    Zero,
    make_ops,
    op_names,
)

__all__ = [
    "CONV_WIDTHS",
    "DYN_WIDTHS",
    "CrossAttn",
    "DynConv",
    "FFNOp",
    "GLUOp",
    "SelfAttn",
    "StdConv",
    "Wrapped",
    "Zero",
    "make_ops",
    "op_names",
]

warnings.warn(
    "nasforge.spaces.seq2seq_ops moved to nasforge.oneshot.dartsformer.ops; import from there",
    DeprecationWarning,
    stacklevel=2,
)
