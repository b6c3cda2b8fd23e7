"""Moved to ``nasforge.runtime.weights``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.runtime.weights import KEPT_NOTE, load_weights, not_kept, save_state, save_weights

__all__ = ["save_state", "save_weights", "load_weights", "KEPT_NOTE", "not_kept"]

warnings.warn(
    "nasforge.run.weights moved to nasforge.runtime.weights; import from there",
    DeprecationWarning,
    stacklevel=2,
)
