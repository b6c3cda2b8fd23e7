"""Moved to ``nasforge.run.export`` (one export layout and one loader for every kind). This module
re-exports its names for code written against nasforge 0.1 and warns: import them from
``nasforge.run.export``."""

import warnings

from nasforge.run.export import export_top, load_model

__all__ = ["export_top", "load_model"]

warnings.warn(
    "nasforge.engine.export moved to nasforge.run.export; import from there",
    DeprecationWarning,
    stacklevel=2,
)
