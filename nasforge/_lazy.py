"""Lazy names for a package's ``__init__`` (PEP 562): a name is imported from its module the
first time it is used, so that importing the package imports nothing else.

A package spells out its table and its ``__all__``, then takes the pair this module returns::

    _EXPORTS = {"SearchSpace": "nasforge.space.search_space"}
    __all__ = ["SearchSpace"]
    __getattr__, __dir__ = lazy_names(globals(), _EXPORTS, __all__)

The module paths are literal strings in the table (nothing builds an import path at run
time); the package's ``if TYPE_CHECKING:`` imports show the same names to type checkers. A
name that moved out of the package (:data:`nasforge._deprecated.MOVED`, ``"package:Name"``)
is served from its new home with a DeprecationWarning.

A lazy name may be a submodule's name too (``nasforge.oneshot.search`` is the function, and
``oneshot/search.py`` its module): the import system binds a submodule to its package when
it loads it, which would hide the lazy name, so the package keeps the lazy name instead, as
an eager ``from .search import search`` in its ``__init__`` did.

This module imports only the standard library (and :mod:`nasforge._deprecated`, which
imports nothing else), so every package may use it.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nasforge._deprecated import moved_attribute

__all__ = ["Target", "lazy_names"]

#: where a lazy name comes from: a module path (the attribute of the same name), or a pair
#: (module path, attribute), whose attribute None means the module itself
Target = str | tuple[str, str | None]


def lazy_names(
    namespace: dict[str, Any], exports: Mapping[str, Target], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Returns the package's ``(__getattr__, __dir__)``: ``__getattr__`` imports a name of
    ``exports`` from its module on first use and keeps it in ``namespace`` (the package's
    ``globals()``), so later uses are plain lookups; ``__dir__`` lists ``names`` (the
    package's ``__all__``), as autocompletion expects.

    Invariants:
        A name is imported once; a name outside ``exports`` is never imported; a lazy name
        stays the package's attribute after a submodule of the same name is imported.

    Raises:
        AttributeError: (from ``__getattr__``) a name outside ``exports`` that did not move
            either, as for any module.
    """
    package = namespace["__name__"]
    _keep_lazy_names(package, exports)

    def __getattr__(name: str) -> Any:
        """Returns the lazy name ``name``, imported now (Python calls this only for names not
        yet in the package), or a name that moved out of the package, with a warning."""
        target = exports.get(name)
        if target is None:
            return moved_attribute(package, name)
        module, attr = _split(name, target)
        loaded = importlib.import_module(module)
        value = loaded if attr is None else getattr(loaded, attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        """Returns the package's public names."""
        return list(names)

    return __getattr__, __dir__


def _split(name: str, target: Target) -> tuple[str, str | None]:
    """Returns ``(module, attribute)`` of the lazy name ``name`` (attribute None: the module)."""
    return (target, name) if isinstance(target, str) else target


def _keep_lazy_names(package: str, exports: Mapping[str, Target]) -> None:
    """Makes the module ``package`` ignore the import system binding a submodule over one of
    its lazy names (see the module docstring); other attributes are set as usual."""

    def shadows(name: str, value: object) -> bool:
        """Returns whether setting ``name`` to ``value`` binds a submodule over a lazy name
        that is not that module."""
        return (
            name in exports
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{package}.{name}"
            and _split(name, exports[name]) != (value.__name__, None)
        )

    class LazyPackage(types.ModuleType):
        """A package whose lazy names win over its submodules of the same name."""

        def __setattr__(self, name: str, value: object) -> None:
            if not shadows(name, value):
                super().__setattr__(name, value)

        def __reduce__(self) -> tuple[object, tuple[str]]:
            # pickled by name, as any module is (cloudpickle, which Ray uses, looks modules
            # up by their exact type and would otherwise try to copy this one)
            return importlib.import_module, (self.__name__,)

    module = sys.modules.get(package)
    if module is not None and type(module) is types.ModuleType:
        module.__class__ = LazyPackage
