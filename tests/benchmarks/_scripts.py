"""The benchmark scripts as modules, for their tests: ``benchmarks/`` is no package, so a script
is loaded from its file, with the folder on the import path for its own helpers."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["BENCH", "load"]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """Returns ``benchmarks/<name>.py`` loaded as a module."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
