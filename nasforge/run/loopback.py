"""Moved to ``nasforge.runtime.loopback``.

This module re-exports its names for code and run records written against nasforge 0.2, and
warns: import them from the new module. It goes in the next release.
"""

import warnings

from nasforge.runtime.loopback import loopback_interface, pin_to_loopback

__all__ = ["loopback_interface", "pin_to_loopback"]

warnings.warn(
    "nasforge.run.loopback moved to nasforge.runtime.loopback; import from there",
    DeprecationWarning,
    stacklevel=2,
)
