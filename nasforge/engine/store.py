"""Moved to ``nasforge.run.store`` (the run record every kind of search writes). This module re-
exports its names for code written against nasforge 0.1 and warns: import them from
``nasforge.run.store``."""

import warnings

from nasforge.run.store import DB_NAME, Store, TrialRecord

__all__ = ["DB_NAME", "Store", "TrialRecord"]

warnings.warn(
    "nasforge.engine.store moved to nasforge.run.store; import from there",
    DeprecationWarning,
    stacklevel=2,
)
