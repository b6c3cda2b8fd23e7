"""How a single-path search chooses its architecture among candidates scored with inherited
weights: SPOS's and few-shot's evolution, and ENAS's best of its controller's samples.

Each candidate is extracted from its supernet (its path activated, batch norm recalibrated on
``bn_batches`` training batches) and scored on the whole validation split. ``selection``
(a field of :class:`SelectionSettings`) says what is compared:

    accuracy  the validation accuracy (SPOS's paper)
    loss      minus the validation cross-entropy: the same weights, a finer score (accuracies
              of 1,000 examples tie in steps of 0.001)
    hybrid    (the default) a rank aggregation of the supernet and a zero-cost proxy
              (``selection_proxy``, SynFlow by default) on one fixed scale: the mean of the
              share of ``selection_reference`` uniform architectures whose supernet loss the
              candidate beats and the share whose proxy score it beats. The reference is drawn
              and scored once per search, with the search's seed.

Why the hybrid is the default: shared weights favour the cells they train best, which are not
the ones that train best alone, and a zero-cost proxy's preference for capacity corrects that
where the supernet's loss is already a good tie-breaker. The hybrid's resolution is one
reference architecture, so a small reference leaves the best candidates tied at the top.
docs/oneshot.md ("How a single-path search chooses") has the ranking benchmark's figures.

The recorded figure of every candidate stays its validation accuracy (what a trial reports);
only the choice uses ``selection``.

On several ranks (a data-parallel search), scoring is split across them: candidates known in
advance (the hybrid's reference sample, the evolution's random first population, ENAS's
samples) are dealt out whole, one rank scoring each, and gathered (:meth:`Selection.prefetch`:
the values of one process, bitwise); a candidate known only once the one before was told (an
evolution's child) is scored on every rank's shard of the validation split, the sums added
(the same accuracy; the loss up to the order of float sums). Every rank then holds every
score and makes the same choice.

    sel = Selection(net.space, lambda arch: net, train, val, cfg)
    best, history = evolve(sel, cfg)                 # history: (arch, val accuracy)

``cfg`` is the search's :class:`~nasforge.oneshot.common.SearchConfig`; its ``algo`` (the
settings of SPOS, ENAS or few-shot) extends :class:`SelectionSettings`.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nasforge.errors import ConfigError
from nasforge.oneshot.common import Batch, activate, ranks_of, recalibrate_bn
from nasforge.oneshot.supernet import Supernet
from nasforge.proxies import get_proxy, score_arch
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.space.search_space import Arch, arch_id
from nasforge.strategy import RegularizedEvolution
from nasforge.weightsharing import accuracy_and_loss

__all__ = [
    "SELECTIONS",
    "SelectionSettings",
    "EvolutionSettings",
    "REJECTED",
    "share_below",
    "Selection",
    "proxy_score",
    "check",
    "evolve",
    "pick",
]

logger = logging.getLogger(__name__)
#: what evolution is told of an architecture ``allowed`` rejects (finite, below any score)
REJECTED = -1e9
#: rejected asks an evolution may make, per cycle, before it gives up
REJECTED_ASKS = 100
#: what ``SelectionSettings.selection`` may name
SELECTIONS = ("hybrid", "loss", "accuracy")


@dataclass
class SelectionSettings:
    """Returns nothing; how a single-path search compares candidates with inherited weights
    (see the module docstring): the settings of selection, which the settings of every
    algorithm that selects extend (SPOS's, ENAS's, few-shot's)."""

    # "hybrid" (supernet loss + zero-cost proxy), "loss" or "accuracy" (the SPOS paper's)
    selection: str = "hybrid"
    selection_proxy: str = "synflow"  # the hybrid's zero-cost proxy (nasforge.proxies)
    # uniform architectures that set the hybrid's scale; its resolution is 1 / this, and too
    # few leave the best candidates tied at the top (docs/oneshot.md has the figures)
    selection_reference: int = 200

    def check(self) -> None:
        """Raises ConfigError on a bad selection, proxy or reference size."""
        if self.selection not in SELECTIONS:
            raise ConfigError(
                f"selection must be one of {list(SELECTIONS)} (how candidates with inherited "
                f"weights are compared), got {self.selection!r}"
            )
        get_proxy(self.selection_proxy)
        r = self.selection_reference
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ConfigError(f"selection_reference must be an int >= 1, got {r!r}")


@dataclass
class EvolutionSettings(SelectionSettings):
    """Returns nothing; the settings of a regularized evolution over a trained supernet
    (:func:`evolve`; SPOS's settings, which few-shot's extend), selection's included."""

    population: int = 20
    cycles: int = 60
    sample_size: int = 5  # the tournament (at most ``population``)

    def check(self) -> None:
        """Raises ConfigError on a bad selection setting or evolution size."""
        super().check()
        if self.population < 2 or self.sample_size < 1 or self.cycles < 1:
            raise ConfigError(
                f"evolution needs population >= 2, sample_size >= 1 and cycles >= 1, got "
                f"{self.population}, {self.sample_size} and {self.cycles}"
            )


def settings_of(cfg: Any) -> Any:
    """Returns ``cfg.algo``, the selection settings (and more) of the search's algorithm.

    Raises:
        ConfigError: the algorithm's settings do not extend :class:`SelectionSettings`.
    """
    s = cfg.algo
    if not isinstance(s, SelectionSettings):
        raise ConfigError(
            f"selection needs settings that extend SelectionSettings (SPOS's, ENAS's, "
            f"few-shot's), got {type(s).__name__}"
        )
    return s


def share_below(value: float, reference: Sequence[float]) -> float:
    """Returns the share of ``reference`` strictly below ``value`` (0 for an empty one)."""
    return sum(r < value for r in reference) / len(reference) if reference else 0.0


def proxy_score(space: Any, arch: Arch, train: Batch, cfg: Any) -> float:
    """Returns ``selection_proxy`` of ``arch`` at initialisation (weights seeded with the
    search's seed; the first ``batch_size`` training examples)."""
    x, y = train[0][: cfg.batch_size], train[1][: cfg.batch_size]
    return score_arch(space, arch, settings_of(cfg).selection_proxy, x, y, cfg.seed)


class Selection:
    """Scores candidate architectures of ``space`` (the model space) for a search's final
    choice (see the module docstring); ``net_for(arch)`` is the trained supernet that holds
    ``arch`` (one supernet, or a few-shot supernet's sub-supernet). A candidate is scored once
    per selection.

    Raises:
        ConfigError: a bad selection setting of ``cfg.algo`` (:meth:`SelectionSettings.check`).
    """

    def __init__(
        self, space: Any, net_for: Callable[[Arch], Supernet], train: Batch, val: Batch, cfg: Any
    ) -> None:
        self.settings: SelectionSettings = settings_of(cfg)
        SelectionSettings.check(self.settings)  # its own fields: ``cfg`` may be unchecked
        self.space, self.net_for, self.cfg = space, net_for, cfg
        self.train, self.val = train, val
        self._inherited: dict[str, tuple[float, float]] = {}
        self._proxy: dict[str, float] = {}
        self._reference: tuple[list[float], list[float]] | None = None
        #: the ranks the supernet trained on: scoring is split across them
        self.ranks: Ranks = ranks_of(net_for(space.search_space().default()))

    def _inherited_on(self, arch: Arch, ranks: Ranks) -> tuple[float, float]:
        """Returns (validation accuracy, loss) of ``arch``: its path activated, batch norm
        recalibrated (alike on every rank), the validation split scored across ``ranks``."""
        net, cfg = self.net_for(arch), self.cfg
        activate(net, arch)
        recalibrate_bn(net, self.train, cfg.batch_size, cfg.bn_batches, cfg.seed)
        return accuracy_and_loss(net, self.val, 1024, ranks=ranks)

    def inherited(self, arch: Arch) -> tuple[float, float]:
        """Returns (validation accuracy, validation loss) of ``arch`` with inherited weights
        and recalibrated batch norm (on several ranks: scored on their shards, summed)."""
        key = arch_id(arch)
        if key not in self._inherited:
            self._inherited[key] = self._inherited_on(arch, self.ranks)
        return self._inherited[key]

    def prefetch(self, archs: Sequence[Arch]) -> None:
        """Returns None once every one of ``archs`` is scored (inherited weights, and the
        proxy when the selection is the hybrid): on several ranks, each rank scores whole
        candidates of its share and every rank gathers all the scores (one process leaves them
        to :meth:`inherited` and :meth:`proxy`, in the order the selection asks)."""
        if not self.ranks.distributed:
            return
        todo = list({arch_id(a): a for a in archs if arch_id(a) not in self._inherited}.values())
        if not todo:
            return
        hybrid = self.settings.selection == "hybrid"
        mine = [
            (self._inherited_on(a, ONE), proxy_score(self.space, a, self.train, self.cfg)
             if hybrid else None)
            for a in self.ranks.split(todo)
        ]  # fmt: skip
        for arch, (scores, proxy) in zip(todo, self.ranks.gather(mine, len(todo))):
            self._inherited[arch_id(arch)] = tuple(scores)  # type: ignore[assignment]
            if proxy is not None:
                self._proxy.setdefault(arch_id(arch), proxy)

    def proxy(self, arch: Arch) -> float:
        """Returns :func:`proxy_score` of ``arch`` (computed once per selection)."""
        key = arch_id(arch)
        if key not in self._proxy:
            self._proxy[key] = proxy_score(self.space, arch, self.train, self.cfg)
        return self._proxy[key]

    def reference(self) -> tuple[list[float], list[float]]:
        """Returns the reference sample's minus losses and proxy scores (drawn once, seeded)."""
        if self._reference is None:
            rng = random.Random(self.cfg.seed)
            space = self.space.search_space()
            archs = [space.sample(rng) for _ in range(self.settings.selection_reference)]
            self.prefetch(archs)  # split across ranks when there are several
            self._reference = ([-self.inherited(a)[1] for a in archs],
                               [self.proxy(a) for a in archs])  # fmt: skip
        return self._reference

    def value(self, arch: Arch) -> float:
        """Returns what the choice compares for ``arch`` (higher is better)."""
        acc, loss = self.inherited(arch)
        if self.settings.selection == "accuracy":
            return acc
        if self.settings.selection == "loss":
            return -loss
        ref_loss, ref_proxy = self.reference()
        return (share_below(-loss, ref_loss) + share_below(self.proxy(arch), ref_proxy)) / 2


def check(space: Any, train: Batch, cfg: Any) -> None:
    """Raises ConfigError before any training when ``selection`` is ``"hybrid"`` and its
    proxy cannot score ``space``'s default architecture (e.g. SynFlow's all-ones input on a
    model that takes token ids), naming the setting that avoids it."""
    s = settings_of(cfg)
    if s.selection != "hybrid":
        return
    try:
        proxy_score(space, space.search_space().default(), train, cfg)
    except Exception as exc:  # any failure of a user's model under the proxy: say what to set
        raise ConfigError(
            f"selection 'hybrid' compares candidates by the zero-cost proxy "
            f"{s.selection_proxy!r}, which fails on this space ({type(exc).__name__}: {exc}); "
            "set selection: loss (or another selection_proxy)"
        ) from exc


def evolve(
    selection: Selection, cfg: Any, allowed: Callable[[Arch], bool] | None = None
) -> tuple[Arch, list[tuple[Arch, float]]]:
    """Returns the architecture of the best ``selection`` value found by a regularized evolution
    (``cfg.algo``'s population, cycles and tournament size, the search's seed; driven by
    ask/tell as an experiment drives it) and every architecture it scored, with its validation
    accuracy.

    A cycle is one ask of an architecture ``allowed`` accepts (asked again, it is scored
    once). One it rejects is told ``-1e9``, never scored and not counted, so a constrained
    search spends all ``cycles`` on architectures within its constraint; at most
    ``REJECTED_ASKS`` times ``cycles`` rejected asks are made.

    Raises:
        ConfigError: ``allowed`` rejected every architecture asked.
    """
    s = settings_of(cfg)
    if not isinstance(s, EvolutionSettings):
        raise ConfigError(
            f"evolution needs settings that extend EvolutionSettings (SPOS's, few-shot's), got "
            f"{type(s).__name__}"
        )
    space = selection.space.search_space()
    strategy = RegularizedEvolution(s.population, min(s.sample_size, s.population),
                                    cfg.seed)  # fmt: skip
    strategy.setup(space)
    if selection.ranks.distributed:  # the first population is random: score it in parallel
        ahead = copy.deepcopy(strategy)
        first = [ahead.ask() for _ in range(min(s.population, s.cycles))]
        selection.prefetch([a for a in first if a is not None and (allowed is None or allowed(a))])
    told: dict[str, float] = {}
    history: list[tuple[Arch, float]] = []
    best: tuple[float, Arch] | None = None
    cycles = rejected = 0
    while cycles < s.cycles and rejected < REJECTED_ASKS * s.cycles:
        arch = strategy.ask()
        assert arch is not None  # regularized evolution is never exhausted
        key = arch_id(arch)
        if key not in told:
            if allowed is not None and not allowed(arch):
                told[key] = REJECTED
            else:
                told[key] = selection.value(arch)
                history.append((arch, selection.inherited(arch)[0]))
                if best is None or told[key] > best[0]:
                    best = (told[key], arch)
        if told[key] == REJECTED:
            rejected += 1
        else:
            cycles += 1
        strategy.tell(arch, told[key])
    if best is None:
        raise ConfigError(f"the constraint rejected all {rejected} architectures evolution asked")
    logger.info("evolution by %s: %d evaluations (%d rejected asks), best %.4f",
                s.selection, len(history), rejected, best[0])  # fmt: skip
    return best[1], history


def pick(selection: Selection, candidates: Sequence[Arch]) -> tuple[Arch, list[tuple[Arch, float]]]:
    """Returns the candidate of the best ``selection`` value (the first of equals) and every
    distinct candidate with its validation accuracy."""
    distinct = list({arch_id(a): a for a in candidates}.values())
    selection.prefetch(distinct)  # split across ranks when there are several
    values = [selection.value(a) for a in distinct]
    i = max(range(len(distinct)), key=lambda j: values[j])
    return distinct[i], [(a, selection.inherited(a)[0]) for a in distinct]
