"""NNI 3.0's label scopes: how NNI names a choice that its author left unlabelled.

NNI builds labels like paths: a :class:`label_scope` is a folder (``model``, ``model/cell``),
:func:`auto_label` a file in the nearest one (``model/1``, ``model/op``). An unnamed label or
scope takes the next natural number of its parent, counted from 1; entering a scope resets its
count, so a space labels itself the same way every time it is built. This module gives the same
labels for the same calls, so that an NNI architecture dict names the same decisions here.

A model space without ``label_prefix`` has a *strict* scope: every choice must be labelled, as
NNI requires.

This module is pure (no torch). Like NNI's, the counters are shared by the process and are not
meant for two threads building spaces at once.
"""

from __future__ import annotations

import contextvars
import logging
from collections import defaultdict
from typing import Any

from nasforge.errors import SpaceError

__all__ = ["label", "label_scope", "strict_label_scope", "auto_label"]

log = logging.getLogger(__name__)

#: scope name -> the last number given in it (NNI's ``uid`` counters)
_counters: defaultdict[str, int] = defaultdict(int)
_stack: contextvars.ContextVar[tuple[label_scope, ...]] = contextvars.ContextVar(
    "nasforge_nni_label_scopes", default=()
)


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise SpaceError(f"an NNI label must be a string, got {name!r}")
    if not name:
        raise SpaceError("an NNI label cannot be empty")
    if "/" in name:
        raise SpaceError(
            f"NNI label {name!r} contains '/'; build hierarchical labels with label_scope"
        )


class label(str):  # noqa: N801 - NNI's name
    """A label that remembers its parts (``model/cell/1`` is ``['model', 'cell', '1']``), so
    that :func:`auto_label` returns it unchanged."""

    parts: list[str]

    def __new__(cls, parts: list[str] | str) -> label:
        if isinstance(parts, str):
            obj = super().__new__(cls, parts)
            obj.parts = [parts]
        else:
            obj = super().__new__(cls, "/".join(parts))
            obj.parts = list(parts)
        return obj

    def as_scope(self) -> label_scope:
        """Returns the scope of which this label is the path."""
        return label_scope(_path=self.parts)


class label_scope:  # noqa: N801 - NNI's name
    """A folder of labels; entered with ``with``, it names the labels made inside.

    ``basename`` names it; None takes the parent's next number (``param``'s global scope when
    there is no parent). A scope keeps its path once entered, so entering it again resets its
    count but not its name.
    """

    def __init__(
        self, basename: str | label | label_scope | None = None, *, _path: list[str] | None = None
    ) -> None:
        if isinstance(basename, label):
            _path, basename = basename.parts, None
        elif isinstance(basename, label_scope):
            _path, basename = basename.path, None
        if basename is not None:
            _check_name(basename)
        self.basename = basename
        self._path = list(_path) if _path else None
        if self._path:
            self.basename = self._path[-1]
        self.activated = False
        self._token: contextvars.Token[tuple[label_scope, ...]] | None = None

    def __enter__(self) -> label_scope:
        if self._path is None:
            parent = label_scope.current()
            if self.basename is None:
                if parent is None:
                    log.warning(
                        "an NNI choice has no label and no label scope: numbering it "
                        "globally; give it label=..."
                    )
                    parent = label_scope.global_()
                self.basename = parent.next_label()
            if parent is not None and parent.path is not None:
                self._path = [*parent.path, self.basename]
            else:
                self._path = [self.basename]
        self._token = _stack.set((*_stack.get(), self))
        _counters[self.name] = 0
        self.activated = True
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None, "a scope is left after it is entered"
        _stack.reset(self._token)
        self._token = None
        self.activated = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, label_scope) and self.path == other.path

    __hash__ = object.__hash__

    @property
    def path(self) -> list[str] | None:
        """Returns the scope's parts (None before it is first entered)."""
        return self._path

    @property
    def name(self) -> str:
        """Returns the scope's full name, ``model/cell/2``.

        Raises:
            SpaceError: the scope was never entered.
        """
        if self.path is None:
            raise SpaceError(f"label_scope {self.basename!r} is used before it is entered")
        return label(self.path)

    absolute_scope = name

    def next_label(self) -> str:
        """Returns the next number of this scope, as a string."""
        _counters[self.name] += 1
        return str(_counters[self.name])

    def check_entered(self) -> None:
        """Returns None when the scope has a path.

        Raises:
            SpaceError: it was never entered.
        """
        self.name  # noqa: B018 - raises when not entered

    @staticmethod
    def current() -> label_scope | None:
        """Returns the innermost entered scope, or None."""
        stack = _stack.get()
        return stack[-1] if stack else None

    @staticmethod
    def global_() -> label_scope:
        """Returns the global scope (``global``), which is never entered."""
        return label_scope("global", _path=["global"])

    def __repr__(self) -> str:
        return f"label_scope({'/'.join(self.path) if self.path else self.basename!r})"


class strict_label_scope(label_scope):  # noqa: N801 - NNI's name
    """The scope of a model space without ``label_prefix``: it adds no part to a label and
    refuses to number one."""

    def __init__(self) -> None:
        super().__init__("_unused_")

    def next_label(self) -> str:
        raise SpaceError(
            "an NNI choice in a ModelSpace without label_prefix has no label: give it "
            "label='...' (NNI requires one too), or declare the space with "
            "`class MySpace(ModelSpace, label_prefix='model')`"
        )

    @property
    def path(self) -> list[str] | None:
        return None if self._path is None else self._path[:-1]


def auto_label(name: str | label | None = None, scope: label_scope | None = None) -> str:
    """Returns the full label of a choice named ``name`` (None: the scope's next number) in
    ``scope`` (None: the innermost entered scope, or the global one); a :class:`label` is
    returned as it is.

    Raises:
        SpaceError: the scope is strict and ``name`` is None, or ``name`` is not a label.
    """
    if isinstance(name, label):
        return name
    if scope is not None:
        if name is None:
            name = scope.next_label()
        scope.check_entered()
        assert scope.path is not None
        return label([*scope.path, name])
    with label_scope(name) as made:
        assert made.path is not None
        return label(made.path)
