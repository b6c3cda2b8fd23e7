"""Modules that moved keep working for 0.1 code, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = {
    "nasforge.engine.store": ("nasforge.run.store", "Store"),
    "nasforge.engine.results": ("nasforge.run.results", "rank_trials"),
    "nasforge.engine.export": ("nasforge.run.export", "load_model"),
    "nasforge.engine.progress": ("nasforge.run.progress", "Progress"),
    "nasforge.oneshot.experiment": ("nasforge.oneshot.runner", "OneShotExperiment"),
    "nasforge.engine.crossmodel.singlepath": ("nasforge.weightsharing", "SinglePath"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_module_warns_and_reexports(old: str) -> None:
    """Importing the old path warns with the new path and gives the same objects."""
    new, name = MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
