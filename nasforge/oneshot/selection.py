"""How a single-path search chooses its architecture among candidates scored with inherited
weights: SPOS's and few-shot's evolution, and ENAS's best of its controller's samples.

Each candidate is extracted from its supernet (its path activated, batch norm recalibrated on
``bn_batches`` training batches) and scored on the whole validation split. ``selection``
(a :class:`~nasforge.oneshot.SearchConfig` field) says what is compared:

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

    sel = Selection(net.space, lambda arch: net, train, val, cfg)
    best, history = evolve(sel, cfg)                 # history: (arch, val accuracy)
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

from nasforge.errors import ConfigError
from nasforge.oneshot.common import SELECTIONS, Batch, activate, recalibrate_bn
from nasforge.oneshot.supernet import Supernet
from nasforge.proxies import score_arch
from nasforge.space.search_space import Arch, arch_id
from nasforge.strategy import RegularizedEvolution
from nasforge.weightsharing import accuracy_and_loss

__all__ = [
    "SELECTIONS",
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


def share_below(value: float, reference: Sequence[float]) -> float:
    """Returns the share of ``reference`` strictly below ``value`` (0 for an empty one)."""
    return sum(r < value for r in reference) / len(reference) if reference else 0.0


def proxy_score(space: Any, arch: Arch, train: Batch, cfg: Any) -> float:
    """Returns ``cfg.selection_proxy`` of ``arch`` at initialisation (weights seeded with the
    search's seed; the first ``batch_size`` training examples)."""
    x, y = train[0][: cfg.batch_size], train[1][: cfg.batch_size]
    return score_arch(space, arch, cfg.selection_proxy, x, y, cfg.seed)


class Selection:
    """Scores candidate architectures of ``space`` (the model space) for a search's final
    choice (see the module docstring); ``net_for(arch)`` is the trained supernet that holds
    ``arch`` (one supernet, or a few-shot supernet's sub-supernet). A candidate is scored once
    per selection.

    Raises:
        ConfigError: a bad selection setting of ``cfg`` (:meth:`SearchConfig.check_selection`).
    """

    def __init__(
        self, space: Any, net_for: Callable[[Arch], Supernet], train: Batch, val: Batch, cfg: Any
    ) -> None:
        cfg.check_selection()
        self.space, self.net_for, self.cfg = space, net_for, cfg
        self.train, self.val = train, val
        self._inherited: dict[str, tuple[float, float]] = {}
        self._proxy: dict[str, float] = {}
        self._reference: tuple[list[float], list[float]] | None = None

    def inherited(self, arch: Arch) -> tuple[float, float]:
        """Returns (validation accuracy, validation loss) of ``arch`` with inherited weights
        and recalibrated batch norm."""
        key = arch_id(arch)
        if key not in self._inherited:
            net, cfg = self.net_for(arch), self.cfg
            activate(net, arch)
            recalibrate_bn(net, self.train, cfg.batch_size, cfg.bn_batches, cfg.seed)
            self._inherited[key] = accuracy_and_loss(net, self.val, 1024)
        return self._inherited[key]

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
            archs = [space.sample(rng) for _ in range(self.cfg.selection_reference)]
            self._reference = ([-self.inherited(a)[1] for a in archs],
                               [self.proxy(a) for a in archs])  # fmt: skip
        return self._reference

    def value(self, arch: Arch) -> float:
        """Returns what the choice compares for ``arch`` (higher is better)."""
        acc, loss = self.inherited(arch)
        if self.cfg.selection == "accuracy":
            return acc
        if self.cfg.selection == "loss":
            return -loss
        ref_loss, ref_proxy = self.reference()
        return (share_below(-loss, ref_loss) + share_below(self.proxy(arch), ref_proxy)) / 2


def check(space: Any, train: Batch, cfg: Any) -> None:
    """Raises ConfigError before any training when ``cfg.selection`` is ``"hybrid"`` and its
    proxy cannot score ``space``'s default architecture (e.g. SynFlow's all-ones input on a
    model that takes token ids), naming the setting that avoids it."""
    if cfg.selection != "hybrid":
        return
    try:
        proxy_score(space, space.search_space().default(), train, cfg)
    except Exception as exc:  # any failure of a user's model under the proxy: say what to set
        raise ConfigError(
            f"selection 'hybrid' compares candidates by the zero-cost proxy "
            f"{cfg.selection_proxy!r}, which fails on this space ({type(exc).__name__}: {exc}); "
            "set selection: loss (or another selection_proxy)"
        ) from exc


def evolve(
    selection: Selection, cfg: Any, allowed: Callable[[Arch], bool] | None = None
) -> tuple[Arch, list[tuple[Arch, float]]]:
    """Returns the architecture of the best ``selection`` value found by a regularized evolution
    (``cfg``'s population, cycles, tournament size and seed, driven by ask/tell as an
    experiment drives it) and every architecture it scored, with its validation accuracy.

    A cycle is one ask of an architecture ``allowed`` accepts (asked again, it is scored
    once). One it rejects is told ``-1e9``, never scored and not counted, so a constrained
    search spends all ``cfg.cycles`` on architectures within its constraint; at most
    ``REJECTED_ASKS`` times ``cfg.cycles`` rejected asks are made.

    Raises:
        ConfigError: ``allowed`` rejected every architecture asked.
    """
    space = selection.space.search_space()
    strategy = RegularizedEvolution(cfg.population, min(cfg.sample_size, cfg.population),
                                    cfg.seed)  # fmt: skip
    strategy.setup(space)
    told: dict[str, float] = {}
    history: list[tuple[Arch, float]] = []
    best: tuple[float, Arch] | None = None
    cycles = rejected = 0
    while cycles < cfg.cycles and rejected < REJECTED_ASKS * cfg.cycles:
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
                cfg.selection, len(history), rejected, best[0])  # fmt: skip
    return best[1], history


def pick(selection: Selection, candidates: Sequence[Arch]) -> tuple[Arch, list[tuple[Arch, float]]]:
    """Returns the candidate of the best ``selection`` value (the first of equals) and every
    distinct candidate with its validation accuracy."""
    distinct = list({arch_id(a): a for a in candidates}.values())
    values = [selection.value(a) for a in distinct]
    i = max(range(len(distinct)), key=lambda j: values[j])
    return distinct[i], [(a, selection.inherited(a)[0]) for a in distinct]
