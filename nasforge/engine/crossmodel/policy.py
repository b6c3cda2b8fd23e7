"""Which cross-model optimization applies, and whether to keep it: pure logic, no torch.

The torch side describes models and evaluators as plain data; the decisions are made here.

    shared_prefix   the longest run of leading top-level modules that every model holds frozen,
                    stateless, with the same weights and the same decisions: the part operator
                    batching runs once per batch
    detect          from evaluator traits, the trials' data specs and the options, the
                    optimizations that apply, each with the reason (plain strings)
    Introspection   Gandiva's introspective rule: time the merged and the independent way on
                    the same work, keep merged only while it is faster

Invariants: every function here is deterministic in its inputs; ``shared_prefix`` never counts
a module that is trainable, stateful or different in any model; an ``Introspection`` decides
``merged`` only after it has a timing of each way and merged was faster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ChildRecord",
    "shared_prefix",
    "OPTIMIZATIONS",
    "Applied",
    "detect",
    "Introspection",
    "options",
]

#: The optimizations, by the option name that turns each off.
OPTIMIZATIONS = ("supergraph", "opbatch", "shareddata")


@dataclass(frozen=True)
class ChildRecord:
    """Returns nothing; one top-level module of a frozen model, described as plain data."""

    name: str  # its attribute name in the model
    frozen: bool  # no parameter requires a gradient (the freeze record)
    stateful: bool  # changes in training (batch norm in train mode) or is random (dropout)
    fingerprint: str  # a digest of its structure and its parameter and buffer values
    decisions: tuple[tuple[str, str], ...] = ()  # (label, repr(value)) of decisions inside it


def shared_prefix(models: Sequence[Sequence[ChildRecord]]) -> int:
    """Returns how many leading top-level modules every model shares frozen: same name, same
    fingerprint, same decisions, frozen and stateless in each (0 with fewer than 2 models)."""
    if len(models) < 2:
        return 0
    n = 0
    for column in zip(*models):
        first = column[0]
        same = all(
            c.name == first.name
            and c.fingerprint == first.fingerprint
            and c.decisions == first.decisions
            for c in column
        )
        if not same or not all(c.frozen and not c.stateful for c in column):
            break
        n += 1
    return n


@dataclass(frozen=True)
class Applied:
    """Returns nothing; one optimization the engine applies, and why (recorded in the run)."""

    name: str
    reason: str


def options(value: Any) -> dict[str, bool]:
    """Returns ``{optimization: on}`` from the ``crossmodel`` option: True/None (all on),
    False (all off), or a mapping of some names to booleans (the rest on).

    Raises:
        ValueError: an unknown name or a non-boolean value (the engine turns it into a
            ConfigError).
    """
    if value is None or value is True:
        return dict.fromkeys(OPTIMIZATIONS, True)
    if value is False:
        return dict.fromkeys(OPTIMIZATIONS, False)
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(OPTIMIZATIONS))
        if unknown:
            raise ValueError(f"crossmodel option names {unknown}; expected some of {OPTIMIZATIONS}")
        bad = {k: v for k, v in value.items() if not isinstance(v, bool)}
        if bad:
            raise ValueError(f"crossmodel options must be True or False, got {bad}")
        return {k: bool(value.get(k, True)) for k in OPTIMIZATIONS}
    raise ValueError(
        f"crossmodel must be True, False or a mapping such as {{'opbatch': False}}, got {value!r}"
    )


def detect(
    traits: Mapping[str, Any], enabled: Mapping[str, bool], concurrency: int
) -> list[Applied]:
    """Returns the optimizations that apply to a search, from its evaluator's traits
    (``shares_weights``: bool, ``data_spec``: plain data or None, ``frozen_prefix``: bool),
    the enabled options and the executor's concurrency.

    Invariants: ``supergraph`` excludes the others (weight-sharing trials run one at a time);
    a disabled optimization is never returned.
    """
    out: list[Applied] = []
    if traits.get("shares_weights"):
        if enabled.get("supergraph"):
            out.append(
                Applied(
                    "supergraph",
                    "the evaluator trains every architecture from shared weights: one "
                    "in-memory super-graph activated per trial replaces the checkpoint",
                )
            )
        return out
    if traits.get("frozen_prefix") and enabled.get("opbatch"):
        out.append(
            Applied(
                "opbatch",
                "the models share a frozen prefix: it runs once per batch and the trainable "
                "parts of a group of trials train stacked",
            )
        )
    elif traits.get("data_spec") is not None and enabled.get("shareddata") and concurrency > 1:
        out.append(
            Applied(
                "shareddata",
                f"{concurrency} concurrent trials declare one data spec "
                f"{traits['data_spec']}: one producer feeds them through shared memory",
            )
        )
    return out


@dataclass
class Introspection:
    """Returns, from :meth:`choice`, which way to run the next unit of work: ``independent``
    first, then ``merged``, then the faster of the two by seconds per unit of work.

    Invariants: each way is tried at least ``trials`` times before a verdict; the verdict is
    ``merged`` only when its mean seconds per unit are below ``margin`` times independent's.
    """

    trials: int = 1
    margin: float = 1.0
    seconds: dict[str, list[float]] = field(
        default_factory=lambda: {"independent": [], "merged": []}
    )

    def choice(self) -> str:
        """Returns ``independent`` or ``merged``: the next way to measure, or the verdict."""
        for way in ("independent", "merged"):
            if len(self.seconds[way]) < self.trials:
                return way
        return "merged" if self.speedup() * self.margin > 1.0 else "independent"

    def add(self, way: str, seconds_per_unit: float) -> None:
        """Records one timing of ``way``."""
        self.seconds[way].append(seconds_per_unit)

    def decided(self) -> bool:
        """Returns whether both ways have been measured enough for a verdict."""
        return all(len(v) >= self.trials for v in self.seconds.values())

    def speedup(self) -> float:
        """Returns independent's mean seconds per unit over merged's (nan before a verdict)."""
        if not self.decided():
            return float("nan")
        ind, mer = (sum(v) / len(v) for v in (self.seconds["independent"], self.seconds["merged"]))
        return ind / mer if mer > 0 else float("inf")
