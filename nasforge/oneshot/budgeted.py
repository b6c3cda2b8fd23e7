"""A hard resource budget in a one-shot search: the architectures a search proposes, its
gradient penalty and its final pick, all against the budget given once for the run (the loop
setting ``budget``, :mod:`nasforge.oneshot.budget`).

Sizes are those of :func:`nasforge.proxies.size.arch_size` (each architecture frozen from the
space and counted once, cached by its id), and for a latency budget the milliseconds the
supernet's latency table gives (:func:`nasforge.oneshot.op_latency.arch_latency`: the sum of
the chosen candidates' entries over the layers the frozen network keeps; the table measured
on this machine when the search starts, or given). A table is a model of latency, exact for
the table and additive by construction, so the penalty's first-order estimate below is exact
for it where no layer's presence depends on another decision. Two rules, one per family of algorithm
(``Algorithm.budget_rule``):

    reject    sampling searches (SPOS, few-shot, ENAS, the evolution of their selection) draw
              again an architecture over the budget (:meth:`Budgeted.draw`: at most ``TRIES``
              draws, then the smallest architecture the feasibility check found); evolution
              tells an architecture over the budget a rejection and never scores it; ENAS's
              controller is also penalised for one (its reward minus ``budget_weight`` times
              the excess). Their pick is within the budget by construction.
    project   gradient searches (DARTS, NASB, NASP, ProxylessNAS) add a resource penalty to
              the architecture loss (:meth:`Budgeted.penalty`), and their pick is projected
              into the budget (:meth:`Budgeted.project`).

The penalty. Each decision's candidates get a marginal cost, measured once: the change of
each size when the default architecture takes that candidate instead. Under the
architecture distribution (softmax of each decision's parameters) the expected size is

    E[s_k] = s_k(default) + sum_d sum_i p_d(i) * delta_dk(i)        (k: params, flops)

a differentiable, first-order (additive) estimate, and the penalty is
``budget_weight * sum_k max(0, E[s_k] / limit_k - 1)``: it pushes the distribution towards
the budget and vanishes inside it. Decisions whose values are sets of inputs (an InputChoice
keeping several) have no parameter per value and add no term.

The projection. While the pick is over the budget, the decision whose change lowers its load
(sum of size / limit) the most is changed, to its most preferred (strongest) candidate that
lowers the load: the costliest choice gives way to the next-best cheaper one. Exact sizes
decide; when no single change lowers the load, the smallest architecture found is taken.

Feasibility (:meth:`Budgeted.check`, before any training): the default architecture, then a
greedy descent of the load one decision at a time, then (for spaces of at most
``EXHAUSTIVE`` architectures) every architecture; a budget that none of them meets is one
ConfigError naming the smallest size found.

Invariants: every architecture :meth:`Budgeted.draw` returns and every pick
:meth:`Budgeted.project` returns lies within the budget; sizes never touch the global random
state, so a budget does not change which numbers a seeded search draws for anything else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.oneshot.budget import check_budget, describe, excess, load, within
from nasforge.proxies.size import arch_size
from nasforge.space.search_space import Arch, arch_id

__all__ = ["Budgeted", "TRIES", "EXHAUSTIVE", "budget_of", "draw", "resource_penalty"]

logger = logging.getLogger(__name__)

#: draws a sampler makes for an architecture within the budget before it takes the smallest
TRIES = 1000
#: spaces of at most this many architectures are searched whole when the greedy descent finds
#: none within the budget
EXHAUSTIVE = 4096


class Budgeted:
    """Returns nothing; a budget applied to one space: exact sizes (cached), the feasibility
    check, bounded rejection sampling, the resource penalty and the projection (see the
    module docstring). ``example`` is an input batch (its first item sets the input shape);
    ``weight`` the penalty's weight (``budget_weight``); ``latency`` the milliseconds of an
    architecture (needed by a latency budget: the supernet's table, see the module docstring).

    Raises:
        ConfigError: a malformed budget (:func:`~nasforge.oneshot.budget.check_budget`), a
            latency budget without ``latency``.
    """

    def __init__(
        self,
        space: Any,
        budget: Mapping[str, float],
        example: torch.Tensor,
        weight: float = 1.0,
        latency: Callable[[Mapping[str, Any]], float] | None = None,
    ) -> None:
        checked = check_budget(budget)
        assert checked is not None, "Budgeted needs a budget"
        if "latency" in checked and latency is None:
            raise ConfigError(
                "a latency budget needs the supernet's latency table (a one-shot search attaches "
                "it: measured, or budget_latency_table)"
            )
        self.space, self.budget, self.weight = space, checked, float(weight)
        self.latency = latency
        self.example = example[:1].detach().cpu()
        self._sizes: dict[str, dict[str, float]] = {}
        self._latency: dict[str, float] = {}
        self.smallest: Arch | None = None  # within the budget once check() passed
        self._marginal: tuple[dict[str, float], dict[str, dict[str, list[float]]]] | None = None

    # -- sizes ---------------------------------------------------------------------------------
    def sizes(self, arch: Mapping[str, Any]) -> dict[str, float]:
        """Returns ``{"params", "flops"}`` of ``arch`` (counted once per architecture), and
        its ``latency`` (ms) under a latency budget."""
        key = arch_id(arch)
        if key not in self._sizes:
            self._sizes[key] = arch_size(self.space, arch, self.example)
        if self.latency is None:
            return self._sizes[key]
        if key not in self._latency:
            self._latency[key] = float(self.latency(arch))
        return {**self._sizes[key], "latency": self._latency[key]}

    def forget(self) -> None:
        """Returns None after dropping what the latency table decided (the latencies, the
        penalty's marginal costs, the smallest architecture) and checking the budget again:
        after the table changed (a resume's, rank 0's on several ranks)."""
        if self.latency is None:
            return
        self._latency, self._marginal, self.smallest = {}, None, None
        self.check()

    def fits(self, arch: Mapping[str, Any]) -> bool:
        """Returns whether ``arch`` lies within the budget."""
        return within(self.sizes(arch), self.budget)

    def _load(self, arch: Mapping[str, Any]) -> float:
        return load(self.sizes(arch), self.budget)

    def metrics(self, arch: Mapping[str, Any]) -> dict[str, float]:
        """Returns the pick's sizes and the budget's limits (``budget_params``, ...), the
        figures a run records beside its pick."""
        sizes = self.sizes(arch)
        return {**sizes, **{f"budget_{k}": v for k, v in self.budget.items()}}

    # -- feasibility ---------------------------------------------------------------------------
    def check(self) -> None:
        """Returns None once an architecture within the budget is known (:attr:`smallest`).

        Raises:
            ConfigError: no architecture tried meets the budget (the default, a greedy
                descent of the load and, in a space of at most ``EXHAUSTIVE``
                architectures, every one); the message names the smallest found.
        """
        ss = self.space.search_space()
        arch: Arch = ss.default()
        tried = "the default architecture and a greedy descent"
        while not self.fits(arch):
            step = self._cheapest_change(arch)
            if step is None:
                break
            arch = step
        if not self.fits(arch) and ss.size <= EXHAUSTIVE:
            arch = min(ss.grid(), key=self._load)
            tried = f"every one of the space's {ss.size} architectures"
        if not self.fits(arch):
            raise ConfigError(
                f"no architecture of the space meets the budget {self.budget}: the smallest "
                f"found ({tried}) has {describe(self.sizes(arch), self.budget)}; raise the "
                "budget above it or search a smaller space"
            )
        self.smallest = arch

    def _cheapest_change(self, arch: Arch) -> Arch | None:
        """Returns ``arch`` with the one decision changed that lowers its load the most, or
        None when no change lowers it."""
        here = self._load(arch)
        lower = [(lv, cand) for _, _, cand, lv in self._changes(arch) if lv < here]
        return min(lower, key=lambda t: t[0])[1] if lower else None

    def _changes(
        self, arch: Arch, canonical: bool = False
    ) -> Iterator[tuple[str, int, Arch, float]]:
        """Yields (a decision's label, the index of a value, ``arch`` with that decision set
        to that value, its load) for every single change of ``arch``; with ``canonical``, each
        changed architecture in the space's canonical form (:meth:`_canonical`)."""
        for d in self.space.search_space().decisions:
            for j, v in enumerate(d.values):
                if v == arch[d.label]:
                    continue
                cand = {**arch, d.label: v}
                if canonical:
                    cand = self._canonical(cand)
                yield d.label, j, cand, self._load(cand)

    # -- rejection -----------------------------------------------------------------------------
    def draw(self, sample: Callable[[], Arch]) -> Arch:
        """Returns the first of at most ``TRIES`` architectures ``sample()`` draws that lies
        within the budget, else (a budget the sampler rarely meets) the smallest known."""
        for _ in range(TRIES):
            arch = sample()
            if self.fits(arch):
                return arch
        assert self.smallest is not None, "check() runs before any draw"
        logger.warning("budget %s: %d draws all over it; taking the smallest architecture %s",
                       self.budget, TRIES, arch_id(self.smallest))  # fmt: skip
        return dict(self.smallest)

    def penalty_of(self, arch: Mapping[str, Any]) -> float:
        """Returns ``budget_weight`` times how far ``arch`` lies over the budget (0 within)."""
        return self.weight * excess(self.sizes(arch), self.budget)

    # -- penalty -------------------------------------------------------------------------------
    def marginal(self) -> tuple[dict[str, float], dict[str, dict[str, list[float]]]]:
        """Returns (the default architecture's sizes, size -> label -> the change of that
        size per candidate of the decision, the default's own 0), measured once."""
        if self._marginal is None:
            ss = self.space.search_space()
            base_arch = ss.default()
            base = self.sizes(base_arch)
            deltas: dict[str, dict[str, list[float]]] = {k: {} for k in self.budget}
            for d in ss.decisions:
                if d.kind == "input" and isinstance(d.values[0], list):
                    continue  # sets of inputs: no parameter per value
                rows = [self.sizes({**base_arch, d.label: v}) for v in d.values]
                for k in self.budget:
                    deltas[k][d.label] = [r[k] - base[k] for r in rows]
            self._marginal = (base, deltas)
        return self._marginal

    def penalty(self, net: Any) -> torch.Tensor:
        """Returns ``budget_weight * sum_k max(0, E[s_k] / limit_k - 1)``, differentiable in
        the supernet's architecture parameters (softmax of each decision's)."""
        base, deltas = self.marginal()
        total = None
        for k, limit in self.budget.items():
            expected: Any = base[k]
            for label, row in deltas[k].items():
                i = net.key_of.get(label)
                if i is None:
                    continue
                alpha = net.arch_params[i]
                if alpha.numel() != len(row):
                    continue
                p = torch.softmax(alpha, dim=0)
                expected = expected + (p * torch.tensor(row, dtype=p.dtype, device=p.device)).sum()
            if not isinstance(expected, torch.Tensor):
                continue
            term = torch.relu(expected / limit - 1.0)
            total = term if total is None else total + term
        if total is None:  # nothing the parameters change: no gradient to give
            return torch.zeros(())
        return self.weight * total

    # -- projection ----------------------------------------------------------------------------
    def _preference(self, net: Any, label: str, values: tuple[Any, ...]) -> list[float]:
        """Returns how strongly the supernet prefers each value of decision ``label`` (its
        algorithm's strength of the decision's parameters; a set of inputs: the sum of its
        inputs'; 0 each where the supernet holds no parameter per value)."""
        i = getattr(net, "key_of", {}).get(label)
        if i is None:
            return [0.0] * len(values)
        s = net.algorithm.strength(net.arch_params[i].detach().cpu()).tolist()
        if len(s) == len(values):
            return [float(x) for x in s]
        if values and isinstance(values[0], list):
            return [float(sum(s[j] for j in v)) for v in values]
        return [0.0] * len(values)

    def project(self, net: Any, arch: Mapping[str, Any]) -> Arch:
        """Returns ``arch`` within the budget: itself when it fits, else changed one decision
        at a time (the one whose change lowers the load the most, to its most preferred
        candidate that lowers it) until it fits, or the smallest known architecture; then
        filled back up to the budget (:meth:`_fill`). Where the space says which ops are
        dead (its ``canonical_arch(arch)``: the same function, ops whose input is always
        zero set to their empty candidate), the projection measures that form: on MNIST-1D
        a DARTS pick projected to exactly the budget held it in dead ops, the same function
        as the empty cell (424 parameters of a budget of 1,576)."""
        out: Arch = dict(arch)
        if self.fits(out):
            return out
        before = dict(out)
        ss = self.space.search_space()
        prefs = {d.label: self._preference(net, d.label, d.values) for d in ss.decisions}
        while not self.fits(out):
            here = self._load(out)
            # per decision, its most preferred candidate that lowers the load (and that load)
            lowering: dict[str, tuple[float, Any, float]] = {}
            for label, j, cand, lv in self._changes(out):
                if lv < here and (label not in lowering or prefs[label][j] > lowering[label][0]):
                    lowering[label] = (prefs[label][j], cand[label], lv)
            if not lowering:
                assert self.smallest is not None, "check() runs before a projection"
                out = dict(self.smallest)
                break
            # the decision whose change saves the most (the first such, in the space's order)
            label, (_, value, _) = min(lowering.items(), key=lambda t: t[1][2])
            out[label] = value
        out = self._fill(self._canonical(out), prefs)
        logger.info("budget %s: pick %s (%s) projected to %s (%s)", self.budget, arch_id(before),
                    describe(self.sizes(before), self.budget), arch_id(out),
                    describe(self.sizes(out), self.budget))  # fmt: skip
        return ss.validate(out)

    def _canonical(self, arch: Arch) -> Arch:
        """Returns the space's ``canonical_arch(arch)`` when it has one, else ``arch``."""
        own = getattr(self.space, "canonical_arch", None)
        return dict(own(arch)) if callable(own) else arch

    def _fill(self, arch: Arch, prefs: dict[str, list[float]]) -> Arch:
        """Returns ``arch`` (within the budget) grown while it stays within: each step takes
        the single change that raises the load and still fits, to the candidate the supernet
        prefers most (``prefs``; the larger load on a tie). The descent steps by whole
        candidates, and the one that saves the most overshoots: on MNIST-1D a DARTS pick of
        3,520 parameters under a budget of 1,648 ended at 424 to 1,216, below every table
        row within the budget for the smallest (20th percentile on both tables)."""
        out = dict(arch)
        while True:
            here = self._load(out)
            grown = [
                ((prefs[label][j], lv), cand)
                for label, j, cand, lv in self._changes(out, canonical=True)  # dead ops: nothing
                if lv > here and self.fits(cand)
            ]
            if not grown:
                return out
            out = max(grown, key=lambda t: t[0])[1]


def budget_of(net: Any) -> Budgeted | None:
    """Returns the budget a supernet searches under (its ``budget``), None without one."""
    b = getattr(net, "budget", None)
    return b if isinstance(b, Budgeted) else None


def draw(net: Any, sample: Callable[[], Arch]) -> Arch:
    """Returns ``sample()``, drawn again while over the supernet's budget (see
    :meth:`Budgeted.draw`); ``sample()`` itself when the search has no budget."""
    b = budget_of(net)
    return sample() if b is None else b.draw(sample)


def resource_penalty(net: Any, share: float = 1.0) -> torch.Tensor | None:
    """Returns this rank's part (``share`` of the batch) of the supernet's resource penalty,
    or None when it searches without a budget."""
    b = budget_of(net)
    return None if b is None else share * b.penalty(net)
