"""Supernet conversion: the same recorded ``ModelSpace`` made runnable by mixed operations.

A recorded space holds every candidate of every ``LayerChoice`` and every block of every
``Repeat``. :class:`Supernet` deep-copies the space and replaces each ``LayerChoice``,
``InputChoice`` and ``Repeat`` in the module tree by a mixed operation that an algorithm supplies
(:class:`Algorithm`; their common part is :mod:`nasforge.oneshot.mixed`), keeping the
candidates as the mixed op's children under their candidate names. The space itself is not
changed, and the user's ``forward`` runs unchanged.

Nodes. Cell-based algorithms (NASB, and the DARTS export) reason about *nodes*: a node is an
``InputChoice`` whose every input is the output of a ``LayerChoice`` (an *edge*), as in the
DARTS cell ``node_j = sum(edge_ij(n_i))`` with two inputs kept. Nodes are found by running one
forward pass on an example input and matching tensors: each mixed ``LayerChoice`` tags its
output, each mixed ``InputChoice`` looks its inputs up. A ``LayerChoice`` feeding no
``InputChoice`` is a node with one edge; an ``InputChoice`` fed by anything else has its own
architecture entries over its inputs.

Parameter naming: a mixed op keeps candidate ``c`` of ``LayerChoice`` at path ``p`` as ``p.c``
(the recorded name), a mixed ``Repeat`` keeps block ``i`` as ``p.i``. The frozen model of an
architecture has ``p`` (the chosen candidate) and ``p.i`` (``nn.Sequential``), which is what
:func:`inherit_weights` maps.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from nasforge._deprecated import module_getattr
from nasforge.errors import ArchitectureError, SpaceError
from nasforge.oneshot.common import arch_optimizer
from nasforge.oneshot.common import frozen_bn_stats as _frozen_bn_stats

# the mixed ops (nasforge.oneshot.mixed) are named here too, where the algorithms have always
# imported them
from nasforge.oneshot.mixed import Mixed, MixedInput, MixedLayer, MixedRepeat
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.space import ModelSpace, Repeat, freeze
from nasforge.space.search_space import Arch
from nasforge.weightsharing import convert_choices

__all__ = [
    "Algorithm",
    "NoSettings",
    "Mixed",
    "MixedLayer",
    "MixedInput",
    "MixedRepeat",
    "Supernet",
    "inherit_weights",
]

logger = logging.getLogger(__name__)

#: ``frozen_bn_stats`` moved to :mod:`nasforge.oneshot.common` (beside ``recalibrate_bn``); the
#: old name warns and gives it until the release the table names
__getattr__ = module_getattr(__name__)


@dataclass
class NoSettings:
    """Returns nothing; the settings of an algorithm that has none of its own."""

    def check(self) -> None:
        """Returns None: there is nothing to check."""


class Algorithm:
    """What a one-shot algorithm supplies: one mixed op class per kind of choice, its own
    settings, and its behaviour in a search (one training step, the architecture it points to
    after an epoch, and how the search ends). ``search()`` calls these and never asks which
    algorithm it runs.

    Settings. The search loop's settings (epochs, batch size, learning rates, seed, device,
    batch-norm batches) are :class:`~nasforge.oneshot.common.SearchConfig`'s; an algorithm's
    own are a small dataclass, :attr:`settings_class`, each field with its default, whose
    ``check()`` raises :class:`~nasforge.errors.ConfigError` on a bad value. Every hook that
    takes ``cfg`` (the ``SearchConfig``) finds them, checked, as ``cfg.algo``, an instance of
    :attr:`settings_class`: ``cfg.algo.cycles`` in SPOS's ``finish``. A run file's flat
    ``strategy`` mapping, ``search(space, name, data, **settings)`` and ``OneShot(name,
    **settings)`` are split between the two by :func:`~nasforge.oneshot.algorithms.config_for`,
    so an algorithm's setting is named like a loop setting and the record keeps one flat
    section. An algorithm that chooses among candidates with inherited weights takes
    selection's settings along by extending
    :class:`~nasforge.oneshot.selection.SelectionSettings` (SPOS, ENAS, few-shot).

    Registering the class (:func:`~nasforge.oneshot.algorithms.register_algorithm`) makes
    its name known to ``search()``, run files and ``nasforge run``.
    """

    name = ""
    #: the dataclass of the algorithm's own settings (every field with a default, a
    #: ``check()``); :class:`NoSettings` when it has none
    settings_class: type = NoSettings
    #: whether a step takes a validation batch (for the architecture parameters)
    uses_val: bool = True
    #: whether the search learns the architecture parameters (their strengths are recorded)
    learns_arch: bool = True
    #: whether its mixed ops compute with gates drawn from the architecture parameters, which
    #: :meth:`draw_gates` draws again before each pass (NASB, NASP)
    draws_gates: bool = False
    #: whether the architecture gradient of a pass can be computed after the weight pass (NASB's
    #: sampled ops keep what it needs; NASP's dense ones do not), as model-parallel search may
    defers_arch_grads: bool = False
    #: whether model-parallel search (``oneshot/cmp*.py``) can run it: its step is the generic
    #: architecture/weight pass pair there (DARTS, NASB, NASP); ProxylessNAS samples its own
    #: paths per pass and says no
    model_parallel: bool = True
    #: how the search keeps to a ``budget`` (:mod:`nasforge.oneshot.budgeted`): ``"reject"``
    #: (it never proposes an architecture over it: SPOS, few-shot, ENAS) or ``"project"`` (a
    #: resource penalty on the architecture loss, and the pick projected into the budget:
    #: DARTS, NASB, ProxylessNAS, and any algorithm that does not say)
    budget_rule: str = "project"
    #: the share of ``epochs`` whose steps train uniformly drawn paths while the architecture
    #: waits, when its setting ``warmup_epochs`` is None (ENAS 3/4, NASB 1/2); None: the
    #: algorithm has no warm-up
    warmup: float | None = None

    @classmethod
    def paths_per_step(cls, space: Any) -> int:
        """Returns how many forward and backward passes over a batch one weight step of this
        algorithm takes on ``space`` (1: one path, or one mixed pass); what an epoch costs in
        epochs of one network (FairNAS: the most candidates of a decision)."""
        return 1

    @classmethod
    def warmup_epochs(cls, cfg: Any) -> int:
        """Returns the epochs of uniform paths before the architecture moves: the setting
        ``warmup_epochs`` of ``cfg.algo``, or :attr:`warmup` of ``cfg.epochs`` (rounded down)
        when it is None or the settings have none; 0 for an algorithm without a warm-up."""
        if cls.warmup is None:
            return 0
        given = getattr(cfg.algo, "warmup_epochs", None)
        return int(cls.warmup * cfg.epochs) if given is None else int(given)

    @classmethod
    def parallel_problem(cls, cfg: Any) -> str:
        """Returns why model-parallel search (``oneshot/cmp*.py``) cannot run ``cfg``'s settings
        of this algorithm, "" when it can (NASB: ``order='alternate'``); by default ""."""
        return ""

    @classmethod
    def draw_gates(cls, net: Supernet, uniform: torch.Generator | None = None) -> None:  # noqa: B027
        """Draws the mixed ops' gates before a pass (only where :attr:`draws_gates`; by default
        nothing): from the architecture parameters, or uniformly at random from ``uniform``
        (a warm-up step)."""

    @classmethod
    def check_space(cls, space: Any, cfg: Any) -> None:  # noqa: B027 - optional hook
        """Raises ConfigError when the settings ``cfg.algo`` cannot search ``space`` (few-shot:
        ``split_on`` names no decision of it); called before a run's record is created and
        before any supernet is built; by default nothing."""

    @classmethod
    def prepare(cls, net: Supernet, split: Any, cfg: Any) -> None:  # noqa: B027 - optional hook
        """Readies the supernet once it is built and on its device, before the optimizers and
        before a resumed state is loaded into it (ProxylessNAS: its latency table, kept in the
        supernet's state so that a resume reads the same one); by default nothing."""

    @classmethod
    def arch_metrics(cls, net: Supernet, arch: Arch) -> dict[str, float]:
        """Returns figures of ``arch`` the algorithm knows beyond accuracy (ProxylessNAS: its
        table latency, the expected latency and the target), recorded in each epoch's row and
        the found trial's metrics; by default none."""
        return {}

    @classmethod
    def policy(cls, net: Supernet) -> nn.Module | None:
        """Returns the module that learns the architecture in place of one parameter vector
        per decision (ENAS's controller), which the supernet holds as ``net.policy``; by
        default None."""
        return None

    @classmethod
    def arch_optimizer(cls, params: list[nn.Parameter], cfg: Any) -> torch.optim.Optimizer:
        """Returns the optimizer of the architecture parameters (``net.arch_parameters()``):
        by default Adam with ``a_lr``, ``a_betas`` and ``a_weight_decay``."""
        return arch_optimizer(params, cfg)

    @classmethod
    def after_epoch(cls, net: Supernet, state: Any, split: Any, cfg: Any) -> dict[str, Any]:
        """Returns numbers for the epoch's progress row after the algorithm's own phase at the
        end of each epoch (ENAS trains its controller there); by default none, ``{}``."""
        return {}

    @staticmethod
    def strength(a: torch.Tensor) -> torch.Tensor:
        """Returns how strongly each candidate is chosen given its parameter (softmax)."""
        return torch.softmax(a, dim=0)

    layer: type[MixedLayer] = MixedLayer
    input: type[MixedInput] = MixedInput
    repeat: type[MixedRepeat] = MixedRepeat

    @classmethod
    def step(
        cls, net: Supernet, state: Any, train: Any, val: Any, cfg: Any
    ) -> tuple[float, float | None]:
        """Returns (train loss, val loss or None) after one search step on the batches;
        ``state`` holds the optimizers and the architecture sampler's generator."""
        raise NotImplementedError(f"{cls.__name__} does not define a search step")

    @classmethod
    def current_arch(cls, net: Supernet) -> Arch:
        """Returns the architecture the supernet points to now (its argmax), and makes the
        supernet compute it for the epoch's validation accuracy."""
        return net.export()

    @classmethod
    def finish(cls, net: Supernet, split: Any, cfg: Any) -> tuple[Arch, list[tuple[Arch, float]]]:
        """Returns the architecture the search found and every architecture it scored on the
        way (architecture, validation accuracy with inherited weights)."""
        return net.export(), []


def _check_space(space: ModelSpace) -> None:
    if not isinstance(space, ModelSpace) and not hasattr(space, "supernet_tree"):
        raise SpaceError(
            "one-shot search takes a recorded nasforge.ModelSpace or a MutatedSpace of "
            f"module-level mutators, got {type(space).__name__}"
        )
    for path, m in space.named_modules():
        if isinstance(m, Repeat) and m.label is None and len(m.depth_values) > 1:
            raise SpaceError(
                f"Repeat {path!r} takes its depth {list(m.depth_values)} from an expression of "
                "value choices; one-shot search needs the depth to be its own decision: pass "
                "depth=(min, max) or depth=nf.choice([...], label=...)"
            )
    ranges = space.search_space().ranges
    if ranges:
        d = ranges[0]
        assert d.domain is not None
        raise SpaceError(
            f"one-shot search cannot mix the continuous/integer decision {d.label!r} "
            f"({d.domain.describe()}{' and others' if len(ranges) > 1 else ''}): a supernet "
            "shares weights across listed candidates only; search it multi-trial (tpe, "
            "evolution, random) or make it nf.choice([...])"
        )
    values = [d.label for d in space.search_space().decisions if d.kind == "value"]
    if values:
        raise SpaceError(
            f"value choice(s) {values} of this space can change tensor shapes, which one-shot "
            "supernets here do not mix (elastic width/kernel is nasforge.ofa's job); turn them "
            "into LayerChoices, fix them, or search this space multi-trial"
        )


class Supernet(nn.Module):
    """Returns the space's forward computed by mixed ops; holds weights and architecture
    parameters apart (``weights()``, ``arch_parameters()``).

    Invariants: the space is not modified; every decision label of the space has exactly one
    architecture parameter, shared by every place that uses the label (tied decisions).

    Raises:
        SpaceError: the space has a range (nf.uniform/nf.integer) or a shape-changing value
            choice (named), a Repeat whose depth is derived, or an InputChoice whose reduction
            cannot be mixed.
    """

    space: ModelSpace  # set with object.__setattr__ in __init__ (not a submodule), so typed here
    #: whether the binary gates of NASB/NASP ops were set from the parameters (nasb.binarize)
    _binarized: bool = False
    #: the budget it searches under (:class:`nasforge.oneshot.budgeted.Budgeted`), set by the
    #: search before training; None without one
    budget: Any = None

    def __init__(self, space: ModelSpace, algorithm: type[Algorithm], example: Any = None) -> None:
        super().__init__()
        _check_space(space)
        object.__setattr__(self, "space", space)
        self.algorithm = algorithm
        self.arch_params = nn.ParameterList()
        self.key_of: dict[str, int] = {}
        self._trace: dict[int, tuple[MixedLayer, torch.Tensor]] | None = None
        self._trace_inputs: list[tuple[MixedInput, list[MixedLayer | None]]] = []
        # a MutatedSpace's module-level sites become LayerChoices of all their candidates
        tree = getattr(space, "supernet_tree", None)
        self.model = tree() if tree is not None else copy.deepcopy(space)
        self._convert(self.model)
        missing = [lb for lb in space.search_space() if lb not in self.key_of]
        if missing:
            raise SpaceError(
                f"decision(s) {missing} are not LayerChoice/InputChoice/Repeat modules reachable "
                "in the module tree, so a supernet cannot mix them"
            )
        #: what learns the architecture when the algorithm has one (ENAS's controller): its
        #: parameters are then the architecture parameters
        self.policy: nn.Module | None = algorithm.policy(self)
        #: sub-supernets whose weights the algorithm trains beside ``model`` (few-shot's),
        #: added by its ``prepare`` through :meth:`hold`: weights too, and in the state dict
        self.held = nn.ModuleList()
        self._fixed: list[dict[str, Any]] = []  # the decisions' values each held one holds
        if example is not None:
            self.find_nodes(example)

    # -- construction -------------------------------------------------------------------------
    def declare_arch(self, label: str, n: int) -> None:
        """Creates the architecture parameter of ``label`` (small random init, as DARTS)."""
        if label in self.key_of:
            assert self.arch_params[self.key_of[label]].numel() == n
            return
        self.key_of[label] = len(self.arch_params)
        self.arch_params.append(nn.Parameter(1e-3 * torch.randn(n)))

    def _convert(self, module: nn.Module) -> None:
        # nested choices first (candidates are converted modules); a fixed depth is a plain
        # sequence; the same walk as the single-path supernet's, so the same parameter order
        convert_choices(
            module,
            lambda c: self.algorithm.layer(c, self),
            lambda c: self.algorithm.input(c, self),
            lambda c: self.algorithm.repeat(c, self),
        )

    def find_nodes(self, *example: Any) -> None:
        """Groups edges into nodes by one no-grad forward pass on ``example`` (see module doc)."""
        self._trace, self._trace_inputs = {}, []
        was = self.training
        try:
            with torch.no_grad(), _frozen_bn_stats(self):
                self.eval()
                self.model(*example)
        finally:
            self.train(was)
            trace_inputs, self._trace, self._trace_inputs = self._trace_inputs, None, []
        for inp, sources in trace_inputs:
            edges = [s for s in sources if s is not None]
            if edges and len(edges) == len(sources) and len(set(map(id, edges))) == len(edges):
                inp.edges = edges
                for e in edges:
                    e.node = inp
        n = sum(1 for m in self.mixed() if isinstance(m, MixedInput) and m.edges)
        logger.debug("supernet %s: %d nodes found", self.algorithm.name, n)

    # -- access -------------------------------------------------------------------------------
    def mixed(self) -> list[Mixed]:
        """Returns every mixed op, in module order."""
        return [m for m in self.model.modules() if isinstance(m, Mixed)]

    def weights(self) -> list[nn.Parameter]:
        """Returns the network weights (every parameter but the architecture parameters), the
        held sub-supernets' after the model's."""
        subs = [sub for sub in self.held if isinstance(sub, Supernet)]  # all of them (hold)
        return [*self.model.parameters(), *(p for sub in subs for p in sub.weights())]

    def hold(self, sub: Supernet, fixed: Mapping[str, Any]) -> None:
        """Keeps ``sub`` (a supernet of the same space) as the part of this one that holds the
        architectures taking ``fixed``'s values (few-shot's sub-supernets): its weights are
        weights of this one (:meth:`weights`), and it moves, saves and loads with it."""
        sub.ranks = self.ranks
        self.held.append(sub)
        self._fixed.append(dict(fixed))

    @property
    def ranks(self) -> Ranks:
        """Returns the ranks this supernet trains on, data parallel (one process by default):
        the gradient steps of :mod:`nasforge.oneshot.common` shard each batch across them and
        sum the gradients, so every rank's replica takes the same step."""
        return self.__dict__.get("_ranks", ONE)

    @ranks.setter
    def ranks(self, ranks: Ranks) -> None:
        self.__dict__["_ranks"] = ranks
        for sub in self.__dict__.get("_modules", {}).get("held", []):
            sub.ranks = ranks

    def holder(self, arch: Mapping[str, Any]) -> Supernet:
        """Returns the supernet whose weights hold ``arch``: the first held one whose fixed
        decisions ``arch`` takes (:meth:`hold`), else this one."""
        for sub, fixed in zip(self.held, self._fixed):
            if all(arch.get(k) == v for k, v in fixed.items()):
                assert isinstance(sub, Supernet)
                return sub
        return self

    def arch_parameters(self) -> list[nn.Parameter]:
        """Returns the architecture parameters: one per decision label, or the parameters of
        the algorithm's policy (ENAS's controller) when it has one."""
        return list(self.arch_params if self.policy is None else self.policy.parameters())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    # -- export -------------------------------------------------------------------------------
    def export(self) -> Arch:
        """Returns the architecture the parameters point to, as an arch dict ``nf.freeze`` takes.

        Layers take the strongest non-zero candidate; a node keeps the ``n_chosen`` edges whose
        strongest non-zero candidate is strongest; other inputs and depths take their argmax.
        """
        first: dict[str, Mixed] = {}
        for m in self.mixed():
            first.setdefault(m.label, m)
        arch: dict[str, Any] = {}
        for label, m in first.items():
            if isinstance(m, MixedLayer):
                w = self.strength(m)
                keep = m.exportable()
                arch[label] = m.names[max(keep, key=lambda i: float(w[i]))]
            elif isinstance(m, MixedInput):
                if m.edges:
                    s = [max(float(self.strength(e)[i]) for i in e.exportable()) for e in m.edges]
                else:
                    s = [float(v) for v in self.strength(m)]
                top = sorted(sorted(range(len(s)), key=lambda i: -s[i])[: m.n_chosen])
                arch[label] = top[0] if m.n_chosen == 1 else top
            elif isinstance(m, MixedRepeat):
                w = self.strength(m)
                arch[label] = m.values[int(torch.argmax(w))]
        return self.space.search_space().validate(arch)

    def extract(self, arch: Mapping[str, Any]) -> nn.Module:
        """Returns ``arch`` as a plain frozen module with weights copied from the supernet
        (:func:`inherit_weights`; the weight-sharing protocol's ``extract``): from the
        supernet that holds it (:meth:`holder`)."""
        return inherit_weights(self.holder(arch), arch)

    def strength(self, m: Mixed) -> torch.Tensor:
        """Returns how strongly each candidate of ``m`` is chosen (the algorithm's measure)."""
        return self.algorithm.strength(m.arch().detach())

    def arch_weights(self) -> dict[str, list[float]]:
        """Returns label -> how strongly each candidate is chosen now (for DARTS the softmax
        of alpha), per decision with one parameter vector; empty for an algorithm that learns
        no architecture parameters (SPOS). A node's per-edge choices are left out."""
        if not self.algorithm.learns_arch:
            return {}
        strengths = getattr(self.policy, "strengths", None)
        if callable(strengths):  # a policy: its probabilities along its most likely path
            return dict(strengths())
        out: dict[str, list[float]] = {}
        for m in self.mixed():
            if m.label not in out and not getattr(m, "edges", None):
                out[m.label] = [round(float(v), 6) for v in self.strength(m)]
        return out


def inherit_weights(net: Supernet, arch: Mapping[str, Any]) -> nn.Module:
    """Returns ``nf.freeze(space, arch)`` with every parameter and buffer copied from the
    supernet's chosen candidates and blocks (SPOS weight inheritance).

    Invariants: the frozen model computes what the supernet computes with ``arch`` sampled.

    Raises:
        ArchitectureError: ``arch`` does not fit the space.
    """
    model = freeze(net.space, arch)
    _copy_into(net.model, model, dict(arch), "")
    return model


def _copy_into(src: nn.Module, dst: nn.Module, arch: dict[str, Any], where: str) -> None:
    if isinstance(src, MixedLayer):
        src = src._modules[str(arch[src.label])]  # type: ignore[assignment]
        _copy_into(src, dst, arch, where)
        return
    with torch.no_grad():
        for name, p in dst.named_parameters(recurse=False):
            p.copy_(src._parameters[name])  # type: ignore[arg-type]
        for name, b in dst.named_buffers(recurse=False):
            if b is not None:
                b.copy_(src._buffers[name])  # type: ignore[arg-type]
    for name, child in dst.named_children():
        if name not in src._modules:
            raise ArchitectureError(
                f"frozen module {where + name!r} has no counterpart in the supernet; the space's "
                "__init__ must name modules the same way when frozen"
            )
        _copy_into(src._modules[name], child, arch, f"{where}{name}.")  # type: ignore[arg-type]
