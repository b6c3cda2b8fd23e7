"""A REINFORCE policy-gradient controller (Williams 1992; as in Zoph & Le 2017, but with one
independent softmax per decision instead of an LSTM). Pure (numpy, no torch).

    policy     pi(arch) = prod_d softmax(theta_d)[arch_d]
    reward     the told metric, standardised by a running mean and std of all rewards
    baseline   exponential moving average of standardised rewards (variance reduction)
    update     theta_d += lr * (r - b) * (onehot(arch_d) - softmax(theta_d)) + entropy bonus

A softmax needs listed candidates: a range decision (``nf.uniform``, ``nf.integer``) is refused
at setup unless ``points_per_range`` says how many evenly spread values (log-evenly where
``log``) stand for it; a told value off those points counts as the nearest one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nasforge.errors import ConfigError
from nasforge.space.search_space import Arch, Decision
from nasforge.strategy.base import (
    BaseStrategy,
    RewardBaseline,
    checked_points_per_range,
    register_strategy,
)

if TYPE_CHECKING:  # numpy is imported where the policy is built: importing the strategies
    # (every command that reads a run does) then costs no numpy import
    import numpy as np
    import numpy.typing as npt

__all__ = ["ReinforceStrategy"]


def _softmax(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    import numpy as np

    e = np.exp(z - z.max())
    p: npt.NDArray[np.float64] = e / e.sum()
    return p


@register_strategy("rl", "reinforce", "policy_gradient")
class ReinforceStrategy(BaseStrategy):
    """Returns architectures sampled from a learned factorised categorical policy.

    Invariants: the same seed and ask/tell sequence give the same architectures and logits
    (numpy PCG64 generator); failed trials (None) leave the policy unchanged.

    Raises:
        ConfigError: ``lr`` <= 0, ``baseline_decay`` outside [0, 1), ``points_per_range`` not
            an int >= 1, or (at ``setup``) a range decision and no ``points_per_range``.
    """

    def __init__(
        self,
        seed: int = 0,
        lr: float = 0.2,
        baseline_decay: float = 0.9,
        entropy_weight: float = 0.0,
        points_per_range: int | None = None,
    ) -> None:
        super().__init__(seed)
        self.points_per_range = checked_points_per_range(points_per_range)
        if not lr > 0:
            raise ConfigError(f"lr must be > 0, got {lr!r}")
        if not 0 <= baseline_decay < 1:
            raise ConfigError(f"baseline_decay must lie in [0, 1), got {baseline_decay!r}")
        self.lr = float(lr)
        self.baseline_decay = float(baseline_decay)
        self.entropy_weight = float(entropy_weight)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        return {
            "seed": self.seed,
            "lr": self.lr,
            "baseline_decay": self.baseline_decay,
            "entropy_weight": self.entropy_weight,
            **({"points_per_range": self.points_per_range} if self.points_per_range else {}),
        }

    def _reset(self) -> None:
        ranges = [d.label for d in self.space.ranges]
        if ranges and self.points_per_range is None:
            raise ConfigError(
                f"the rl strategy learns a softmax over listed candidates, and {ranges} are "
                "ranges; give points_per_range=n to stand n evenly spread values for each, or "
                "use tpe, evolution or random for ranges"
            )
        #: each decision's candidates: listed ones, or a range's points
        self._cands: list[tuple[Any, ...]] = [
            d.values if d.domain is None else tuple(d.domain.points(self.points_per_range or 1))
            for d in self.space.decisions
        ]
        import numpy as np

        self._rng = np.random.default_rng(self.seed)
        self.logits = [np.zeros(len(c)) for c in self._cands]
        self._baseline = RewardBaseline(self.baseline_decay)

    def probabilities(self) -> dict[str, list[float]]:
        """Returns the current policy: label -> probability of each candidate."""
        return {d.label: _softmax(z).tolist() for d, z in zip(self.space.decisions, self.logits)}

    def _ask(self) -> Arch:
        positions = [int(self._rng.choice(len(z), p=_softmax(z))) for z in self.logits]
        if not self.space.ranges:
            return self.space.from_index(positions)
        return {d.label: c[p] for d, c, p in zip(self.space.decisions, self._cands, positions)}

    def _positions(self, arch: Arch) -> list[int]:
        """Returns each decision's candidate position; a range value maps to its nearest
        point."""
        if not self.space.ranges:
            return self.space.index_of(arch)
        return [_nearest(d, c, arch[d.label]) for d, c in zip(self.space.decisions, self._cands)]

    def _tell(self, arch: Arch, metric: float | None) -> None:
        if metric is None:
            return
        import numpy as np

        advantage = self._baseline.advantage(metric)
        for z, pos in zip(self.logits, self._positions(arch)):
            p = _softmax(z)
            grad = -p
            grad[pos] += 1.0
            # gradient of the entropy -sum p log p w.r.t. the logits
            logp = np.log(p + 1e-12)
            ent_grad = -p * (logp - (p * logp).sum())
            z += self.lr * (advantage * grad + self.entropy_weight * ent_grad)


def _nearest(d: Decision, points: tuple[Any, ...], value: Any) -> int:
    """Returns the position of ``value`` among a decision's candidates, or, for a range, of
    the point nearest to it in the range's unit coordinate."""
    if d.domain is None:
        return d.index(value)
    u = d.domain.to_unit(value)
    gaps = [abs(d.domain.to_unit(p) - u) for p in points]
    return gaps.index(min(gaps))
