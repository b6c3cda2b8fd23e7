"""Spaces that grow by edits: an architecture is a list of edits applied to a base network.

This module is pure (no torch). An *edit language* (:class:`BaseEdits`) says what a network
is as plain data (a *state*), which edits apply to a state and what each one does; an
:class:`EditSpace` turns a language into a search space whose architectures are edit
histories, so the engine, the store, resume and export treat them like any architecture.

Vocabulary
    state     a network as JSON data (the language's own shape: a graph, a list of layers)
    edit      one change to a state, a JSON dict ``{"op": name, ...}`` (insert a node, add a
              connection, change an activation, replicate or split a layer)
    history   the architecture: ``{"edits": [edit, ...]}``, replayed in order on the base state
    id        the hash of the canonical form of the state a history builds, so two histories
              that build the same network are one architecture (``EditSpace.id_of``)
    preserving  an edit after which the network computes what it did before (net2net): a
              child built by one inherits its parent's weights (``nasforge.space.growing``)

Invariants: replaying a history is deterministic; a validated history replays without error;
``id_of`` depends on the built network only; every edit ``edits(state)`` lists applies to it.
"""

from __future__ import annotations

import abc
import copy
import hashlib
import math
import random
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.search_space import (
    Arch,
    Decision,
    RandomLike,
    SearchSpace,
    _canonical_value,
    _pick,
    canonical_json,
)

__all__ = ["BaseEdits", "Edit", "EditSpace", "State"]

#: one edit: ``{"op": name, **arguments}``, plain JSON
Edit = dict[str, Any]
#: a network as plain JSON data, in the shape its language chooses
State = Any
#: the label of an edit space's one decision, whose value is the history
EDITS = "edits"


class BaseEdits(abc.ABC):
    """Returns states and edits of one kind of network: the language an :class:`EditSpace`
    speaks. Subclasses implement :meth:`base`, :meth:`edits` and :meth:`apply`; they may
    override :meth:`canonical` (the JSON that equal networks share) and :meth:`preserves`.

    Invariants: :meth:`apply` never changes its argument; the same state lists the same edits
    in the same order; constructor arguments are plain data returned by :meth:`config`.
    """

    #: the language's name, recorded with a run's space
    name: ClassVar[str] = ""

    @abc.abstractmethod
    def base(self) -> State:
        """Returns the state of the starting network (the empty history)."""

    @abc.abstractmethod
    def edits(self, state: State) -> list[Edit]:
        """Returns every edit that applies to ``state``, in a stable order (may be empty)."""

    @abc.abstractmethod
    def apply(self, state: State, edit: Edit) -> State:
        """Returns the state after ``edit``; ``state`` is left as it was.

        Raises:
            ArchitectureError: the edit does not apply to ``state`` (the message says why).
        """

    def canonical(self, state: State) -> Any:
        """Returns the JSON form that every state of the same network shares (default: the
        state itself)."""
        return state

    def preserves(self, edit: Edit) -> bool:
        """Returns whether ``edit`` keeps the network's function (net2net), so that the child
        may inherit the parent's weights; False unless a language declares it."""
        return False

    def key(self, edit: Edit) -> str:
        """Returns the kind of an edit, what a policy over edits learns a preference for
        (default: its ``op``)."""
        return str(edit["op"])

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        return {}


class EditSpace(SearchSpace):
    """Returns edit histories as architectures: a search space that grows by edits.

    It has one decision, ``edits``, whose value is the history (a list of edit dicts); its
    listed candidate is the empty history, the base network. ``validate`` replays a history
    and returns it in canonical JSON; ``id_of`` hashes the network it builds. Strategies that
    understand histories (``evolution``, ``random``, ``edit_rl``) grow architectures with
    :meth:`edits` and :meth:`extend`; listing strategies (grid, tpe, rl) are refused.

    Invariants: a sample is a valid history of 1..``sample_length`` edits; the same seed gives
    the same samples; histories longer than ``max_edits`` are refused.

    Raises:
        SpaceError: ``language`` is not a BaseEdits, or a bad ``max_edits``/``sample_length``.
    """

    grows = True

    def __init__(self, language: BaseEdits, max_edits: int = 64, sample_length: int = 4) -> None:
        if not isinstance(language, BaseEdits):
            raise SpaceError(
                f"an EditSpace speaks a BaseEdits language, got {type(language).__name__}"
            )
        for name, value in (("max_edits", max_edits), ("sample_length", sample_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpaceError(f"{name} must be an int >= 1, got {value!r}")
        super().__init__([Decision(EDITS, "value", ([],))])
        self.language = language
        self.max_edits, self.sample_length = max_edits, sample_length
        #: canonical JSON of a history -> its state; replay is the hot path of validate
        self._states: OrderedDict[str, State] = OrderedDict()

    def __repr__(self) -> str:
        return f"EditSpace({type(self.language).__name__}, max_edits={self.max_edits})"

    @property
    def size(self) -> float:
        """Returns ``math.inf``: a space that grows has no finite size."""
        return math.inf

    # -- histories -----------------------------------------------------------------------------
    def history(self, arch: Mapping[str, object]) -> list[Edit]:
        """Returns the edits of ``arch`` as canonical JSON dicts (not replayed).

        Raises:
            ArchitectureError: ``arch`` is not ``{"edits": [edit dicts]}``, or is too long.
        """
        if not isinstance(arch, Mapping) or set(arch) != {EDITS}:
            got = sorted(arch) if isinstance(arch, Mapping) else type(arch).__name__
            raise ArchitectureError(
                f"an architecture of an edit space is {{'edits': [...]}} (a history), got {got}"
            )
        edits = arch[EDITS]
        if not isinstance(edits, (list, tuple)) or not all(
            isinstance(e, Mapping) and isinstance(e.get("op"), str) for e in edits
        ):
            raise ArchitectureError(
                f"'edits' must be a list of edit dicts each with an 'op', got {edits!r:.120}"
            )
        if len(edits) > self.max_edits:
            raise ArchitectureError(
                f"a history of {len(edits)} edits is longer than max_edits={self.max_edits}; "
                "raise max_edits or search shorter histories"
            )
        return [_canonical_value(dict(e)) for e in edits]

    def replay(self, arch: Mapping[str, object]) -> State:
        """Returns the state that ``arch``'s history builds from the base network.

        Raises:
            ArchitectureError: a malformed history, or an edit that does not apply (the
                message gives its position).
        """
        edits = self.history(arch)
        key = canonical_json({EDITS: edits})
        if key in self._states:
            self._states.move_to_end(key)
            return copy.deepcopy(self._states[key])
        state = self.language.base() if not edits else self.replay({EDITS: edits[:-1]})
        if edits:
            try:
                state = self.language.apply(state, edits[-1])
            except ArchitectureError as exc:
                raise ArchitectureError(f"edit {len(edits) - 1} {edits[-1]}: {exc}") from exc
        self._states[key] = copy.deepcopy(state)
        if len(self._states) > 4096:
            self._states.popitem(last=False)
        return state

    def validate(self, arch: Mapping[str, object]) -> Arch:
        """Returns ``arch`` as canonical JSON after checking that its history replays.

        Raises:
            ArchitectureError: see :meth:`replay`.
        """
        edits = self.history(arch)
        self.replay({EDITS: edits})
        return {EDITS: edits}

    def id_of(self, arch: Mapping[str, object]) -> str:
        """Returns the id of the network a validated history builds: the hash of the
        language's canonical form of its state, equal for every history that builds it."""
        canon = canonical_json({"network": self.language.canonical(self.replay(arch))})
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    def arch_id(self, arch: Mapping[str, object]) -> str:
        """Returns :meth:`id_of` of ``arch`` after validating it."""
        return self.id_of(self.validate(arch))

    # -- growing -------------------------------------------------------------------------------
    def edits(self, arch: Mapping[str, object]) -> list[Edit]:
        """Returns every edit that applies to the network of ``arch``; empty at
        ``max_edits``."""
        if len(self.history(arch)) >= self.max_edits:
            return []
        return [_canonical_value(e) for e in self.language.edits(self.replay(arch))]

    def extend(self, arch: Mapping[str, object], edit: Mapping[str, object]) -> Arch:
        """Returns the history of ``arch`` with ``edit`` appended, validated.

        Raises:
            ArchitectureError: the edit does not apply to that network.
        """
        return self.validate({EDITS: [*self.history(arch), dict(edit)]})

    def edit_key(self, edit: Mapping[str, object]) -> str:
        """Returns the kind of an edit (the language's :meth:`BaseEdits.key`)."""
        return self.language.key(dict(edit))

    def sample(self, rng: RandomLike | int | None = None) -> Arch:
        """Returns a random history of 1..``sample_length`` edits, each drawn uniformly
        from those that apply (shorter when none applies)."""
        if rng is None or isinstance(rng, int):
            rng = random.Random(rng)
        arch: Arch = {EDITS: []}
        for _ in range(1 + _pick(rng, self.sample_length)):
            options = self.edits(arch)
            if not options:
                break
            arch = self.extend(arch, options[_pick(rng, len(options))])
        return arch

    # -- what a flat space offers and a growing one does not ----------------------------------
    def grid(self, points: int | None = None) -> Iterator[Arch]:
        """Raises SpaceError: a space that grows has no grid."""
        raise SpaceError(
            "an edit space grows without bound and has no grid; search it with evolution, "
            "random or edit_rl"
        )

    def index_of(self, arch: Mapping[str, object]) -> list[int]:
        """Raises SpaceError: a history has no candidate positions."""
        raise SpaceError("an edit space's histories have no candidate positions")

    def from_index(self, positions: Sequence[int]) -> Arch:
        """Raises SpaceError: a history has no candidate positions."""
        raise SpaceError("an edit space's histories have no candidate positions")

    def to_dict(self) -> dict[str, Any]:
        """Returns the space as plain JSON-able data: its language and limits."""
        return {
            "decisions": [d.to_dict() for d in self.decisions],
            "edits": {
                "language": self.language.name or type(self.language).__name__,
                "config": self.language.config(),
                "max_edits": self.max_edits,
                "sample_length": self.sample_length,
            },
        }
