"""The packages' lazy names (nasforge/_lazy.py): loaded on first use, once, and only those."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest

from nasforge._lazy import lazy_names


def _package() -> tuple[dict[str, Any], Any, Any]:
    """Returns a package namespace with two lazy names and its (__getattr__, __dir__)."""
    namespace: dict[str, Any] = {"__name__": "pkg"}
    exports = {"dedent": "textwrap", "jdumps": ("json", "dumps"), "stat": ("stat", None)}
    getattr_, dir_ = lazy_names(namespace, exports, ["dedent", "jdumps", "stat"])
    return namespace, getattr_, dir_


def test_a_name_loads_from_its_module_and_is_kept() -> None:
    """A name comes from its module (under its own name or the one given, or the module
    itself) and stays in the namespace, so the next use is a plain lookup."""
    import json
    import stat
    import textwrap

    namespace, getattr_, _ = _package()
    assert getattr_("dedent") is textwrap.dedent
    assert getattr_("jdumps") is json.dumps
    assert getattr_("stat") is stat
    assert namespace["dedent"] is textwrap.dedent and namespace["jdumps"] is json.dumps


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    """A name outside the table raises AttributeError, as any module does (hasattr works)."""
    _, getattr_, _ = _package()
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'nope'"):
        getattr_("nope")


def test_dir_lists_the_exported_names() -> None:
    """``dir()`` of a module using the pair lists its ``__all__`` (autocompletion)."""
    module = types.ModuleType("pkg")
    _, module.__getattr__, module.__dir__ = _package()  # type: ignore[method-assign]
    assert dir(module) == ["dedent", "jdumps", "stat"]
    assert module.jdumps([1]) == "[1]"


def test_importing_nasforge_imports_only_its_version_and_the_loader() -> None:
    """``import nasforge`` stays light: no torch, no subpackage but the loader and version."""
    code = (
        "import sys, nasforge\n"
        "print(*sorted(m for m in sys.modules if m.startswith('nasforge')), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == [
        "nasforge", "nasforge._deprecated", "nasforge._lazy", "nasforge._version", "False"
    ], out  # fmt: skip
