"""ProxylessNAS (Cai et al., ICLR 2019): binarized paths and an expected-latency loss.

Every decision has architecture parameters alpha and path probabilities p = softmax(alpha); a
pass computes the network with *binary gates*: one path per mixed op is active, the others do
not exist in the graph (memory close to a stand-alone network's).

Weight step (training batch, alpha frozen): per decision one candidate is sampled from p (an
InputChoice samples its ``n_chosen`` inputs without replacement, a Repeat one depth); a node's
unsampled edges are not computed at all. Only the sampled path's weights are updated.

Architecture step (validation batch, weights frozen): per decision *two* candidates are sampled
from p and the others are masked as if absent; of the two, the active one is sampled from their
renormalised probabilities q (an InputChoice keeping ``n_chosen >= 2`` keeps both). With the
binary gates g, the output is ``sum_j g_j o_j`` and the gradient (paper, Eq. 4, over the two)::

    dL/dalpha_i = sum_j dL/dg_j * q_j * (delta_ij - q_i),      dL/dg_j = <dL/dm, o_j>

for i, j in the sampled pair; the other candidates get no gradient. Only the active path is in
the graph; the other sampled candidate's output is recomputed in backward under ``no_grad``
(batch-norm statistics untouched), through NASB's :class:`~nasforge.oneshot.nasb._ArchGrad`.
After the optimizer step, the unsampled entries are put back and the two sampled ones shifted
by one constant so that their ``logsumexp`` (hence every unsampled path's probability) is
unchanged: the rescaling of the paper.

Latency (paper, section 3.3): a table gives each candidate's latency (:mod:`op_latency`);
``E[lat] = sum over layers of sum_k p_k * lat_k``, where a node's edge counts with its
expected presence ``n_chosen * softmax(beta)_e``. In the architecture step the expectation is
taken over the two sampled candidates (q) of the layers in the graph, so its gradient too stays
on the sampled entries. With ``latency_target`` T set, the loss is ``CE * (E[lat]/T) ** w``
(``latency_loss="mul"``) or ``CE + w * E[lat]/T`` (``"add"``, the paper's additive form with
lambda = w/T). The pick is the argmax; its table latency is reported and checked against T.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nasforge.errors import ConfigError
from nasforge.oneshot import op_latency
from nasforge.oneshot.algorithms import register_algorithm
from nasforge.oneshot.budgeted import resource_penalty
from nasforge.oneshot.common import (
    SearchConfig,
    apply_arch,
    frozen_bn_stats,
    ranks_of,
    sharded_loss,
    weight_step,
)
from nasforge.oneshot.nasb import _ArchGrad
from nasforge.oneshot.supernet import (
    Algorithm,
    MixedInput,
    MixedLayer,
    MixedRepeat,
    Supernet,
)
from nasforge.space.search_space import Arch

__all__ = [
    "ProxylessNas",
    "ProxylessSettings",
    "ProxylessLayer",
    "ProxylessInput",
    "ProxylessRepeat",
    "sample_paths",
    "follow",
    "trace_shapes",
    "latency_table",
    "expected_latency",
    "proxyless_step",
]

logger = logging.getLogger(__name__)


def _two_path_grad(alpha: torch.Tensor, idx: list[int], gates: Sequence[torch.Tensor]) -> Any:
    """Returns dL/dalpha: Eq. 4 over the sampled candidates ``idx`` (gate gradients ``gates``),
    zero elsewhere."""
    q = torch.softmax(alpha.detach()[idx], dim=0)
    g = torch.stack([t.to(q.dtype) for t in gates])
    grad = torch.zeros_like(alpha)
    grad[idx] = q * (g - (g * q).sum())
    return grad


class ProxylessLayer(MixedLayer):
    """Returns the active candidate's output (gate 1); the other sampled candidate is computed
    only in backward, for the gate gradient. ``role``: ``"path"`` (in the graph), ``"alt"``
    (the other sampled edge of a node keeping one input: computed without gradient, its output
    only feeds the node's gate gradient) or ``"skip"`` (an unsampled edge: a zero tensor)."""

    active: list[int] = [0]
    alt: list[int] = []
    role: str = "path"
    in_shape: tuple[int, ...] | None = None  # per-example input shape of the last pass
    in_graph: bool = False  # whether the current pass ran it as a path (set by its forward)

    def mixed_forward(self, *args: torch.Tensor) -> torch.Tensor:
        if self.role == "skip":
            return self.zeros(args[0])
        self.in_shape = tuple(args[0].shape[1:])
        cands = self.candidates()
        a = self.active[0]
        if self.role == "alt":
            with torch.no_grad(), frozen_bn_stats(cands[a]):
                return cands[a](*args)
        self.in_graph = True
        out = cands[a](*args)
        alpha = self.arch()
        if not (alpha.requires_grad and self.alt):
            return out
        n_args, idx = len(args), [a, *self.alt]

        def fn(g: torch.Tensor, saved: Sequence[torch.Tensor]) -> torch.Tensor:
            gates = [(g * saved[n_args]).sum()]
            with torch.no_grad():
                for k in idx[1:]:
                    with frozen_bn_stats(cands[k]):
                        gates.append((g * cands[k](*saved[:n_args])).sum())
            return _two_path_grad(alpha, idx, gates)

        return _ArchGrad.apply(alpha, out, fn, *args, out)


class ProxylessInput(MixedInput):
    """Returns the reduction of the active inputs; the gate gradient covers the active and the
    other sampled inputs (a node's edges are already gated by their ``role``)."""

    active: list[int] = [0]
    alt: list[int] = []

    def mixed_forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        out = self.reduce([inputs[i] for i in self.active], len(self.active))
        alpha = self.arch()
        idx = [*self.active, *self.alt]
        if not alpha.requires_grad or len(idx) < 2:
            return out
        scale = 1.0 / len(self.active) if self.reduction == "mean" else 1.0

        def fn(g: torch.Tensor, saved: Sequence[torch.Tensor]) -> torch.Tensor:
            return _two_path_grad(alpha, idx, [(g * x).sum() * scale for x in saved])

        return _ArchGrad.apply(alpha, out, fn, *(inputs[i] for i in idx))


class ProxylessRepeat(MixedRepeat):
    """Returns the output after the active depth; a deeper sampled depth is computed in
    backward only, from the active output."""

    active: list[int] = [0]
    alt: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.values[self.active[0]]
        outs = self.outputs(x, d)
        out = outs[d]
        alpha = self.arch()
        if not (alpha.requires_grad and self.alt):
            return out
        v = self.values[self.alt[0]]
        idx, blocks = [self.active[0], self.alt[0]], self.blocks()
        saved = (out, outs[v]) if v <= d else (out,)

        def fn(g: torch.Tensor, saved: Sequence[torch.Tensor]) -> torch.Tensor:
            other = saved[1] if len(saved) > 1 else saved[0]
            with torch.no_grad():
                for block in blocks[d:v]:
                    with frozen_bn_stats(block):
                        other = block(other)
            return _two_path_grad(alpha, idx, [(g * saved[0]).sum(), (g * other).sum()])

        return _ArchGrad.apply(alpha, out, fn, *saved)


def _draw(p: list[float], k: int, rng: random.Random) -> list[int]:
    """Returns ``k`` distinct positions drawn one after another with probabilities ``p``."""
    pool, w, out = list(range(len(p))), list(p), []
    for _ in range(min(k, len(pool))):
        i = rng.choices(range(len(pool)), weights=w if sum(w) > 0 else None)[0]
        out.append(pool.pop(i))
        w.pop(i)
    return out


def _keeps(m: Any) -> int:
    """Returns how many candidates of a mixed op are active in one pass."""
    return m.n_chosen if isinstance(m, MixedInput) else 1


def sample_paths(net: Supernet, rng: random.Random, two: bool) -> dict[str, tuple[list, list]]:
    """Returns label -> (active positions, other sampled positions) after setting them on every
    mixed op: one path per decision (``two=False``, the weight step) or two sampled candidates
    with the active one(s) among them (``two=True``, the architecture step). Decisions shared
    by several ops (tied labels) are sampled once."""
    plan: dict[str, tuple[list, list]] = {}
    for m in net.mixed():
        if m.label in plan:
            continue
        p = torch.softmax(m.arch().detach().double(), dim=0).tolist()
        keep = _keeps(m)
        drawn = _draw(p, max(2, keep) if two else keep, rng)
        if len(drawn) > keep:
            order = _draw([p[i] for i in drawn], keep, rng)
            active = [drawn[i] for i in order]
            plan[m.label] = (sorted(active), sorted(set(drawn) - set(active)))
        else:
            plan[m.label] = (sorted(drawn), [])
    _set(net, plan)
    return plan


def follow(net: Supernet, arch: Arch) -> None:
    """Makes the supernet compute ``arch`` (one path, no other sampled candidate)."""
    plan: dict[str, tuple[list, list]] = {}
    for m in net.mixed():
        v = arch[m.label]
        if isinstance(m, MixedLayer):
            plan[m.label] = ([m.names.index(v)], [])
        elif isinstance(m, MixedInput):
            plan[m.label] = ([v] if isinstance(v, int) else sorted(v), [])
        else:
            assert isinstance(m, MixedRepeat)
            plan[m.label] = ([m.values.index(v)], [])
    _set(net, plan)


def trace_shapes(net: Supernet, x: torch.Tensor) -> None:
    """Records every mixed layer's input shape (``in_shape``) by one pass without gradients in
    which every input of every InputChoice and every block of every Repeat is used."""
    plan: dict[str, tuple[list, list]] = {}
    for m in net.mixed():
        if isinstance(m, MixedInput):
            plan[m.label] = (list(range(m.n_candidates)), [])
        elif isinstance(m, MixedRepeat):
            plan[m.label] = ([m.values.index(max(m.values))], [])
        else:
            plan[m.label] = ([0], [])
    _set(net, plan)
    was = net.training
    try:
        with torch.no_grad(), frozen_bn_stats(net):
            net.eval()
            net(x)
    finally:
        net.train(was)


def _set(net: Supernet, plan: dict[str, tuple[list, list]]) -> None:
    for m in net.mixed():
        m.active, m.alt = plan[m.label]  # type: ignore[union-attr,assignment]
        if isinstance(m, ProxylessLayer):
            m.role, m.in_graph = "path", False
    for m in net.mixed():
        if isinstance(m, ProxylessInput):
            for i, e in enumerate(m.edges):
                assert isinstance(e, ProxylessLayer), type(e).__name__  # this supernet's edges
                e.role = "path" if i in m.active else "alt" if i in m.alt else "skip"
                if e.role != "path":
                    e.alt = []  # an edge outside the graph gives no gate gradient of its own


def _presence(conds: list[op_latency.Condition]) -> torch.Tensor | float:
    """Returns the probability that a layer with these conditions is in the sampled network
    (a node's edge counts ``n_chosen * softmax(beta)_e``, its expected number of uses)."""
    out: torch.Tensor | float = 1.0
    for m, key in conds:
        p = torch.softmax(m.arch(), dim=0)
        if isinstance(m, MixedLayer):
            out = out * p[m.names.index(next(n for n in m.names if str(n) == key))]
        elif isinstance(m, MixedRepeat):
            out = out * p[[j for j, v in enumerate(m.values) if v > int(key)]].sum()
        else:
            out = out * m.n_chosen * p[key]
    return out


def expected_latency(net: Supernet, sampled: bool = False) -> torch.Tensor:
    """Returns E[latency] (ms) of the searched layers under the path probabilities, a
    differentiable function of the architecture parameters; ``sampled``: over the two sampled
    candidates of the layers in this pass's graph only (the architecture step's restricted
    form, whose gradient reaches only the sampled entries)."""
    lat = net.latency
    assert isinstance(lat, op_latency.OpLatency)
    layers = [m for m in net.mixed() if isinstance(m, ProxylessLayer)]
    total = torch.zeros((), device=lat.rows()[0].device if lat.rows() else None)
    for m, row, conds in zip(layers, lat.rows(), lat.conditions):
        alpha = m.arch()
        if sampled:
            if m.role == "path" and m.in_graph:
                idx = [*m.active, *m.alt]
                total = total + (torch.softmax(alpha[idx], dim=0) * row[idx]).sum()
            continue
        total = total + (torch.softmax(alpha, dim=0) * row).sum() * _presence(conds)
    return total


def _with_latency(
    loss: torch.Tensor, net: Supernet, cfg: SearchConfig, share: float = 1.0
) -> torch.Tensor:
    """Returns the loss with the latency term of ``cfg.algo`` (unchanged without a target);
    ``share`` is this rank's share of the batch (the added term is split like the loss)."""
    s: ProxylessSettings = cfg.algo
    if s.latency_target is None:
        return loss
    ratio = expected_latency(net, sampled=True) / s.latency_target
    if s.latency_loss == "mul":
        return loss * ratio.clamp_min(1e-12) ** s.latency_weight
    return loss + share * s.latency_weight * ratio


def _arch_step(net: Supernet, opt_a: torch.optim.Optimizer, batch: Any, cfg: SearchConfig,
               plan: dict[str, tuple[list, list]]) -> float:  # fmt: skip
    """Returns the validation loss after one two-path update of the architecture parameters
    (weights frozen), with the paper's rescaling of the two sampled entries."""
    ce, share = sharded_loss(net, batch)
    params = net.arch_parameters()
    loss = _with_latency(ce, net, cfg, share)
    penalty = resource_penalty(net, share)  # the budget's, when there is one
    loss = loss if penalty is None else loss + penalty
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    full = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
    (value,) = ranks_of(net).all_reduce_tensors(full, float(ce.detach()))  # the whole batch's
    before = [p.detach().clone() for p in params]
    apply_arch(net, opt_a, full)
    with torch.no_grad():
        for label, (active, alt) in plan.items():
            i = net.key_of[label]
            p, old, idx = params[i], before[i], [*active, *alt]
            new = p[idx].clone()
            p.copy_(old)  # unsampled entries as they were (Adam's decay and momentum included)
            if len(idx) > 1:
                p[idx] = new + (torch.logsumexp(old[idx], 0) - torch.logsumexp(new, 0))
    return value


def proxyless_step(net: Supernet, state: Any, train: Any, val: Any, cfg: SearchConfig
                   ) -> tuple[float, float]:  # fmt: skip
    """Returns (train loss, val loss) of one ProxylessNAS step: a two-path architecture update
    on ``val``, then a one-path weight update on ``train`` (paths sampled with ``state.rng``)."""
    plan = sample_paths(net, state.rng, two=True)
    val_loss = _arch_step(net, state.opt_a, val, cfg, plan)
    sample_paths(net, state.rng, two=False)
    train_loss = weight_step(net, state.opt_w, train, cfg)
    return train_loss, val_loss


@dataclass
class ProxylessSettings:
    """Returns nothing; the settings of ProxylessNAS's expected-latency term. Latencies are in
    ms of the searched operations (the latency table's entries of the chosen candidates,
    summed)."""

    latency_target: float | None = None  # None: no latency term (latency is still reported)
    latency_loss: str = "mul"  # "mul": loss * (E[lat] / target) ** w; "add": + w * E[lat] / target
    latency_weight: float = 1.0  # w above
    latency_table: str | dict[str, Any] | None = None  # a JSON file or mapping; None: measured

    def check(self) -> None:
        """Raises ConfigError on a bad setting of the latency term."""
        t = self.latency_target
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
            raise ConfigError(
                f"latency_target must be a positive number of milliseconds or null, got {t!r}"
            )
        if self.latency_loss not in ("mul", "add"):
            raise ConfigError(
                f"latency_loss must be 'mul' (loss * (E[lat]/target)**w) or 'add' (loss + w * "
                f"E[lat]/target), got {self.latency_loss!r}"
            )
        w = self.latency_weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
            raise ConfigError(f"latency_weight must be a number >= 0, got {w!r}")
        if not (self.latency_table is None or isinstance(self.latency_table, (str, Mapping))):
            raise ConfigError(
                "latency_table must be the path of a JSON latency table, a mapping "
                f"(module path -> {{candidate: ms}} or candidate -> ms) or null, got "
                f"{type(self.latency_table).__name__}"
            )


@register_algorithm
class ProxylessNas(Algorithm):
    """The ProxylessNAS binarized paths; a step updates alpha on two sampled paths per decision
    (with the latency term when ``latency_target`` is set), then the weights on one."""

    name = "proxylessnas"
    settings_class = ProxylessSettings
    layer = ProxylessLayer
    input = ProxylessInput
    repeat = ProxylessRepeat
    model_parallel = False

    @classmethod
    def prepare(cls, net: Supernet, split: Any, cfg: Any) -> None:
        """Gives the supernet its latency table: ``cfg.algo.latency_table`` when set, else each
        candidate timed on the supernet's device at its input shape, found by one pass with
        every layer in it (:mod:`~nasforge.oneshot.op_latency`)."""
        if cfg.algo.latency_table is not None:
            table = op_latency.load_table(net, cfg.algo.latency_table)
        else:
            trace_shapes(net, split.train[0][:2])
            table = op_latency.measure_table(net)
        op_latency.attach(net, table)

    @classmethod
    def step(cls, net: Supernet, state: Any, train: Any, val: Any, cfg: SearchConfig
             ) -> tuple[float, float | None]:  # fmt: skip
        """Returns (train loss, val loss) of one ProxylessNAS step."""
        return proxyless_step(net, state, train, val, cfg)

    @classmethod
    def current_arch(cls, net: Supernet) -> Arch:
        """Returns the argmax architecture (a node keeps its ``n_chosen`` strongest inputs by
        its own parameters), and makes the supernet compute it."""
        arch = dict(net.export())
        for m in net.mixed():
            if isinstance(m, MixedInput) and m.edges:
                top = sorted(torch.topk(m.arch().detach(), m.n_chosen).indices.tolist())
                arch[m.label] = top[0] if m.n_chosen == 1 else top
        arch = net.space.search_space().validate(arch)
        follow(net, arch)
        return arch

    @classmethod
    def finish(cls, net: Supernet, split: Any, cfg: Any) -> tuple[Arch, list[tuple[Arch, float]]]:
        """Returns the argmax architecture; logs whether its latency meets the target."""
        arch, target = cls.current_arch(net), cfg.algo.latency_target
        if target is not None and hasattr(net, "latency"):
            ms = op_latency.arch_latency(net, arch)
            meets = "meets" if ms <= target else "MISSES"
            log = logger.info if ms <= target else logger.warning
            log("proxylessnas: the pick's latency %.4g ms %s the target %.4g ms", ms, meets,
                target)  # fmt: skip
        return arch, []

    @classmethod
    def arch_metrics(cls, net: Supernet, arch: Arch) -> dict[str, float]:
        """Returns ``latency_ms`` (the table latency of ``arch``) and ``expected_latency_ms``
        (E[lat] under the current probabilities); nothing before the table exists."""
        if not hasattr(net, "latency"):
            return {}
        with torch.no_grad():
            expected = float(expected_latency(net))
        return {"latency_ms": op_latency.arch_latency(net, arch),
                "expected_latency_ms": expected}  # fmt: skip


def latency_table(
    space: Any,
    example: torch.Tensor,
    batch: int = 1,
    n_warmup: int = 2,
    n_runs: int = 5,
    runtime: str = "torch",
    threads: int | None = None,
) -> dict[str, dict[str, float]]:
    """Returns ``{module path: {candidate: ms}}``: every candidate of ``space``'s LayerChoices
    timed on this machine at its input shape for ``example`` (a batch; ``batch`` images per
    timing, median of ``n_runs``); save it with ``op_latency.to_json`` and give it as the
    ``latency_table`` setting so that several searches read one table. ``runtime`` and
    ``threads`` choose where each candidate is timed (``"onnxruntime"``: exported to ONNX and
    timed in a session of ``threads`` threads; see :mod:`nasforge.run.deploy`).

    Raises:
        SpaceError: the space cannot be made a supernet.
        ConfigError: unknown runtime, or onnxruntime is not installed.
    """
    net = Supernet(space, ProxylessNas, example[:2])
    trace_shapes(net, example[:2])
    return op_latency.measure_table(net, batch, n_warmup, n_runs, runtime, threads)
