"""Moved to ``nasforge.run.progress`` (live progress of any run). This module re-exports its names
for code written against nasforge 0.1 and warns: import them from ``nasforge.run.progress``."""

import warnings

from nasforge.run.progress import Progress, fmt_time

__all__ = ["Progress", "fmt_time"]

warnings.warn(
    "nasforge.engine.progress moved to nasforge.run.progress; import from there",
    DeprecationWarning,
    stacklevel=2,
)
