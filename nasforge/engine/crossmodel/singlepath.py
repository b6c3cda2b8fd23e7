"""Moved to :mod:`nasforge.weightsharing` (``SinglePath``: the one single-path supernet, shared
by the engine's weight-sharing trials and SPOS). This module re-exports it for code written
against nasforge 0.2 and warns: import it from ``nasforge.weightsharing``."""

import warnings

from nasforge.weightsharing import SinglePath

__all__ = ["SinglePath"]

warnings.warn(
    "nasforge.engine.crossmodel.singlepath moved to nasforge.weightsharing (SinglePath); import "
    "from there",
    DeprecationWarning,
    stacklevel=2,
)
