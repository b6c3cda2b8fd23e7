"""What the first stage of a two-stage search hands the second: its settings, and the choice of
K architectures from the candidates it scored. Pure (no torch).

    candidates  every architecture stage 1 scored, with its score (higher is better), its
                sizes (``params``, ``flops``) and the key of the function it computes
                (``function_key``: a space that knows when two architectures compute one
                function says so; otherwise the space's id of the architecture)
    choose      best score first (ties: the order scored); an architecture over the budget
                is left out, and so is one whose function a better one already computes;
                the first K - ``by_size`` that remain, then the largest (FLOPs, then
                parameters) of the rest up to K, are the shortlist: ``by_size`` slots hedge
                a ranking that sizes would have beaten (docs/oneshot.md measures when)

Invariants: the shortlist holds at most K architectures, no two with one function key, none
over the budget, in stage 1's order; the same candidates give the same shortlist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nasforge.errors import ConfigError
from nasforge.oneshot.budget import BUDGET_SIZES, check_budget, within

__all__ = ["ShortlistSettings", "Candidate", "BUDGET_SIZES", "choose", "within", "function_key"]


@dataclass
class ShortlistSettings:
    """Returns nothing; how stage 1 proposes the shortlist (a run file's ``shortlist:``).

    Raises:
        ConfigError: (:meth:`check`) a bad K, pool, budget or seed.
    """

    # a one-shot algorithm (fairnas, spos, darts, nasb, fewshot, ...), a proxy (synflow,
    # naswot, ..., and the trivial params, flops) or random. FairNAS: on the MNIST-1D tables
    # its supernet ranked candidates within a budget as well as FLOPs (Kendall tau 0.52 and
    # 0.38 against 0.52 and 0.37), SPOS's at 0.42 and 0.36 for the same steps (docs/oneshot.md)
    algorithm: str = "fairnas"
    # architectures trained in stage 2: 6, its best 2 trained again from another seed (the
    # two-stage search's ``confirm``), is the 8 trainings 8 trained once would take
    k: int = 6
    # architectures stage 1 scores: uniform samples (a one-shot search adds those it scored
    # itself and its pick, and samples only the rest)
    pool: int = 64
    budget: dict[str, float] | None = None  # {"params": 5e4, "flops": 2e6}: none over it
    seed: int = 0  # the pool's draws
    # of the k, how many go to the largest candidates (FLOPs, then parameters) that stage 1's
    # scores did not already take; None: half of k when stage 1 ranks by a score (one-shot,
    # proxy), none for random draws (TwoStageSearch resolves it)
    by_size: int | None = None
    # the one-shot algorithm's settings, flat (epochs, batch_size, cycles, selection, ...)
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Any] | ShortlistSettings | None) -> ShortlistSettings:
        """Returns the settings of a run file's ``shortlist:`` (its other keys are the
        one-shot algorithm's settings), or ``spec`` itself; None gives the defaults.

        Raises:
            ConfigError: ``spec`` is not a mapping, or a setting is bad.
        """
        if isinstance(spec, ShortlistSettings):
            spec.check()
            return spec
        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"shortlist must be a mapping such as {{algorithm: spos, k: 16}}, got {spec!r:.80}"
            )
        own = {"algorithm", "k", "pool", "budget", "seed", "by_size"}
        rest = {k: v for k, v in spec.items() if k not in own and k != "settings"}
        out = cls(**{k: v for k, v in spec.items() if k in own},
                  settings={**dict(spec.get("settings") or {}), **rest})  # fmt: skip
        out.check()
        return out

    def check(self) -> None:
        """Returns None when every setting is valid on its own.

        Raises:
            ConfigError: K or the pool not a positive int, a pool smaller than K, a budget
                that bounds something else than params or flops or by no positive number, a
                seed that is not an int.
        """
        for name in ("k", "pool", "seed", "by_size"):
            v, low = getattr(self, name), 0 if name in ("seed", "by_size") else 1
            if v is None and name == "by_size":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"shortlist {name} must be an int >= {low}, got {v!r}")
        if self.pool < self.k:
            raise ConfigError(
                f"shortlist pool ({self.pool}) is smaller than k ({self.k}); stage 1 scores "
                "the pool and keeps k of it: give pool >= k"
            )
        if self.by_size is not None and self.by_size > self.k:
            raise ConfigError(
                f"shortlist by_size ({self.by_size}) is more than k ({self.k}): it is how many "
                "of the k go to the largest candidates"
            )
        if not isinstance(self.algorithm, str):
            raise ConfigError(f"shortlist algorithm must be a name, got {self.algorithm!r}")
        check_budget(self.budget)  # the one check of a budget, a one-shot search's too
        if "latency" in (self.budget or {}):
            raise ConfigError(
                "a shortlist's budget bounds params and flops; a latency budget belongs to a "
                "one-shot search (its supernet's latency table): run stage 1's algorithm with "
                "budget: {latency: ms}, or bound params or flops here"
            )

    def data(self) -> dict[str, Any]:
        """Returns the settings as JSON-able data (the record's, and :meth:`from_mapping`'s)."""
        return {"algorithm": self.algorithm, "k": self.k, "pool": self.pool,
                "budget": None if self.budget is None else dict(self.budget),
                "seed": self.seed, "by_size": self.by_size,
                "settings": dict(self.settings)}  # fmt: skip


@dataclass
class Candidate:
    """Returns nothing; one architecture stage 1 scored."""

    arch: dict[str, Any]
    arch_id: str
    key: str  # the function it computes (:func:`function_key`)
    score: float  # higher is better
    sizes: dict[str, float]  # params, flops

    def data(self) -> dict[str, Any]:
        """Returns the candidate as a row of the recorded shortlist."""
        return {"arch": self.arch, "arch_id": self.arch_id, "score": self.score, **self.sizes}


def function_key(space: Any, arch: Mapping[str, Any]) -> str:
    """Returns the key of the function ``arch`` computes in ``space``: the space's own
    ``function_key(arch)`` when it has one (the benchmark cell's: dead ends dropped, equal
    functions collapsed), else the id its search space gives the architecture (one network,
    one id)."""
    own: Callable[[Mapping[str, Any]], str] | None = getattr(space, "function_key", None)
    if callable(own):
        return str(own(arch))
    return space.search_space().id_of(arch)


def choose(
    candidates: Sequence[Candidate],
    k: int,
    budget: Mapping[str, float] | None,
    by_size: int = 0,
) -> list[Candidate]:
    """Returns the shortlist: the first ``k - by_size`` of ``candidates``, best score first
    (ties in the order given), then the largest of the rest up to ``k``; all within
    ``budget`` and one per function key (see the module docstring)."""
    by_score = sorted(range(len(candidates)), key=lambda i: -candidates[i].score)
    largest = sorted(
        range(len(candidates)),
        key=lambda i: (-candidates[i].sizes["flops"], -candidates[i].sizes["params"]),
    )
    seen: set[str] = set()
    out: list[Candidate] = []
    for order, up_to in ((by_score, k - by_size), (largest, k)):
        for i in order:
            if len(out) >= up_to:
                break
            c = candidates[i]
            if c.key in seen or not within(c.sizes, budget):
                continue
            seen.add(c.key)
            out.append(c)
    return out
