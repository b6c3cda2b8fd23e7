"""The search space as plain data: labelled decisions, their candidates, and what can be done
with them without building a model (size, sampling, enumeration, validation, identity).

This module is pure: it never imports torch, so strategies, schedulers and tests use it alone.

Vocabulary
    decision      one labelled choice of a space: ``Decision(label, kind, values)``
    architecture  a plain ``dict`` mapping every label of a space to one of its values; JSON-able
    arch id       a stable hash of an architecture's canonical JSON; equal across processes/runs
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from nasforge.errors import ArchitectureError, SpaceError

if TYPE_CHECKING:  # numpy only names a type here: this module imports no numpy
    import numpy as np

__all__ = [
    "Decision",
    "SearchSpace",
    "Arch",
    "DecisionKind",
    "arch_id",
    "canonical_json",
]

#: an architecture: label -> chosen candidate. Candidates are JSON values (int, float, str, bool,
#: None, lists of them); the values stay ``Any`` because code that reads an architecture knows
#: its own space's types (``arch["width"] * 2``), where a union would make every read narrow.
#: Functions that only take an architecture in accept ``Mapping[str, object]``.
Arch = dict[str, Any]
DecisionKind = Literal["layer", "input", "value", "depth"]
_KINDS = ("layer", "input", "value", "depth")


def _canonical_value(value: Any) -> Any:
    """Returns ``value`` with tuples turned into lists and int-like subclasses into builtins."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_canonical_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical_value(v) for k, v in value.items()}
    raise ArchitectureError(
        f"value {value!r} of type {type(value).__name__} is not JSON-serialisable; "
        "candidates must be int, float, str, bool, None or lists of them"
    )


def canonical_json(arch: Mapping[str, object]) -> str:
    """Returns an architecture's canonical JSON: sorted keys, no spaces, lists for tuples."""
    return json.dumps(_canonical_value(dict(arch)), sort_keys=True, separators=(",", ":"))


def arch_id(arch: Mapping[str, object]) -> str:
    """Returns the 16-hex-digit id of an architecture.

    Invariants: equal architectures (as JSON, tuples equal to lists) have equal ids in every
    process and run; the id does not depend on key order.
    """
    return hashlib.sha256(canonical_json(arch).encode()).hexdigest()[:16]


def _key(value: Any) -> str:
    """Returns a hashable key of a candidate value: its JSON, which tells 1, 1.0 and true apart
    and makes a tuple equal to the list of the same items."""
    return json.dumps(_canonical_value(value), sort_keys=True)


@dataclass(frozen=True)
class Decision:
    """One labelled decision: its kind and its candidate values, in order.

    Invariants: ``values`` is non-empty and free of duplicates; the first value is the default.
    ``kind`` says which construct made it: ``layer`` (LayerChoice: values are candidate names or
    indices), ``input`` (InputChoice: values are an input index, or a sorted list of indices when
    several are chosen), ``value`` (a value choice), ``depth`` (a Repeat's number of blocks).
    """

    label: str
    kind: DecisionKind
    values: tuple[Any, ...]
    #: candidate key (its JSON) -> position; set in ``__post_init__``
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise SpaceError(f"a decision label must be a non-empty string, got {self.label!r}")
        if self.kind not in _KINDS:
            raise SpaceError(f"decision {self.label!r}: kind {self.kind!r} is not one of {_KINDS}")
        values = tuple(_canonical_value(v) for v in self.values)
        if not values:
            raise SpaceError(f"decision {self.label!r} has no candidates; give at least one")
        keys = [_key(v) for v in values]
        if len(set(keys)) != len(keys):
            raise SpaceError(f"decision {self.label!r} has duplicate candidates: {list(values)}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_index", {k: i for i, k in enumerate(keys)})

    def __len__(self) -> int:
        return len(self.values)

    @property
    def default(self) -> Any:
        """Returns the first candidate: the value a choice has before any search."""
        return self.values[0]

    def index(self, value: object) -> int:
        """Returns the position of ``value`` among the candidates.

        Raises:
            ArchitectureError: ``value`` is not a candidate; the message lists the candidates.
        """
        try:
            key = _key(value)
        except ArchitectureError:
            key = None
        idx = self._index.get(key) if key is not None else None
        if idx is None:
            raise ArchitectureError(
                f"label {self.label!r}: {value!r} is not a candidate; expected one of "
                f"{list(self.values)}"
            )
        return idx

    def to_dict(self) -> dict[str, Any]:
        """Returns the decision as plain JSON-able data."""
        return {"label": self.label, "kind": self.kind, "values": list(self.values)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """Returns the decision that :meth:`to_dict` produced."""
        return cls(data["label"], data["kind"], tuple(data["values"]))


#: a seeded generator: ``random.Random`` or ``numpy.random.Generator``
RandomLike: TypeAlias = "random.Random | np.random.Generator"


def _pick(rng: RandomLike, n: int) -> int:
    if isinstance(rng, random.Random):
        return rng.randrange(n)
    if hasattr(rng, "integers"):  # numpy.random.Generator
        return int(rng.integers(n))
    raise TypeError(f"rng must be random.Random or numpy.random.Generator, got {type(rng)!r}")


class SearchSpace(Mapping[str, Decision]):
    """Returns decisions by label; an ordered, immutable collection of a space's decisions.

    Invariants: labels are unique; the order is the order in which a space first declared its
    decisions and is the same on every construction; ``size`` is the exact product of the
    numbers of candidates (a Python int, exact beyond 2**64); every sample lies in the space; the
    same seed gives the same sequence of samples.
    """

    def __init__(self, decisions: Sequence[Decision] = ()) -> None:
        self._decisions: dict[str, Decision] = {}
        for d in decisions:
            if d.label in self._decisions:
                raise SpaceError(f"label {d.label!r} is declared twice in one search space")
            self._decisions[d.label] = d

    # -- Mapping -------------------------------------------------------------------------------
    def __getitem__(self, label: str) -> Decision:
        return self._decisions[label]

    def __iter__(self) -> Iterator[str]:
        return iter(self._decisions)

    def __len__(self) -> int:
        return len(self._decisions)

    def __repr__(self) -> str:
        body = ", ".join(f"{d.label}: {d.kind}[{len(d)}]" for d in self._decisions.values())
        return f"SearchSpace({body}; size={self.size})"

    @property
    def decisions(self) -> list[Decision]:
        """Returns the decisions in their stable order."""
        return list(self._decisions.values())

    @property
    def size(self) -> int:
        """Returns the exact number of architectures (1 for a space with no decision)."""
        n = 1
        for d in self._decisions.values():
            n *= len(d)
        return n

    # -- architectures -------------------------------------------------------------------------
    def default(self) -> Arch:
        """Returns the architecture that takes every decision's first candidate."""
        return {d.label: d.default for d in self._decisions.values()}

    def sample(self, rng: RandomLike | int | None = None) -> Arch:
        """Returns one architecture drawn uniformly at random.

        ``rng`` is a ``random.Random``, a ``numpy.random.Generator`` or an int seed.
        """
        if rng is None or isinstance(rng, int):
            rng = random.Random(rng)
        return {d.label: d.values[_pick(rng, len(d))] for d in self._decisions.values()}

    def grid(self) -> Iterator[Arch]:
        """Yields every architecture once, in lexicographic order of candidate positions
        (the last decision varies fastest)."""
        labels = list(self._decisions)
        for combo in itertools.product(*(d.values for d in self._decisions.values())):
            yield dict(zip(labels, combo))

    def validate(self, arch: Mapping[str, object]) -> Arch:
        """Returns ``arch`` in canonical form (builtin types, lists for tuples, space order).

        Raises:
            ArchitectureError: ``arch`` is not a mapping, names a label the space lacks, misses a
                label, or gives a value that is not among a label's candidates.
        """
        if not isinstance(arch, Mapping):
            raise ArchitectureError(
                f"an architecture is a dict label -> value, got {type(arch).__name__}"
            )
        unknown = [k for k in arch if k not in self._decisions]
        if unknown:
            raise ArchitectureError(
                f"unknown label(s) {unknown}; this space has labels {list(self._decisions)}"
            )
        missing = [k for k in self._decisions if k not in arch]
        if missing:
            expected = {k: list(self._decisions[k].values) for k in missing}
            raise ArchitectureError(f"missing label(s) {missing}; expected values {expected}")
        out: Arch = {}
        for label, d in self._decisions.items():
            out[label] = d.values[d.index(arch[label])]
        return out

    def index_of(self, arch: Mapping[str, object]) -> list[int]:
        """Returns the candidate position of each decision's value, in space order."""
        arch = self.validate(arch)
        return [d.index(arch[d.label]) for d in self._decisions.values()]

    def from_index(self, positions: Sequence[int]) -> Arch:
        """Returns the architecture whose decision ``i`` takes candidate ``positions[i]``."""
        if len(positions) != len(self._decisions):
            raise ArchitectureError(
                f"expected {len(self._decisions)} positions, got {len(positions)}"
            )
        return {d.label: d.values[p] for d, p in zip(self._decisions.values(), positions)}

    def arch_id(self, arch: Mapping[str, object]) -> str:
        """Returns the id of ``arch`` after validating it against this space."""
        return arch_id(self.validate(arch))

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Returns the space as plain JSON-able data."""
        return {"decisions": [d.to_dict() for d in self._decisions.values()]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Returns the space that :meth:`to_dict` produced."""
        return cls([Decision.from_dict(d) for d in data["decisions"]])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpace) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))
