"""Stage 1 of a two-stage search: what scores the candidates the shortlist is chosen from.

    one-shot  any one-shot algorithm (``fairnas``, the default; ``spos``, ``fewshot``,
              ``darts``, ``nasb``, ...) trains its supernet into the run's record, exactly as a
              one-shot run does (progress rows, a checkpoint after each epoch, so a kill
              resumes bitwise), for the shortlist's ``epochs``, else for the one-shot default
              or :data:`FEW_SUPERNET_STEPS` weight steps, whichever is longer; then every
              architecture it scored on the way, its pick and uniform samples up to ``pool``
              are scored by their validation accuracy with the supernet's weights (batch norm
              recalibrated on training batches)
    proxy     a zero-cost proxy (``synflow``, ``naswot``, ...) or a size (``params``,
              ``flops``): ``pool`` uniform samples, scored at initialisation on the first
              training batch
    random    ``pool`` uniform samples in the order drawn (the floor every rule must beat)

Each is a :class:`Proposer`; :func:`get_proposer` builds the one a name means. Uniform
samples are drawn with the shortlist's seed, each architecture once.
"""

from __future__ import annotations

import abc
import logging
import math
import random
from pathlib import Path
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.oneshot.algorithms import algorithm_names, get_algorithm
from nasforge.oneshot.common import n_steps
from nasforge.oneshot.runner import OneShot, OneShotSearch, load_data
from nasforge.proxies import get_proxy, list_proxies, score_arch
from nasforge.proxies.size import SIZES
from nasforge.run.store import Store
from nasforge.space.search_space import Arch, arch_id
from nasforge.twostage.shortlist import ShortlistSettings

__all__ = ["Proposer", "OneShotProposer", "ProxyProposer", "RandomProposer", "get_proposer",
           "uniform_pool"]  # fmt: skip

log = logging.getLogger("nasforge.twostage")

#: the examples a proxy scores an architecture on (the first of the training split)
PROXY_BATCH = 64

#: the fewest weight steps stage 1 trains a supernet for when the shortlist gives no
#: ``epochs`` (more epochs than the one-shot default where the data is small), and below which
#: it warns when the shortlist gives fewer: on the MNIST-1D tables a SPOS supernet ranked their
#: rows at Kendall tau -0.12 to 0.04 after 160 steps, 0.05 to 0.24 after 640 and 0.35 to 0.42
#: after 2,560; a FairNAS one at 0.38 to 0.52 after 2,560 (``benchmarks/supernet_steps.py``;
#: docs/oneshot.md)
FEW_SUPERNET_STEPS = 2560


def uniform_pool(space: Any, n: int, seed: int, taken: set[str] | None = None) -> list[Arch]:
    """Returns up to ``n`` distinct architectures of ``space`` drawn uniformly with ``seed``,
    none of those whose arch ids are ``taken`` (a small space may hold fewer)."""
    rng, seen = random.Random(seed), set(taken or ())
    out: list[Arch] = []
    search = space.search_space()
    for _ in range(20 * n):
        if len(out) >= n:
            break
        arch = search.sample(rng)
        if arch_id(arch) not in seen:
            seen.add(arch_id(arch))
            out.append(arch)
    return out


class Proposer(abc.ABC):
    """Returns the candidates of stage 1, each with its score (higher is better).

    Raises:
        ConfigError: (constructor) a bad setting or data, before anything is written.
    """

    #: what its scores are, as the size baseline's sentence names it
    scorer: str = ""
    #: whether half the shortlist hedges its ranking with the largest candidates by default
    #: (``by_size``): a score may rank below size (docs/oneshot.md), a random draw must not
    hedged: bool = True

    def by_size(self) -> int:
        """Returns how many of the shortlist's ``k`` go to the largest candidates: the
        setting, else half of ``k`` for a rule whose ranking is hedged, else none."""
        s = self.settings
        if s.by_size is not None:
            return s.by_size
        return s.k // 2 if self.hedged else 0

    def __init__(
        self,
        space: Any,
        settings: ShortlistSettings,
        data: Any,
        directory: Path,
        threads: int | None = None,
        progress: str = "auto",
    ) -> None:
        self.space, self.settings, self.directory = space, settings, directory
        self.data, self.threads, self.progress = data, threads, progress

    @abc.abstractmethod
    def score(self, store: Store, resume: bool) -> list[tuple[Arch, float]]:
        """Returns every candidate scored, with its score, in the order scored (writing
        what the rule trains into ``store``; with ``resume``, going on from what it holds)."""

    @abc.abstractmethod
    def example(self) -> torch.Tensor:
        """Returns one training input (the shape sizes are counted at)."""

    def section(self) -> dict[str, Any]:
        """Returns what the rule adds to the run's config beside the shortlist settings."""
        return {}

    @property
    def epochs(self) -> int:
        """Returns the supernet epochs the rule trains (0: it trains nothing)."""
        return 0

    @property
    def network_epochs(self) -> int:
        """Returns what the rule's training costs in epochs of one network: the supernet's
        epochs times the passes each of its steps takes (0: it trains nothing)."""
        return 0


class OneShotProposer(Proposer):
    """Returns candidates scored with a trained supernet's weights (module docstring)."""

    scorer = "supernet"

    def __init__(self, space: Any, settings: ShortlistSettings, data: Any, directory: Path,
                 threads: int | None = None, progress: str = "auto") -> None:  # fmt: skip
        super().__init__(space, settings, data, directory, threads, progress)
        self.search = OneShotSearch(space, OneShot(settings.algorithm, **settings.settings), data,
                                    directory=directory, progress=progress,
                                    threads=threads)  # fmt: skip
        cfg = self.search.strategy.config
        if "epochs" not in settings.settings:  # the one-shot default, or enough for the steps
            per_epoch = max(1, n_steps(self.search.split, cfg) // cfg.epochs)
            epochs = max(cfg.epochs, math.ceil(FEW_SUPERNET_STEPS / per_epoch))
            if epochs != cfg.epochs:
                log.info("stage 1 trains its %s supernet for %d epochs, %d weight steps (the "
                         "one-shot default of %d epochs is %d steps on this data); the "
                         "shortlist's `epochs` sets them", settings.algorithm, epochs,
                         epochs * per_epoch, cfg.epochs, cfg.epochs * per_epoch)  # fmt: skip
                # the search reads (and records) its config's epochs only when it runs, so
                # setting them here trains and records them without building it again
                # (its data loaded and a latency budget timed twice)
                cfg.epochs = epochs
        self.steps = n_steps(self.search.split, cfg)
        if self.steps < FEW_SUPERNET_STEPS:
            log.warning(
                "stage 1 trains its %s supernet for %d weight steps (%d epochs); on the "
                "benchmark's small data a supernet this short ranked candidates no better "
                "than a random draw: give the shortlist `epochs` for %d steps or more when its "
                "ranking matters (docs/oneshot.md)", settings.algorithm,
                self.steps, cfg.epochs, FEW_SUPERNET_STEPS,
            )  # fmt: skip

    def score(self, store: Store, resume: bool) -> list[tuple[Arch, float]]:
        """Returns the architectures the search scored, its pick and uniform samples up to
        the pool, each with its accuracy on inherited weights."""
        found = self.search.search_in(store, resume)
        assert found is not None, "stage 1 records no trials, so the search never looks done"
        result = found[0]
        assert result.supernet is not None, "a search returns its supernet"
        net = result.supernet.cpu()
        scored = {arch_id(a): (a, acc) for a, acc in result.evaluated}
        if arch_id(result.arch) not in scored:
            scored[arch_id(result.arch)] = (result.arch, self.search.inherited(net, result.arch)[1])
        more = uniform_pool(self.space, self.settings.pool - len(scored), self.settings.seed,
                            set(scored))  # fmt: skip
        for arch in more:
            scored[arch_id(arch)] = (arch, self.search.inherited(net, arch)[1])
        return list(scored.values())

    def example(self) -> torch.Tensor:
        """Returns one training input of the search's data."""
        return self.search.example()

    def section(self) -> dict[str, Any]:
        """Returns the one-shot search's section (its data and settings as recorded)."""
        return {"oneshot": self.search.section()}

    @property
    def epochs(self) -> int:
        """Returns the epochs the supernet trains (its ``epochs`` setting)."""
        return int(self.search.strategy.config.epochs)

    @property
    def network_epochs(self) -> int:
        """Returns the supernet's epochs times the paths each step trains (FairNAS: several)."""
        return self.epochs * get_algorithm(self.settings.algorithm).paths_per_step(self.space)


class _Sampled(Proposer):
    """Returns ``pool`` uniform samples, each scored by :meth:`value`."""

    def __init__(self, space: Any, settings: ShortlistSettings, data: Any, directory: Path,
                 threads: int | None = None, progress: str = "auto") -> None:  # fmt: skip
        super().__init__(space, settings, data, directory, threads, progress)
        if settings.settings:
            raise ConfigError(
                f"shortlist settings {sorted(settings.settings)} belong to a one-shot "
                f"algorithm; {settings.algorithm!r} takes only k, pool, budget and seed"
            )
        self.split, _ = load_data(data, settings.seed)

    def score(self, store: Store, resume: bool) -> list[tuple[Arch, float]]:
        """Returns the pool's samples with their values, in the order drawn."""
        archs = uniform_pool(self.space, self.settings.pool, self.settings.seed)
        return [(a, self.value(i, a)) for i, a in enumerate(archs)]

    @abc.abstractmethod
    def value(self, i: int, arch: Arch) -> float:
        """Returns the score of the ``i``-th sample ``arch``."""

    def example(self) -> torch.Tensor:
        """Returns one training input."""
        return self.split.train[0][:1]


class ProxyProposer(_Sampled):
    """Returns uniform samples scored by a zero-cost proxy (or a size) at initialisation."""

    def __init__(self, space: Any, settings: ShortlistSettings, data: Any, directory: Path,
                 threads: int | None = None, progress: str = "auto") -> None:  # fmt: skip
        super().__init__(space, settings, data, directory, threads, progress)
        self.proxy = get_proxy(settings.algorithm)
        self.hedged = settings.algorithm not in SIZES  # a size hedged by size is itself
        self.scorer = f"proxy {settings.algorithm}"

    def value(self, i: int, arch: Arch) -> float:
        """Returns the proxy's value of ``arch`` (weights seeded with the shortlist's seed)."""
        x, y = self.split.train
        return score_arch(self.space, arch, self.proxy, x[:PROXY_BATCH], y[:PROXY_BATCH],
                          self.settings.seed)  # fmt: skip


class RandomProposer(_Sampled):
    """Returns uniform samples, the first drawn first."""

    scorer = "random draw"
    hedged = False  # the floor every rule must beat stays random

    def value(self, i: int, arch: Arch) -> float:
        """Returns minus the draw's position."""
        return float(-i)


def get_proposer(name: str) -> type[Proposer]:
    """Returns the stage-1 rule ``name`` means: a one-shot algorithm, ``random``, or a proxy.

    Raises:
        ConfigError: none of these (the message lists them).
    """
    if name in algorithm_names():
        return OneShotProposer
    if name == "random":
        return RandomProposer
    if name in list_proxies():
        return ProxyProposer
    raise ConfigError(
        f"shortlist algorithm {name!r} is unknown; give a one-shot algorithm "
        f"{algorithm_names()}, a proxy {list_proxies()} or 'random'"
    )
