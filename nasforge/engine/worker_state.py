"""The process state of a reused pool worker: taken before its first trial, put back after
each trial, and what cannot be put back named, so that the pool replaces the worker.

The pool hands a worker whose trial succeeded the next trial (``reuse_workers``,
:mod:`nasforge.engine.process_pool`). So that each trial still starts in the process state of
a fresh worker, the worker takes a :class:`WorkerState` before its first trial and calls
:meth:`WorkerState.restore` after each one. Every part of the state is one of:

    reset    put back as it was before the first trial (environment variables, working
             directory, ``sys.path``, the global random generators, torch's global modes and
             flags, ``logging``, signal handlers, standard streams, umask, warnings, ...)
    replace  cannot be put back, or not reliably (descriptors or threads left open, child
             processes, credentials, CUDA initialised, memory grown past
             :data:`MEMORY_GROWTH_LIMIT`, a reset that the system refuses, such as a hard
             resource limit a non-root process lowered): the worker sends its result, says
             why, and exits; the pool gives the next trial a fresh worker
    kept     modules imported by a trial from the import path stay imported (Python's
             import cache; one from elsewhere replaces the worker), and Python objects a
             trial changed stay changed (a module's attributes, the evaluator's)

torch's and NumPy's parts are taken when the module is loaded before the first trial, or else
right after a trial first imports it (an import hook), so that they read as freshly imported.
docs/engine.md ("Reused workers") states the guarantee as a list. Linux reads ``/proc`` for
the descriptors, child processes and memory; elsewhere those three are not checked.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

from nasforge.engine._state_parts import PROCESS_PARTS, Part, resident
from nasforge.engine._state_torch import LIBRARY_PARTS

__all__ = ["WorkerState", "MEMORY_GROWTH_LIMIT", "PARTS", "Part"]

#: bytes of anonymous memory a worker may have gained since before its first trial; past
#: it, the worker is replaced (a cache or a leak the next trial would pay for): 1 GiB
MEMORY_GROWTH_LIMIT = 1 << 30

#: the last part: memory a trial left behind, checked once everything else is put back
_MEMORY = Part(
    "anonymous memory",
    resident,
    same=lambda now, saved: now - saved <= MEMORY_GROWTH_LIMIT,
    say=lambda now, saved: (
        f"grew by {(now - saved) >> 20} MiB, more than "
        f"MEMORY_GROWTH_LIMIT ({MEMORY_GROWTH_LIMIT >> 20} MiB)"
    ),
)

#: every part, in the order :meth:`WorkerState.restore` puts them back and checks them
PARTS: tuple[Part, ...] = (*LIBRARY_PARTS, *PROCESS_PARTS, _MEMORY)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Returns nothing; a finder that lets the normal ones find a module that ``state`` waits
    for, and takes ``state``'s parts of it right after the module's first import."""

    def __init__(self, state: WorkerState) -> None:
        self._state, self._busy = state, False

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        """Returns the module's spec from the other finders, its loader primed; None for a
        module nothing waits for."""
        if self._busy or name not in self._state.waiting:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_then_take(module: Any) -> None:
            try:
                run(module)
            finally:
                with contextlib.suppress(AttributeError):
                    del loader.exec_module  # the loader's own method again
            self._state.take_parts(name)

        try:
            loader.exec_module = exec_then_take
        except AttributeError:  # a loader without instance attributes: not taken
            pass
        return spec


class WorkerState:
    """Returns reasons from :meth:`restore`; the process state of a pool worker, taken before
    its first trial (:meth:`take`), put back after each trial.

    Invariants: after :meth:`restore` returns no reason, every part reads as it did when
    taken (NumPy's and torch's as right after their import when a trial imported them);
    a part that cannot be read, written or verified is a reason, never an exception.
    """

    def __init__(self) -> None:
        self._saved: dict[str, Any] = {}
        #: modules some parts need that are not imported yet: taken at their first import
        self.waiting: set[str] = set()

    @classmethod
    def take(cls) -> WorkerState:
        """Returns the state of this process now (before a worker's first trial); parts of
        NumPy and torch when they are loaded, else when a trial first imports them."""
        state = cls()
        state.waiting = {p.needs for p in PARTS if p.needs and p.needs not in sys.modules}
        if state.waiting:
            sys.meta_path.insert(0, _AfterImport(state))  # before the import paths are taken
        for needs in {p.needs for p in PARTS} - state.waiting:
            state.take_parts(needs)
        return state

    def take_parts(self, needs: str) -> None:
        """Returns nothing; takes the parts that need module ``needs`` ('' the process's)."""
        self.waiting.discard(needs)
        for part in PARTS:
            if part.needs == needs:
                # a part this process cannot read (no such call here) is not taken
                with contextlib.suppress(Exception):
                    self._saved[part.name] = part.read()

    def restore(self) -> list[str]:
        """Returns why this worker must not run another trial (empty: it may), after putting
        back every part a trial changed: a part that cannot be put back, or that reads
        differently afterwards, is a reason (``"<part>: <what>"``)."""
        reasons = []
        for part in PARTS:
            if part.name not in self._saved:
                continue
            why = self._restore(part, self._saved[part.name])
            if why and part.name == "file descriptors":  # files closed once the GC runs
                gc.collect()
                why = self._restore(part, self._saved[part.name])
            if why:
                reasons.append(why)
        return reasons

    @staticmethod
    def _restore(part: Part, saved: Any) -> str:
        """Returns '' when ``part`` reads as ``saved`` (after writing it back), else why not."""
        try:
            if part.always and part.write is not None:
                part.write(saved)
                return ""
            now = part.read()
            if part.same(now, saved):
                return ""
            if part.write is None:
                said = part.say(now, saved) if part.say is not None else "changed"
                return f"{part.name}: {said}"
            part.write(saved)
            if not part.same(part.read(), saved):
                return f"{part.name}: still changed after putting it back"
        except Exception as exc:  # noqa: BLE001 - any failure means the same: replace
            return f"{part.name}: {type(exc).__name__}: {exc}"
        return ""
