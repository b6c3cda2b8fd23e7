"""The packages' lazy names (nasforge/_lazy.py): loaded on first use, once, and only those;
and what they are for: the pure modules import with torch blocked."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import nasforge
from nasforge._lazy import lazy_names

ROOT = Path(nasforge.__file__).resolve().parents[1]
#: every module docs/architecture.md calls pure ("Pure parts import no torch"), as it names
#: them: a file, or a folder (all its modules)
PURE = (
    "space/search_space.py", "space/ranges.py", "space/expr.py", "space/edits.py", "strategy/",
    "partition.py", "parallel/csp.py", "parallel/cache.py", "parallel/simulator.py",
    "oneshot/cmp_schedule.py", "oneshot/budget.py", "engine/crossmodel/policy.py", "ofa/spaces.py",
    "engine/replay.py",
    "ofa/latency.py",
    "ofa/evolution.py", "spaces/cell_canon.py", "spaces/wann_edits.py", "spaces/path_edits.py",
    "strategy/stopping.py", "strategy/halving.py", "run/store.py", "run/_schema.py",
    "run/_rows.py", "run/results.py", "run/runner.py", "run/files.py", "run/status.py",
    "run/preflight.py", "runtime/devices.py", "run/agreement.py", "run/shortlist.py",
)  # fmt: skip
#: a process in which torch cannot be imported, that imports each module given and prints
#: those that failed, with the error
BLOCKED = """
import importlib, importlib.abc, sys

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked")

sys.meta_path.insert(0, NoTorch())
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        print(name, repr(exc))
print("torch" in sys.modules)
"""


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


def test_a_lazy_name_stays_when_its_namesake_submodule_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package whose lazy name ``run`` is the function of its submodule ``run`` keeps the
    function after ``import pkg.run`` (as ``nasforge.oneshot.search`` stays the function when
    a runner imports the module); its other submodules bind as usual."""
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from nasforge._lazy import lazy_names\n"
        "__getattr__, __dir__ = lazy_names(globals(), {'run': 'lazypkg.run'}, ['run'])\n"
    )
    (pkg / "run.py").write_text("def run():\n    return 'ran'\n")
    (pkg / "other.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("lazypkg", "lazypkg.run", "lazypkg.other"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import lazypkg.other
    import lazypkg.run  # noqa: F401 - the import binds the module to the package, or would

    assert lazypkg.run() == "ran" and isinstance(lazypkg.other, types.ModuleType)


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


def _pure_in_the_doc() -> set[str]:
    """Returns the paths docs/architecture.md lists in its "Pure parts import no torch"
    sentence (up to its first full stop)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("**Pure parts import no torch**")
    sentence = re.split(r"\.\s", text[start:], maxsplit=1)[0]
    return {p for p in re.findall(r"`([^`]+)`", sentence) if p.endswith((".py", "/"))}


def test_the_pure_modules_are_those_the_architecture_names() -> None:
    """The list below is the one docs/architecture.md gives, no more and no fewer."""
    assert _pure_in_the_doc() == set(PURE)


def test_the_pure_modules_import_with_torch_blocked() -> None:
    """Every pure module imports in a process where importing torch raises (its package's
    ``__init__`` included): none imports torch, even through a package face."""
    pkg = ROOT / "nasforge"
    files = [f for p in PURE for f in ((pkg / p).glob("*.py") if p.endswith("/") else [pkg / p])]
    names = [
        ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for f in files
    ]
    out = subprocess.run(
        [sys.executable, "-c", BLOCKED, *names], capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:-1] == ["False"], out.stdout
