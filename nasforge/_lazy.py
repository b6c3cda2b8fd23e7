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

This module imports only the standard library (and :mod:`nasforge._deprecated`, which
imports nothing else), so every package may use it.
"""

from __future__ import annotations

import importlib
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
        A name is imported once; a name outside ``exports`` is never imported.

    Raises:
        AttributeError: (from ``__getattr__``) a name outside ``exports`` that did not move
            either, as for any module.
    """
    package = namespace["__name__"]

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
