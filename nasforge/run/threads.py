"""Moved to ``nasforge.runtime.threads``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.runtime.threads import *  # noqa: F403 - every public name, as it was here
from nasforge.runtime.threads import __all__  # noqa: F401

warnings.warn(
    "nasforge.run.threads moved to nasforge.runtime.threads; import from there",
    DeprecationWarning,
    stacklevel=2,
)
