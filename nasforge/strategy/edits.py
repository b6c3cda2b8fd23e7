"""A policy over edits: REINFORCE on the kinds of edit, as Path-level NAS's controller chooses
transformations of the current network (Cai et al. 2018). Pure (no torch).

    parent     the best of ``sample_size`` architectures drawn from the ``top_k`` best told
               (before any tell: the space's default, the base network)
    policy     pi(kind) = softmax(theta)[kind] over the kinds of edit that apply to the parent
               (``space.edit_key``: an edit's op in an edit space, a decision's label in a
               flat one); an edit of the drawn kind is then drawn uniformly
    reward     the told metric, standardised by a running mean and std of all metrics
    update     theta += lr * (r - b) * (onehot(kind) - pi), over the kinds offered at the ask;
               b an exponential moving average of rewards

Works on any space: on an ``EditSpace`` a child is its parent's history plus one edit, on a
flat space its parent with one decision changed.
"""

from __future__ import annotations

import math
import random
from typing import Any

from nasforge.errors import ConfigError
from nasforge.space.search_space import Arch, canonical_json
from nasforge.strategy.base import BaseStrategy, RewardBaseline, register_strategy

__all__ = ["EditPolicy"]


def _softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    e = [math.exp(z - top) for z in logits]
    total = sum(e)
    return [v / total for v in e]


@register_strategy("edit_rl", "pathlevel", "edit_policy")
class EditPolicy(BaseStrategy):
    """Returns children of the best architectures, each one edit away, the edit's kind drawn
    from a policy learned by REINFORCE.

    Invariants: the same seed and ask/tell sequence give the same architectures and logits;
    failed trials (None) leave the policy and the elite unchanged; a told architecture that it
    did not ask (a foreign history) joins the elite but teaches the policy nothing.

    Raises:
        ConfigError: ``lr`` <= 0, ``baseline_decay`` outside [0, 1), ``top_k`` or
            ``sample_size`` not an int >= 1.
    """

    grows = True

    def __init__(
        self,
        seed: int = 0,
        lr: float = 0.3,
        baseline_decay: float = 0.8,
        top_k: int = 4,
        sample_size: int = 2,
    ) -> None:
        super().__init__(seed)
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
            raise ConfigError(f"lr must be a number > 0, got {lr!r}")
        if not isinstance(baseline_decay, (int, float)) or not 0 <= baseline_decay < 1:
            raise ConfigError(f"baseline_decay must lie in [0, 1), got {baseline_decay!r}")
        for name, value in (("top_k", top_k), ("sample_size", sample_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        self.lr, self.baseline_decay = float(lr), float(baseline_decay)
        self.top_k, self.sample_size = top_k, sample_size

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        return {
            "seed": self.seed,
            "lr": self.lr,
            "baseline_decay": self.baseline_decay,
            "top_k": self.top_k,
            "sample_size": self.sample_size,
        }

    def _reset(self) -> None:
        self._rng = random.Random(self.seed)
        #: kind of edit -> logit
        self.logits: dict[str, float] = {}
        #: the best told architectures, (metric, order told, arch), best first
        self._elite: list[tuple[float, int, Arch]] = []
        #: canonical JSON of an asked child -> (kinds offered, kind drawn)
        self._asked: dict[str, tuple[list[str], str]] = {}
        self._baseline = RewardBaseline(self.baseline_decay)

    def probabilities(self, kinds: list[str]) -> list[float]:
        """Returns the policy's probability of each of ``kinds`` (among them)."""
        return _softmax([self.logits.get(k, 0.0) for k in kinds])

    def _parent(self) -> Arch:
        if not self._elite:
            return self.space.default()
        drawn = [self._rng.randrange(len(self._elite)) for _ in range(self.sample_size)]
        return dict(self._elite[min(drawn)][2])  # the elite is sorted: the lowest is best

    def _ask(self) -> Arch:
        parent = self._parent()
        options = self.space.edits(parent)
        if not options:  # nothing applies (a full history): ask the parent again
            return parent
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for edit in options:
            by_kind.setdefault(self.space.edit_key(edit), []).append(edit)
        kinds = list(by_kind)
        probs = self.probabilities(kinds)
        u, acc, kind = self._rng.random(), 0.0, kinds[-1]
        for k, p in zip(kinds, probs):
            acc += p
            if u < acc:
                kind = k
                break
        group = by_kind[kind]
        child = self.space.extend(parent, group[self._rng.randrange(len(group))])
        self._asked[canonical_json(child)] = (kinds, kind)
        return child

    def _tell(self, arch: Arch, metric: float | None) -> None:
        if metric is None:
            return
        self._elite.append((-metric, self._baseline.n, arch))  # n: the order told
        self._elite.sort(key=lambda e: (e[0], e[1]))
        del self._elite[self.top_k :]
        advantage = self._baseline.advantage(metric)
        asked = self._asked.pop(canonical_json(arch), None)
        if asked is None:
            return
        kinds, kind = asked
        for k, p in zip(kinds, self.probabilities(kinds)):
            grad = (1.0 if k == kind else 0.0) - p
            self.logits[k] = self.logits.get(k, 0.0) + self.lr * advantage * grad
