"""Moved to ``nasforge.runtime.weights``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.runtime.weights import *  # noqa: F403 - every public name, as it was here
from nasforge.runtime.weights import __all__  # noqa: F401

warnings.warn(
    "nasforge.run.weights moved to nasforge.runtime.weights; import from there",
    DeprecationWarning,
    stacklevel=2,
)
