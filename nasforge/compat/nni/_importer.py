"""NNI model-space files run unchanged: their ``import nni`` lines get nasforge's NNI names.

:func:`load` imports a module written against NNI 3.0 (``from nni.nas.nn.pytorch import
ModelSpace, LayerChoice``, ``import nni``, ``nni.choice(...)``) as
``nasforge.compat.nni._from.<its name>``: its own source, run with an ``__import__`` of its own,
which gives it

    nni, nni.mutable*, nni.nas.nn*, nni.nas.space*   nasforge.compat.nni (the same names)
    nni.nas.hub.pytorch*                             NNI's own hub sources, loaded the same way
                                                     (they need NNI installed: its files)
    any other nni.* (nni.common, nni.nas.oneshot)    the installed NNI's module as it is, or
                                                     one line naming the import when NNI is
                                                     not installed
    a module of the user's whose source imports nni  loaded the same way
    everything else                                  the usual import

Nothing global changes: the real ``nni``, when installed, stays importable and untouched. The
loaded module's classes are nasforge spaces; their module path imports in any process (the
path finder here loads it again), so a run records them and resumes, exports and loads them.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError

__all__ = ["load", "install", "PREFIX"]

#: where loaded modules live: ``PREFIX + "mypkg.spaces"``
PREFIX = "nasforge.compat.nni._from."
_SHIM = "nasforge.compat.nni"
#: NNI's space language: served by nasforge's names
_SPACE = ("nni.mutable", "nni.nas.nn", "nni.nas.space")
#: packages above NNI's hub: empty here, so that NNI's own __init__ files never run
_HUB_PARENTS = ("nni", "nni.nas", "nni.nas.hub")
_INSTALLED = tuple(
    str(Path(p).resolve()) for k in ("purelib", "platlib", "stdlib", "platstdlib")
    if (p := sysconfig.get_paths().get(k))
)  # fmt: skip


def load(module: str) -> types.ModuleType:
    """Returns the module ``module`` (a dotted name on ``sys.path``, or a ``.py`` file path)
    loaded with nasforge's NNI names in place of NNI's (see the module's docstring).

    Raises:
        ConfigError: the module cannot be found, or it imports a part of NNI that nasforge
            does not provide while NNI is not installed (the message names the import).
    """
    path = Path(module)
    if module.endswith(".py"):
        if not path.is_file():
            raise ConfigError(f"{module}: no such file; give an NNI model-space file or module")
        folder = str(path.resolve().parent)
        if folder not in sys.path:  # the file's folder, as `python file.py` puts it first
            sys.path.insert(0, folder)
        module = path.stem
    install()
    return importlib.import_module(PREFIX + module)


def _origin(name: str) -> importlib.machinery.ModuleSpec | None:
    """Returns the spec of module ``name`` found without importing it (or its packages)."""
    parts = name.split(".")
    top = sys.modules.get(parts[0])
    spec = top.__spec__ if top is not None else importlib.machinery.PathFinder.find_spec(parts[0])
    for i in range(1, len(parts)):
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(
            ".".join(parts[: i + 1]), list(spec.submodule_search_locations)
        )
    return spec


@functools.cache
def _uses_nni(name: str) -> bool:
    """Returns whether ``name`` is a module of the user's (not installed) whose source imports
    nni."""
    spec = _origin(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    origin = str(Path(spec.origin).resolve())
    if origin.startswith(_INSTALLED):
        return False
    try:
        tree = ast.parse(Path(origin).read_text())
    except (OSError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "nni" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "nni":
                return True
    return False


def _nni_installed() -> bool:
    return "nni" in sys.modules or importlib.machinery.PathFinder.find_spec("nni") is not None


class _Node(types.ModuleType):
    """``nni`` and the packages between it and the names (``nni.nas``, ``nni.nas.nn``): each
    attribute is a child node, the shim, NNI's hub, or (for ``nni``) one of the shim's names."""

    def __init__(self, name: str, children: dict[str, str]) -> None:
        super().__init__(name)
        self._children = children

    def __getattr__(self, attr: str) -> Any:
        child = self._children.get(attr)
        if child is not None:
            return _resolve(child)
        if self.__name__ == "nni":
            shim = importlib.import_module(_SHIM)
            try:
                return getattr(shim, attr)
            except AttributeError:
                pass
        raise AttributeError(
            f"{self.__name__}.{attr}: nasforge's NNI adapter does not provide it (the space "
            "language of NNI 3.0 only)"
        )


_TREE = {
    "nni": {"mutable": "shim", "nas": "nni.nas"},
    "nni.nas": {"nn": "nni.nas.nn", "space": "shim", "hub": "hub:nni.nas.hub"},
    "nni.nas.nn": {"pytorch": "shim"},
}


@functools.cache
def _node(name: str) -> _Node:
    return _Node(name, _TREE[name])


def _resolve(target: str) -> Any:
    if target == "shim":
        return importlib.import_module(_SHIM)
    if target.startswith("hub:"):
        return importlib.import_module(PREFIX + target[4:])
    return _node(target)


def _nni_import(name: str, fromlist: Any) -> Any:
    """Returns what ``import name`` (or ``from name import ...``) gives a loaded module."""
    if name in _TREE:
        return _node(name if fromlist else "nni")
    if name.startswith(_SPACE):
        return importlib.import_module(_SHIM) if fromlist else _node("nni")
    if name.startswith("nni.nas.hub"):
        if not _nni_installed():
            raise ConfigError(
                f"`import {name}`: NNI's hub spaces are loaded from NNI's own files, and NNI is "
                "not installed: pip install nni==3.0 (nasforge's own hub is nasforge.hub)"
            )
        install()
        mod = importlib.import_module(PREFIX + name)
        return mod if fromlist else _node("nni")
    if not _nni_installed():
        raise ConfigError(
            f"NNI construct not mapped: `import {name}` (nasforge provides NNI 3.0's space "
            "language: nni.choice and the like, nni.mutable, nni.nas.nn.pytorch, "
            "nni.nas.space); install nni==3.0 for the rest, or remove the import"
        )
    real = builtins.__import__(name, None, None, fromlist, 0)
    return real if fromlist else _node("nni")


def _import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> Any:
    """The ``__import__`` of a loaded module (see the module's docstring)."""
    if level == 0:
        top = name.partition(".")[0]
        if top == "nni":
            return _nni_import(name, fromlist)
        if _uses_nni(name):
            install()
            mod = importlib.import_module(PREFIX + name)
            return mod if fromlist else importlib.import_module(PREFIX + top)
    return builtins.__import__(name, globals, locals, fromlist, level)


_BUILTINS = {**builtins.__dict__, "__import__": _import}


class _Loader(importlib.abc.Loader):
    """Runs a module's source with the loaded modules' ``__import__``."""

    def __init__(self, origin: str | None) -> None:
        self.origin = origin

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if self.origin is None:  # a package above NNI's hub: nothing to run
            return
        if module.__name__.startswith(PREFIX + "nni.") and self.origin.endswith("__init__.py"):
            _lazy_package(module, self.origin)  # a hub space loads alone, not every one
            return
        code = compile(Path(self.origin).read_text(), self.origin, "exec")
        module.__dict__["__builtins__"] = _BUILTINS
        module.__file__ = self.origin
        exec(code, module.__dict__)  # noqa: S102 - the user's own module, as `import` runs it


def _lazy_package(module: types.ModuleType, origin: str) -> None:
    """Gives a package of NNI's hub the names its ``__init__.py`` imports from its
    submodules (``from .nasbench201 import NasBench201``, ``from .x import *``), each
    submodule loaded when one of its names is first asked for."""
    named: dict[str, str] = {}
    starred: list[str] = []
    for node in ast.parse(Path(origin).read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                if alias.name == "*":
                    starred.append(node.module)
                else:
                    named[alias.asname or alias.name] = node.module

    def __getattr__(attr: str) -> Any:
        for sub in [named[attr]] if attr in named else starred:
            loaded = importlib.import_module(f"{module.__name__}.{sub}")
            if hasattr(loaded, attr):
                return getattr(loaded, attr)
        raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}")

    module.__dict__["__getattr__"] = __getattr__


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``PREFIX + name`` as the source of module ``name``."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PREFIX):
            return None
        name = fullname[len(PREFIX) :]
        if name in _HUB_PARENTS:
            spec = importlib.util.spec_from_loader(fullname, _Loader(None), is_package=True)
            assert spec is not None
            spec.submodule_search_locations = []
            return spec
        found = _origin(name)
        if found is None or not found.origin or not found.origin.endswith(".py"):
            raise ConfigError(
                f"{name}: no Python source found on sys.path (an NNI model-space module is "
                "loaded from its .py file)"
            )
        is_pkg = found.submodule_search_locations is not None
        spec = importlib.util.spec_from_loader(fullname, _Loader(found.origin), is_package=is_pkg)
        assert spec is not None
        spec.origin, spec.has_location = found.origin, True
        if is_pkg:
            assert found.submodule_search_locations is not None
            spec.submodule_search_locations = list(found.submodule_search_locations)
        return spec


_FINDER = _Finder()


def install() -> None:
    """Returns None once the finder of loaded modules is on ``sys.meta_path`` (first, once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
