"""The deprecation table: every public path that moved, where it lives now, and the release
that removes the old path (timm's deprecation map, Optuna's ``removed_version``).

One table serves every way in. :func:`install` (called by ``import nasforge``) puts a finder
on ``sys.meta_path`` that makes ``import nasforge.run.threads`` warn and give the module at its
new home; a package's lazy names (:mod:`nasforge._lazy`) and a module's ``__getattr__``
(:func:`module_getattr`) serve a moved name the same way; and the run record's reference
resolver (:mod:`nasforge.run.refs`) reads a stored ``"module:name"`` through :func:`redirect`,
so a record written before a move still resumes and exports. Nothing is a file at an old path.

A path is ``"pkg.module"`` (a module, and every name in it) or ``"pkg.module:Name"`` (one
name). Paths removed already (:data:`REMOVED`) fail in one line that names the new one.
Keywords a constructor took before its settings dataclass (``kind_settings(...,
deprecated=True)`` in :mod:`nasforge.run.settings`) go in :data:`KEYWORDS_REMOVED_IN`.

Invariants:
    Every removal version is later than the running version (``tests/test_moved.py`` fails
    the release that reaches it, so the entry and its code go then); an old path maps to
    one new path. This module imports only the standard library.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

__all__ = [
    "KEYWORDS_REMOVED_IN",
    "MOVED",
    "REMOVED",
    "Moved",
    "find",
    "install",
    "message",
    "module_getattr",
    "moved_attribute",
    "redirect",
]


class Moved(NamedTuple):
    """Where an old path lives now and the release without it."""

    new: str  # "pkg.module" or "pkg.module:Name", as the old path is written
    removed_in: str  # the first release without the old path, e.g. "0.4.0"


#: deprecated in 0.3.0, removed in the next release
_NEXT = "0.4.0"

#: old path -> where it lives now; importing or naming the old path warns
MOVED: dict[str, Moved] = {
    # the DARTSformer kind left the example spaces for its family (issue 34)
    "nasforge.spaces.seq2seq": Moved("nasforge.oneshot.dartsformer.space", _NEXT),
    "nasforge.spaces.seq2seq_ops": Moved("nasforge.oneshot.dartsformer.ops", _NEXT),
    "nasforge.spaces.seq2seq_train": Moved("nasforge.oneshot.dartsformer.train", _NEXT),
    "nasforge.spaces.seq2seq_runner": Moved("nasforge.oneshot.dartsformer.runner", _NEXT),
    "nasforge.spaces:Seq2SeqSpace": Moved("nasforge.oneshot.dartsformer.space:Seq2SeqSpace", _NEXT),
    "nasforge.spaces:TransformerSeq2Seq": Moved(
        "nasforge.oneshot.dartsformer.space:TransformerSeq2Seq", _NEXT
    ),
    "nasforge.spaces:space_size": Moved("nasforge.oneshot.dartsformer.space:space_size", _NEXT),
    # the process a trial runs in got its own floor below the record (issue 34)
    "nasforge.run.devices": Moved("nasforge.runtime.devices", _NEXT),
    "nasforge.run.threads": Moved("nasforge.runtime.threads", _NEXT),
    "nasforge.run.weights": Moved("nasforge.runtime.weights", _NEXT),
    "nasforge.run.loopback": Moved("nasforge.runtime.loopback", _NEXT),
    # one single-path supernet for the engine and SPOS
    "nasforge.engine.crossmodel.singlepath": Moved("nasforge.weightsharing", _NEXT),
    # a training plan's stage sits beside the phases it runs
    "nasforge.ofa.train:Stage": Moved("nasforge.ofa.spaces:Stage", _NEXT),
    # the batch-norm helpers of a search sit together
    "nasforge.oneshot.supernet:frozen_bn_stats": Moved(
        "nasforge.oneshot.common:frozen_bn_stats", _NEXT
    ),
}

#: a kind's settings given as keywords instead of its settings dataclass (PipelineTraining,
#: Seq2SeqSearch, OFARun, OFADeploy, cmp_search): they work, and warn, until this release
KEYWORDS_REMOVED_IN = _NEXT

#: old path -> where it lives now, for paths already removed (nasforge 0.1's, which 0.2 kept
#: for one release): importing or naming one fails in one line naming the new path
REMOVED: dict[str, Moved] = {
    "nasforge.engine.store": Moved("nasforge.run.store", "0.3.0"),
    "nasforge.engine.results": Moved("nasforge.run.results", "0.3.0"),
    "nasforge.engine.export": Moved("nasforge.run.export", "0.3.0"),
    "nasforge.engine.progress": Moved("nasforge.run.progress", "0.3.0"),
    "nasforge.oneshot.experiment": Moved("nasforge.oneshot.runner", "0.3.0"),
    "nasforge.oneshot:OneShotExperiment": Moved("nasforge.oneshot:OneShotSearch", "0.3.0"),
}


def find(path: str, table: dict[str, Moved]) -> tuple[str, Moved] | None:
    """Returns ``(new path, entry)`` for ``path`` (``"pkg.module"`` or
    ``"pkg.module:Name.attr"``) when ``table`` has it, or has its module; None otherwise.
    The new path keeps what follows the entry's old path (``"nasforge.spaces.seq2seq:X"``
    gives ``"nasforge.oneshot.dartsformer.space:X"``)."""
    module, sep, qual = path.partition(":")
    first = qual.split(".", 1)[0]
    if sep and f"{module}:{first}" in table:
        entry = table[f"{module}:{first}"]
        return entry.new + qual[len(first) :], entry
    if module in table:
        entry = table[module]
        return entry.new + sep + qual, entry
    return None


def message(old: str, new: str, entry: Moved, removed: bool = False) -> str:
    """Returns the one line that says where ``old`` went: a warning's text for a moved path,
    an error's for a ``removed`` one."""
    if removed:
        return f"{old} was removed in nasforge {entry.removed_in}; use {new}"
    return (
        f"{old} moved to {new} and the old path will be removed in nasforge "
        f"{entry.removed_in}; use {new}"
    )


def redirect(path: str, stacklevel: int = 2) -> str:
    """Returns the path to import for ``path`` now: itself, or its new home (with a
    DeprecationWarning at the caller's caller) when it moved.

    Raises:
        ModuleNotFoundError: ``path`` was removed (the message names the new path).
    """
    gone = find(path, REMOVED)
    if gone is not None:
        raise ModuleNotFoundError(message(path, *gone, removed=True), name=path.partition(":")[0])
    moved = find(path, MOVED)
    if moved is None:
        return path
    warnings.warn(message(path, *moved), DeprecationWarning, stacklevel=stacklevel + 1)
    return moved[0]


def _load(path: str) -> Any:
    """Returns the object at ``"pkg.module:Name"`` (a module for ``"pkg.module"``)."""
    module, _, qual = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split(".") if qual else ():
        obj = getattr(obj, part)
    return obj


def moved_attribute(module: str, name: str) -> Any:
    """Returns ``module``'s moved attribute ``name`` from its new home, with a
    DeprecationWarning at the code that asked for it.

    Raises:
        AttributeError: ``module`` has no such name, moved or not (for a removed one the
            message names its new path).
    """
    old = f"{module}:{name}"
    gone = REMOVED.get(old)
    if gone is not None:
        new = gone.new.replace(":", ".")
        raise AttributeError(message(f"{module}.{name}", new, gone, removed=True))
    entry = MOVED.get(old)
    if entry is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    # 1: here, 2: the module's __getattr__, 3: the code that named the attribute
    warnings.warn(
        message(f"{module}.{name}", entry.new.replace(":", "."), entry),
        DeprecationWarning,
        stacklevel=3,
    )
    return _load(entry.new)


def module_getattr(module: str) -> Callable[[str], Any]:
    """Returns a module ``__getattr__`` (PEP 562) that serves the moved names of ``module``:
    ``__getattr__ = module_getattr(__name__)``."""

    def __getattr__(name: str) -> Any:
        """Returns a moved name of the module, with a warning.

        Raises:
            AttributeError: a name that is not there and did not move.
        """
        return moved_attribute(module, name)

    return __getattr__


class _Alias(importlib.abc.Loader):
    """Loads an old module path as the module at its new home (the same object, whose own
    name and spec stay as they are)."""

    def __init__(self, old: str, new: str, entry: Moved) -> None:
        self.old, self.new, self.entry = old, new, entry
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """Returns the new module; warns at the import statement (the import system's own
        frames are skipped by ``warnings``)."""
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        warnings.warn(message(self.old, self.new, self.entry), DeprecationWarning, stacklevel=2)
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Gives the new module back its own spec, which the import system set to the old
        path's; runs nothing (the module ran when it was imported at its new home)."""
        module.__spec__ = self.spec


class DeprecatedPaths(importlib.abc.MetaPathFinder):
    """Finds the table's old module paths: a moved one is the module at its new home (with a
    DeprecationWarning), a removed one an error naming it; every other path is left to the
    other finders."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """Returns the spec of a moved module path, or None for a path not in the table.

        Raises:
            ModuleNotFoundError: a removed module path (the message names the new one).
        """
        gone = REMOVED.get(fullname)
        if gone is not None:
            raise ModuleNotFoundError(
                message(fullname, gone.new, gone, removed=True), name=fullname
            )
        entry = MOVED.get(fullname)
        if entry is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, entry.new, entry))


def install() -> None:
    """Puts the finder of the table's old module paths first on ``sys.meta_path``, once."""
    if not any(type(f).__name__ == DeprecatedPaths.__name__ for f in sys.meta_path):
        sys.meta_path.insert(0, DeprecatedPaths())
