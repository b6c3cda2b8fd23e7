"""Moved to ``nasforge.oneshot.dartsformer.runner``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.oneshot.dartsformer.runner import *  # noqa: F403 - every public name, as it was here
from nasforge.oneshot.dartsformer.runner import __all__  # noqa: F401

warnings.warn(
    "nasforge.spaces.seq2seq_runner moved to nasforge.oneshot.dartsformer.runner; "
    "import from there",
    DeprecationWarning,
    stacklevel=2,
)
