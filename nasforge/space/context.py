"""Where a choice learns what to do: record itself into a space, or return its frozen value.

A model space is ordinary Python ``__init__`` code run twice in different contexts:

    recording   every declaration (``LayerChoice``, ``InputChoice``, ``choice``, ``Repeat``,
                ``Mutator.choose``) registers a decision and builds all its candidates;
    frozen      every declaration returns the value the architecture gives its label and builds
                only that candidate.

Unlabelled declarations get their labels after recording, from the module path where they ended
up. To find that label again when frozen, each declaration has a *key*: its position among the
declarations of its scope. A container (one candidate of a LayerChoice, one block of a Repeat)
opens a child scope, so that keys do not shift when the frozen run skips the candidates and
blocks that the architecture does not choose.

This module is pure (no torch).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.ranges import Range
from nasforge.space.search_space import Decision, DecisionKind

__all__ = ["Recording", "Frozen", "current", "use", "Key", "Declaration"]

Key = tuple[int, ...]


@dataclass
class Declaration:
    """One declaration seen while recording: what was declared, and by what object."""

    key: Key
    label: str | None  # None until an automatic label is assigned
    kind: DecisionKind
    values: tuple[Any, ...]
    owner: Any  # the module (LayerChoice, InputChoice, Repeat) or value-choice leaf
    explicit: bool
    domain: Range | None = None  # a range decision's range (nf.uniform, nf.integer)

    def decision(self) -> Decision:
        """Returns the decision this declaration makes (its label must be set)."""
        assert self.label is not None, "labels are assigned before decisions are made"
        return Decision(self.label, self.kind, self.values, self.domain)


class _Scoped:
    """Keeps the stack of per-scope counters that give each declaration its key."""

    def __init__(self) -> None:
        self._path: list[int] = []
        self._counters: list[int] = [0]

    def next_key(self) -> Key:
        n = self._counters[-1]
        self._counters[-1] += 1
        return (*self._path, n)

    @contextmanager
    def scope(self, index: int) -> Iterator[None]:
        """Opens child scope ``index`` of the declaration that was made last."""
        parent = self._counters[-1] - 1
        self._path.extend((parent, index))
        self._counters.append(0)
        try:
            yield
        finally:
            self._counters.pop()
            del self._path[-2:]


class Recording(_Scoped):
    """Collects the declarations of one space construction.

    Invariants: a label names one decision; a label declared twice must have the same kind and
    candidates (the two places are tied).
    """

    def __init__(self) -> None:
        super().__init__()
        self.declarations: list[Declaration] = []
        self._by_label: dict[str, Declaration] = {}

    def declare(
        self,
        kind: DecisionKind,
        values: tuple[Any, ...],
        label: str | None,
        owner: Any,
        domain: Range | None = None,
    ) -> Declaration:
        """Returns the declaration registered for a choice; validates tied labels."""
        decision = Decision(label or "_", kind, values, domain)  # validates the candidates early
        if label is not None and label in self._by_label:
            first = self._by_label[label]
            if first.values != decision.values or first.kind != kind or first.domain != domain:
                said = domain.describe() if domain else list(decision.values)
                before = first.domain.describe() if first.domain else list(first.values)
                raise SpaceError(
                    f"label {label!r} is used twice with different candidates: "
                    f"{first.kind} {before} and {kind} {said}; "
                    "a repeated label ties two places to one decision, so they must agree"
                )
        d = Declaration(
            self.next_key(), label, kind, decision.values, owner, label is not None, domain
        )
        self.declarations.append(d)
        if label is not None:
            self._by_label.setdefault(label, d)
        return d

    def first(self, label: str) -> Declaration | None:
        """Returns the first declaration of ``label`` (the one its decision is made from), or
        None when the label has not been declared yet."""
        return self._by_label.get(label)


@dataclass
class Frozen(_Scoped):
    """Answers each declaration with the value an architecture gives its label."""

    arch: Mapping[str, Any]
    auto_labels: Mapping[Key, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        _Scoped.__init__(self)

    def resolve(
        self, label: str | None, values: tuple[Any, ...] | None = None, domain: Range | None = None
    ) -> Any:
        """Returns the architecture's value for a declaration (the next one in this scope),
        checked against its candidates (``values``) or its range (``domain``) when given."""
        key = self.next_key()
        if label is None:
            label = self.auto_labels.get(key)
            if label is None:
                raise SpaceError(
                    "an unlabelled choice was met while freezing that was not met while "
                    f"recording the space (key {key}); the space's __init__ must declare the "
                    "same choices every time it runs — give the choice an explicit label"
                )
        if label not in self.arch:
            raise ArchitectureError(f"missing label {label!r} in the architecture")
        value = self.arch[label]
        if domain is not None:
            value = domain.canonical(value, label)  # raises ArchitectureError
        elif values is not None:
            Decision(label, "value", values).index(value)  # raises ArchitectureError
        self.used.add(label)
        return value


_current: contextvars.ContextVar[Recording | Frozen | None] = contextvars.ContextVar(
    "nasforge_space_context", default=None
)


def current() -> Recording | Frozen | None:
    """Returns the active context, or None outside any space construction."""
    return _current.get()


@contextmanager
def use(ctx: Recording | Frozen) -> Iterator[Recording | Frozen]:
    """Makes ``ctx`` the active context for the duration of the block."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def require(what: str) -> Recording | Frozen:
    """Returns the active context or raises a SpaceError explaining where ``what`` belongs."""
    ctx = _current.get()
    if ctx is None:
        raise SpaceError(
            f"{what} was created outside a model space; create it inside the __init__ of a "
            "nasforge.ModelSpace subclass (or of a module constructed there), or inside "
            "Mutator.mutate"
        )
    return ctx
