"""Moved to ``nasforge.oneshot.runner`` (a one-shot search is a run like every other). This module
re-exports its names for code written against nasforge 0.1 and warns: import them from
``nasforge.oneshot.runner``."""

import warnings

from nasforge.oneshot.runner import OneShot, OneShotExperiment, OneShotSearch, load_data

__all__ = ["OneShot", "OneShotExperiment", "OneShotSearch", "load_data"]

warnings.warn(
    "nasforge.oneshot.experiment moved to nasforge.oneshot.runner; import from there",
    DeprecationWarning,
    stacklevel=2,
)
