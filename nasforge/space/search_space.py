"""The search space as plain data: labelled decisions, their candidates, and what can be done
with them without building a model (size, sampling, enumeration, validation, identity).

This module is pure: it never imports torch, so strategies, schedulers and tests use it alone.

Vocabulary
    decision      one labelled choice of a space: ``Decision(label, kind, values)``, or a range
                  ``Decision(label, "float" | "int", (), domain=Range(...))`` (a continuous or
                  integer hyperparameter: ``nf.uniform``, ``nf.integer``)
    architecture  a plain ``dict`` mapping every label of a space to one of its values; JSON-able
    arch id       a stable hash of an architecture's canonical JSON; equal across processes/runs
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.ranges import Range

if TYPE_CHECKING:  # numpy only names a type here: this module imports no numpy
    import numpy as np

__all__ = [
    "Decision",
    "SearchSpace",
    "Arch",
    "DecisionKind",
    "arch_id",
    "canonical_json",
    "fair_rounds",
    "RANGE_KINDS",
]

#: an architecture: label -> chosen candidate. Candidates are JSON values (int, float, str, bool,
#: None, lists of them); the values stay ``Any`` because code that reads an architecture knows
#: its own space's types (``arch["width"] * 2``), where a union would make every read narrow.
#: Functions that only take an architecture in accept ``Mapping[str, object]``.
Arch = dict[str, Any]
DecisionKind = Literal["layer", "input", "value", "depth", "float", "int"]
_KINDS = ("layer", "input", "value", "depth", "float", "int")
#: the kinds whose candidates are a range (``Decision.domain``), not a list
RANGE_KINDS = ("float", "int")


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
    several are chosen), ``value`` (a value choice), ``depth`` (a Repeat's number of blocks),
    ``float``/``int`` (a range: ``values`` is empty and ``domain`` holds the range; see
    :mod:`nasforge.space.ranges`). ``len`` and ``index`` are for listed candidates only: on a
    range they raise, naming the decision, so code that knows only lists fails loudly.
    """

    label: str
    kind: DecisionKind
    values: tuple[Any, ...]
    domain: Range | None = None
    #: candidate key (its JSON) -> position; set in ``__post_init__``
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise SpaceError(f"a decision label must be a non-empty string, got {self.label!r}")
        if self.kind not in _KINDS:
            raise SpaceError(f"decision {self.label!r}: kind {self.kind!r} is not one of {_KINDS}")
        if self.kind in RANGE_KINDS:
            if not isinstance(self.domain, Range) or self.domain.integer != (self.kind == "int"):
                raise SpaceError(
                    f"decision {self.label!r} of kind {self.kind!r} needs domain=Range(..., "
                    f"integer={self.kind == 'int'}), got {self.domain!r}"
                )
            if tuple(self.values):
                raise SpaceError(f"range decision {self.label!r} takes no listed values")
            object.__setattr__(self, "values", ())
            object.__setattr__(self, "_index", {})
            return
        if self.domain is not None:
            raise SpaceError(f"decision {self.label!r} of kind {self.kind!r} takes no domain")
        values = tuple(_canonical_value(v) for v in self.values)
        if not values:
            raise SpaceError(f"decision {self.label!r} has no candidates; give at least one")
        keys = [_key(v) for v in values]
        if len(set(keys)) != len(keys):
            raise SpaceError(f"decision {self.label!r} has duplicate candidates: {list(values)}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_index", {k: i for i, k in enumerate(keys)})

    @property
    def is_range(self) -> bool:
        """Returns whether the decision is a range (``float``/``int``), not a list."""
        return self.domain is not None

    def _listed(self, what: str) -> None:
        if self.domain is not None:
            raise SpaceError(
                f"decision {self.label!r} is a range {self.domain.describe()}, which has no "
                f"listed candidates, so {what} does not apply; handle ranges through "
                "Decision.domain (or discretise them with nf.choice([...]))"
            )

    def __len__(self) -> int:
        self._listed("len()")
        return len(self.values)

    @property
    def count(self) -> float:
        """Returns the number of candidates: ``math.inf`` for a float range."""
        return self.domain.count if self.domain is not None else len(self.values)

    @property
    def default(self) -> Any:
        """Returns the first candidate (a range's middle): the value a choice has before any
        search."""
        return self.domain.default if self.domain is not None else self.values[0]

    def canonical(self, value: object) -> Any:
        """Returns ``value`` as the space holds it: the candidate equal to it, or the range's
        canonical number.

        Raises:
            ArchitectureError: not a candidate, or outside the range (the message says which).
        """
        if self.domain is not None:
            return self.domain.canonical(value, self.label)
        return self.values[self.index(value)]

    def sample(self, rng: RandomLike) -> Any:
        """Returns a candidate drawn uniformly (a range: uniformly in its transformed
        coordinate, log-uniformly when ``log``)."""
        if self.domain is not None:
            return self.domain.sample(rng)
        return self.values[_pick(rng, len(self.values))]

    def index(self, value: object) -> int:
        """Returns the position of ``value`` among the candidates.

        Raises:
            ArchitectureError: ``value`` is not a candidate; the message lists the candidates.
            SpaceError: the decision is a range.
        """
        self._listed("index()")
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
        """Returns the decision as plain JSON-able data (a range: its bounds, no values)."""
        if self.domain is not None:
            return {"label": self.label, "kind": self.kind, **self.domain.to_dict()}
        return {"label": self.label, "kind": self.kind, "values": list(self.values)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """Returns the decision that :meth:`to_dict` produced."""
        if data["kind"] in RANGE_KINDS:
            domain = Range.from_dict(data, integer=data["kind"] == "int")
            return cls(data["label"], data["kind"], (), domain)
        return cls(data["label"], data["kind"], tuple(data["values"]))


#: a seeded generator: ``random.Random`` or ``numpy.random.Generator``
RandomLike: TypeAlias = "random.Random | np.random.Generator"


def _pick(rng: RandomLike, n: int) -> int:
    if isinstance(rng, random.Random):
        return rng.randrange(n)
    if hasattr(rng, "integers"):  # numpy.random.Generator
        return int(rng.integers(n))
    raise TypeError(f"rng must be random.Random or numpy.random.Generator, got {type(rng)!r}")


def fair_rounds(n_candidates: Sequence[int], rng: random.Random) -> Iterator[tuple[int, ...]]:
    """Yields, without end, a candidate position per decision (``n_candidates[b]`` of them for
    decision ``b``), each decision's in rounds: every position once per round, in a fresh order
    drawn from ``rng`` each round (FairNAS's strict fairness)::

        decision 0, 3 candidates:  2 0 1 | 1 2 0 | 0 1 2 | ...
        decision 1, 4 candidates:  3 1 0 2 | 2 0 3 1 | ...

    The same ``rng`` state gives the same sequence."""
    bags: list[list[int]] = [[] for _ in n_candidates]
    while True:
        for b, n in enumerate(n_candidates):
            if not bags[b]:  # a new round for this decision
                bags[b] = rng.sample(range(n), n)
        yield tuple(bag.pop() for bag in bags)


def _expected(d: Decision) -> Any:
    """Returns what a decision accepts, for messages: its candidates or its range."""
    return d.domain.describe() if d.domain is not None else list(d.values)


class SearchSpace(Mapping[str, Decision]):
    """Returns decisions by label; an ordered, immutable collection of a space's decisions.

    Invariants: labels are unique; the order is the order in which a space first declared its
    decisions and is the same on every construction; ``size`` is the exact product of the
    numbers of candidates (a Python int, exact beyond 2**64; ``math.inf`` once a decision is a
    float range); every sample lies in the space; the same seed gives the same sequence of
    samples.
    """

    #: whether architectures grow by edits (an ``EditSpace``); a flat space's ``edits`` and
    #: ``extend`` change one decision, which is all a strategy over edits needs of it
    grows: bool = False

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
        body = ", ".join(
            f"{d.label}: {d.domain.describe() if d.domain else f'{d.kind}[{len(d)}]'}"
            for d in self._decisions.values()
        )
        return f"SearchSpace({body}; size={self.size})"

    @property
    def decisions(self) -> list[Decision]:
        """Returns the decisions in their stable order."""
        return list(self._decisions.values())

    @property
    def size(self) -> int | float:
        """Returns the exact number of architectures (1 for a space with no decision), or
        ``math.inf`` when a decision is a float range."""
        n: int | float = 1
        for d in self._decisions.values():
            count = d.count
            if count == math.inf:
                return math.inf
            n *= int(count)
        return n

    @property
    def ranges(self) -> list[Decision]:
        """Returns the range decisions (``float``/``int``: hyperparameters), in space order."""
        return [d for d in self._decisions.values() if d.domain is not None]

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
        return {d.label: d.sample(rng) for d in self._decisions.values()}

    def fair_sample(self, rng: random.Random | int | None = None) -> list[Arch]:
        """Returns ``m`` architectures, ``m`` the most candidates any decision has, in which
        each decision takes its candidates in rounds of a fresh shuffled order (FairNAS's strict
        fairness, :func:`fair_rounds`): one training step over them trains every candidate of
        a decision with ``m`` candidates exactly once, and each candidate of a decision with
        fewer at most once more than another. ``rng``: a ``random.Random`` or an int seed.

        Raises:
            SpaceError: a decision is a range (it has no candidates to take in turn).
        """
        if rng is None or isinstance(rng, int):
            rng = random.Random(rng)
        ranges = [d.label for d in self.ranges]
        if ranges:
            raise SpaceError(
                f"decisions {ranges} are ranges: fair sampling takes each candidate of a "
                "decision in turn, and a range has none to list; give them as nf.choice([...])"
            )
        ds = list(self._decisions.values())
        rounds = fair_rounds([len(d.values) for d in ds], rng)
        m = max((len(d.values) for d in ds), default=1)
        return [{d.label: d.values[i] for d, i in zip(ds, next(rounds))} for _ in range(m)]

    def grid(self, points: int | None = None) -> Iterator[Arch]:
        """Yields every architecture once, in lexicographic order of candidate positions
        (the last decision varies fastest). An integer range takes each of its values; a float
        range takes ``points`` values evenly spread over it (log-evenly when ``log``), and so
        does an integer range with more values than ``points``.

        Raises:
            SpaceError: (at once) a float range and no ``points``; the message names it.
        """
        floats = [d.label for d in self._decisions.values() if d.count == math.inf]
        if floats and points is None:
            raise SpaceError(
                f"the space has continuous decision(s) {floats}, so it has infinitely many "
                "architectures and no grid; pass points=n (n values per range) or list the "
                "values with nf.choice([...])"
            )
        columns = []
        for d in self._decisions.values():
            if d.domain is None:
                columns.append(d.values)
            elif points is None:
                columns.append(tuple(d.domain.points(int(d.count))))
            else:
                columns.append(tuple(d.domain.points(points)))
        return self._product(columns)

    def _product(self, columns: list[tuple[Any, ...]]) -> Iterator[Arch]:
        labels = list(self._decisions)
        for combo in itertools.product(*columns):
            yield dict(zip(labels, combo))

    def validate(self, arch: Mapping[str, object]) -> Arch:
        """Returns ``arch`` in canonical form (builtin types, lists for tuples, space order).

        Raises:
            ArchitectureError: ``arch`` is not a mapping, names a label the space lacks, misses a
                label, or gives a value that is not among a label's candidates (or outside its
                range).
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
            expected = {k: _expected(self._decisions[k]) for k in missing}
            raise ArchitectureError(f"missing label(s) {missing}; expected values {expected}")
        out: Arch = {}
        for label, d in self._decisions.items():
            out[label] = d.canonical(arch[label])
        return out

    def index_of(self, arch: Mapping[str, object]) -> list[int]:
        """Returns the candidate position of each decision's value, in space order.

        Raises:
            SpaceError: a decision is a range (it has no positions).
        """
        arch = self.validate(arch)
        return [d.index(arch[d.label]) for d in self._decisions.values()]

    def from_index(self, positions: Sequence[int]) -> Arch:
        """Returns the architecture whose decision ``i`` takes candidate ``positions[i]``.

        Raises:
            SpaceError: a decision is a range (it has no positions).
        """
        for d in self._decisions.values():
            d._listed("from_index()")
        if len(positions) != len(self._decisions):
            raise ArchitectureError(
                f"expected {len(self._decisions)} positions, got {len(positions)}"
            )
        return {d.label: d.values[p] for d, p in zip(self._decisions.values(), positions)}

    def arch_id(self, arch: Mapping[str, object]) -> str:
        """Returns the id of ``arch`` after validating it against this space."""
        return self.id_of(self.validate(arch))

    def id_of(self, arch: Mapping[str, object]) -> str:
        """Returns the id of an architecture that :meth:`validate` returned: the hash of its
        canonical JSON. A space in which several architectures build one network (edit
        histories) overrides it, so that they share one id; the engine asks this."""
        return arch_id(arch)

    def edits(self, arch: Mapping[str, object]) -> list[dict[str, Any]]:
        """Returns the one-decision changes of ``arch``: ``{"op": "set", "label", "value"}``
        for every other listed candidate, and for a range every other of 5 evenly spread
        points."""
        arch = self.validate(arch)
        out: list[dict[str, Any]] = []
        for d in self._decisions.values():
            values = d.values if d.domain is None else tuple(d.domain.points(5))
            out += [
                {"op": "set", "label": d.label, "value": v} for v in values if v != arch[d.label]
            ]
        return out

    def extend(self, arch: Mapping[str, object], edit: Mapping[str, object]) -> Arch:
        """Returns ``arch`` changed by one edit of :meth:`edits`, validated.

        Raises:
            ArchitectureError: the edit is not a ``set`` of a label of this space.
        """
        if edit.get("op") != "set" or edit.get("label") not in self._decisions:
            raise ArchitectureError(
                f"a flat space's edit is {{'op': 'set', 'label': one of "
                f"{list(self._decisions)}, 'value': ...}}, got {dict(edit)!r:.120}"
            )
        return self.validate({**arch, str(edit["label"]): edit.get("value")})

    def edit_key(self, edit: Mapping[str, object]) -> str:
        """Returns the kind of an edit, what a policy over edits prefers: here its label."""
        return str(edit.get("label"))

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Returns the space as plain JSON-able data."""
        return {"decisions": [d.to_dict() for d in self._decisions.values()]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Returns the space that :meth:`to_dict` produced."""
        return cls([Decision.from_dict(d) for d in data["decisions"]])

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> SearchSpace:
        """Returns the space a run file writes as a mapping label -> candidates: a list of
        values (a value choice), ``{uniform: [low, high], log: bool}`` (a float range) or
        ``{integer: [low, high], step: int, log: bool}`` (an integer range).

        Raises:
            SpaceError: a label whose spec is none of these; the message shows the forms.
        """
        forms = (
            "a list of values, {uniform: [low, high], log: true} or "
            "{integer: [low, high], step: 1, log: false}"
        )
        decisions = []
        for label, item in spec.items():
            if isinstance(item, (list, tuple)):
                decisions.append(Decision(str(label), "value", tuple(item)))
                continue
            keys = set(item) if isinstance(item, Mapping) else set()
            kind = "uniform" if "uniform" in keys else "integer" if "integer" in keys else None
            bounds = item.get(kind) if kind is not None else None
            extra = keys - {kind, "log", "step"}
            if not isinstance(bounds, (list, tuple)) or len(bounds) != 2 or extra:
                raise SpaceError(f"space label {label!r}: {item!r} is not {forms}")
            log = bool(item.get("log", False))
            if kind == "uniform":
                if "step" in item:
                    raise SpaceError(f"space label {label!r}: uniform takes no step; {forms}")
                decisions.append(
                    Decision(str(label), "float", (), Range(bounds[0], bounds[1], log))
                )
            else:
                step = item.get("step", 1)
                domain = Range(bounds[0], bounds[1], log, True, step)
                decisions.append(Decision(str(label), "int", (), domain))
        return cls(decisions)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SearchSpace) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(canonical_json(self.to_dict()))
