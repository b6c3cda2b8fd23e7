"""Mutators: a model space made of an unmodified base model plus graph edits (Retiarii §3).

The base model is traced once with ``torch.fx``. A :class:`Mutator` matches nodes of that graph
(by module type, qualified name or function) and edits it with a few primitives, calling
``self.choose`` for every decision. Mutators run in the same two contexts as inline choices:

    recording   ``choose`` registers the decision and answers its first candidate;
    frozen      ``choose`` answers the architecture's value.

So a :class:`MutatedSpace` records its search space by applying its mutators once, and freezes an
architecture by applying them again to a fresh copy of the traced graph: the result is a plain
``torch.fx.GraphModule`` holding only the chosen operators.

Primitives (on :class:`MutableGraph`): ``nodes`` (match), ``module``, ``replace_module``,
``create_node``, ``delete_node``, ``connect``, ``insert_after``.
"""

from __future__ import annotations

import copy
import fnmatch
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import fx, nn

from nasforge.errors import ArchitectureError, NasforgeError, SpaceError
from nasforge.space import _capture

# the base both mutator kinds share, and the graph a graph mutator edits, sit below this module
# and module_mutator; their public home is here
from nasforge.space._mutator_base import Match, MutableGraph, Mutator
from nasforge.space.context import Frozen, Recording, use
from nasforge.space.hf_config import is_hf_model, sync_config, unmapped_message
from nasforge.space.model_space import Mutation, arch_repr
from nasforge.space.module_mutator import ModuleMutator, MutableModel
from nasforge.space.modules import input_choice_values
from nasforge.space.search_space import Decision, SearchSpace

__all__ = [
    "Mutator",
    "MutableGraph",
    "MutatedSpace",
    "OperatorMutator",
    "InputMutator",
    "InsertMutator",
]

logger = logging.getLogger(__name__)

#: (model class, config attributes) whose "cannot hold its sizes" warning was logged
_WARNED: set[tuple[str, tuple[str, ...]]] = set()


def _build(candidate: Any, *args: Any) -> nn.Module | None:
    if candidate is None or isinstance(candidate, nn.Module):
        return copy.deepcopy(candidate)
    module = candidate(*args)
    if module is not None and not isinstance(module, nn.Module):
        raise SpaceError(f"a candidate factory returned {type(module).__name__}, expected a module")
    return module


class OperatorMutator(Mutator):
    """Replaces each matched operator by one of ``candidates``.

    ``candidates`` maps names to modules or to factories ``(old_module) -> module`` (so a
    candidate can copy the old module's shape). One decision per matched node, labelled
    ``"{label}/{node}"``; with ``tie=True`` one decision ``label`` for all of them.
    """

    def __init__(
        self,
        match: Match,
        candidates: Mapping[str, nn.Module | Callable[[nn.Module], nn.Module]],
        label: str = "op",
        tie: bool = False,
    ) -> None:
        if not candidates:
            raise SpaceError("OperatorMutator needs at least one candidate")
        self.match, self.candidates, self.label, self.tie = match, dict(candidates), label, tie

    def mutate(self, graph: MutableGraph) -> None:
        nodes = [n for n in graph.nodes(self.match) if n.op == "call_module"]
        if not nodes:
            raise SpaceError(
                f"OperatorMutator {self.label!r}: {self.match!r} matches no module "
                "call of the base model"
            )
        for node in nodes:
            label = self.label if self.tie else f"{self.label}/{node.target}"
            cand = self.choose(self.candidates, label, kind="layer")
            module = _build(cand, graph.module(node))
            if module is None:
                raise SpaceError(
                    f"OperatorMutator {self.label!r}: candidate {cand!r} gives no module for "
                    f"{node.target!r}; an operator is replaced by a module (use InsertMutator "
                    "for an optional insertion)"
                )
            graph.replace_module(node, module)


class InputMutator(Mutator):
    """Chooses which earlier nodes feed input ``arg_index`` of node ``target``: one of
    ``candidates`` (node names), or ``n_chosen`` of them reduced by ``sum`` or ``concat``."""

    def __init__(
        self,
        target: str,
        candidates: Sequence[str],
        n_chosen: int = 1,
        reduction: str = "sum",
        arg_index: int = 0,
        label: str | None = None,
    ) -> None:
        if not candidates or not 1 <= n_chosen <= len(candidates):
            raise SpaceError(
                f"InputMutator {target!r}: need 1 <= n_chosen <= "
                f"{len(candidates)} candidates, got n_chosen={n_chosen}"
            )
        if reduction not in ("sum", "concat"):
            raise SpaceError(f"InputMutator {target!r}: reduction must be sum or concat")
        self.target, self.candidates = target, list(candidates)
        self.n_chosen, self.reduction, self.arg_index = n_chosen, reduction, arg_index
        self.label = label or f"input/{target}"

    def mutate(self, graph: MutableGraph) -> None:
        dst = graph.node(self.target)
        sources = [graph.node(c) for c in self.candidates]
        values = input_choice_values(len(sources), self.n_chosen)
        value = self.choose(values, self.label, kind="input")
        picked = [sources[i] for i in ([value] if isinstance(value, int) else value)]
        src = picked[0]
        for other in picked[1:]:
            if self.reduction == "sum":
                src = graph.create_function(torch.add, (src, other))
        if self.reduction == "concat" and len(picked) > 1:
            src = graph.create_function(torch.cat, (picked,))
        graph.connect(src, dst, self.arg_index)


class InsertMutator(Mutator):
    """Inserts one of ``candidates`` after each matched node: names map to a module, a
    zero-argument factory, or ``None`` (insert nothing)."""

    def __init__(
        self,
        after: Match,
        candidates: Mapping[str, nn.Module | Callable[[], nn.Module] | None],
        label: str = "insert",
    ) -> None:
        if not candidates:
            raise SpaceError("InsertMutator needs at least one candidate")
        self.after, self.candidates, self.label = after, dict(candidates), label

    def mutate(self, graph: MutableGraph) -> None:
        nodes = graph.nodes(self.after)
        if not nodes:
            raise SpaceError(f"InsertMutator {self.label!r}: {self.after!r} matches no node")
        _refuse_inner_ops(f"InsertMutator {self.label!r}", self.after, nodes, graph.capture)
        for node in nodes:
            label = f"{self.label}/{node.name}"
            cand = self.choose(self.candidates, label, kind="layer")
            module = _build(cand)
            if module is not None:
                graph.insert_after(node, module, f"{self.label}_{node.name}")


def _refuse_inner_ops(who: str, match: Any, nodes: list[fx.Node], capture: str | None) -> None:
    """Returns None unless glob ``match`` selected several operations inside one module (a
    module the capture traced through, e.g. an RMSNorm's pow, mean and rsqrt), where an edit
    would land inside the module instead of after it.

    Raises:
        SpaceError: naming the module, its class, the operations, and how to keep it whole.
    """
    if not isinstance(match, str):
        return  # a predicate picks nodes deliberately
    inside: dict[tuple[str, str], list[str]] = {}
    for node in nodes:
        stack = node.meta.get("nn_module_stack")
        if node.op == "call_module" or not stack or fnmatch.fnmatchcase(node.name, match):
            continue
        path, kind = list(stack.values())[-1]
        name = getattr(kind, "__name__", None) or str(kind).rsplit(".", 1)[-1]
        inside.setdefault((str(path), name), []).append(node.name)
    for (path, cls), ops in inside.items():
        if len(ops) < 2:
            continue
        if capture == "export":
            whole = (
                "torch.export captured this model (torch.fx could not), and it keeps no "
                "module whole, so match one node by its name"
            )
        else:
            whole = (
                f"keep it whole with MutatedSpace(..., leaves=[{cls}]), so it stays one "
                "module call that the glob matches, or match one node by its name"
            )
        raise SpaceError(
            f"{who}: {match!r} matches {len(ops)} operations inside module {path!r} ({cls}): "
            f"{ops[:6]}, not the module as a whole, so the edit would go inside it; {whole} "
            f"(e.g. {ops[-1]!r}, its last), or swap the module with "
            f"nf.ModuleMutator({path!r}, ...), which needs no graph"
        )


class _RecordArgs:
    """Keeps a subclass's constructor arguments, so a run can rebuild the space by reference."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_nf_wrapped", False):
            return

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            if type(self) is cls:
                object.__setattr__(self, "_nf_init_args", (args, kw))

        __init__._nf_wrapped = True  # type: ignore[attr-defined]  # a marker on the wrapper
        cls.__init__ = __init__  # type: ignore[method-assign]  # wraps it once, at class creation


class MutatedSpace(_RecordArgs, nn.Module):
    """Returns a model space made of ``base_model`` and ``mutators`` applied in order.

    Module-level mutators (:class:`~nasforge.space.module_mutator.ModuleMutator`) swap
    submodules and need no graph; when every mutator is module-level nothing is traced and a
    frozen model is ``base_model``'s own class with its modules swapped. Graph mutators need a
    graph: ``torch.fx`` traces the base model (modules of the ``leaves`` types, and modules that
    module-level mutators select, stay single nodes); where it cannot, ``torch.export`` captures
    it on ``example_inputs`` (a tuple of positional inputs, a dict of keyword inputs, or both;
    ``export_options`` go to ``torch.export.export``, e.g. ``dynamic_shapes``). Module-level
    mutators run before graph mutators. A space with graph mutators freezes to a
    ``GraphModule``.

    Subclass it (``class MySpace(nf.MutatedSpace)`` building the model in ``__init__``) so
    that runs can rebuild the space from its constructor arguments (resume, ``load_model``).

    Invariants: the base model is never modified; each freeze starts from a fresh copy of the
    base model (or of its captured graph) and weights.

    Raises:
        SpaceError: graph mutators on a model neither capture method can capture (the message
            says which failed and why), a mutator matches nothing, or two mutators declare one
            label with different candidates.
    """

    #: the captured graph each freeze copies (a cache, not a submodule; None: not captured)
    _captured: fx.GraphModule | None

    def __init__(
        self,
        base_model: nn.Module,
        mutators: Iterable[Mutator],
        leaves: Sequence[type[nn.Module]] = (),
        example_inputs: object = None,
        export_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.mutators = list(mutators)
        if not all(isinstance(m, Mutator) for m in self.mutators):
            raise SpaceError("mutators must be nasforge Mutator instances")
        self._module_mutators = [m for m in self.mutators if isinstance(m, ModuleMutator)]
        self._graph_mutators = [m for m in self.mutators if not isinstance(m, ModuleMutator)]
        self.base_model = base_model
        self.example_inputs, self.export_options = example_inputs, export_options
        self.capture: str | None = None  # None (no graph), "fx" or "export"
        object.__setattr__(self, "_captured", None)  # not a submodule: a cache
        if self._graph_mutators:
            self._capture_base(tuple(leaves))
        rec = Recording()
        self._mutate(rec)
        decisions: dict[str, Decision] = {}
        self._where: dict[str, str] = {}
        for d in rec.declarations:
            if d.label is None:  # choose labels its decisions; nf.uniform/integer may not
                raise SpaceError(
                    f"an unlabelled {d.kind} decision was declared in a mutator; inside "
                    "Mutator.mutate give nf.uniform/nf.integer/nf.choice a label=..."
                )
            decisions.setdefault(d.label, d.decision())
            self._where[d.label] = type(d.owner).__name__  # the last place, as before
        self._space = SearchSpace(list(decisions.values()))

    @property
    def base(self) -> nn.Module:
        """Returns what each freeze copies: the captured graph, or the base model."""
        if self.capture == "fx" or (self.capture == "export" and not self._module_mutators):
            captured = self._captured
            if captured is None:  # dropped when pickled: capture again
                captured = _capture.export_graph(
                    self.base_model, self.example_inputs, self.export_options
                )
                object.__setattr__(self, "_captured", captured)
            return captured
        return self.base_model

    def _capture_base(self, leaves: tuple[type[nn.Module], ...]) -> None:
        model = MutableModel(self.base_model)
        paths = {p for m in self._module_mutators for p, _ in m.sites(model)}
        name = type(self.base_model).__name__
        try:
            object.__setattr__(self, "_captured", _capture.fx_trace(self.base_model, leaves, paths))
            self.capture = "fx"
            return
        except Exception as exc:
            fx_exc = exc
        if self.example_inputs is None:
            raise _capture.capture_error(name, fx_exc, None, False) from fx_exc
        try:
            graph = _capture.export_graph(self.base_model, self.example_inputs, self.export_options)
        except Exception as exc:
            raise _capture.capture_error(name, fx_exc, exc, True) from exc
        object.__setattr__(self, "_captured", graph)
        self.capture = "export"
        logger.info("torch.fx cannot trace %s (%s); captured it with torch.export", name, fx_exc)

    def _mutate(self, ctx: Recording | Frozen) -> nn.Module:
        base = self.base
        if isinstance(base, fx.GraphModule):  # copy the weights, then regenerate code once
            root: nn.Module = fx.GraphModule(
                copy.deepcopy(_capture.holder(base)),
                copy.deepcopy(base.graph),
                type(self.base_model).__name__,
            )
        else:
            root = copy.deepcopy(base)
        with use(ctx):
            model = MutableModel(root)
            for module_mutator in self._module_mutators:
                module_mutator._reset()
                module_mutator.mutate_modules(model)
            if not self._graph_mutators:
                return root
            if self.capture == "export" and not isinstance(root, fx.GraphModule):
                root = _capture.export_graph(root, self.example_inputs, self.export_options)
            assert isinstance(root, fx.GraphModule)
            graph = MutableGraph(root, self.capture)
            for mutator in self._graph_mutators:
                mutator._reset()
                mutator.mutate(graph)
        return graph.finish()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self.capture == "export":  # an exported graph does not pickle; capture it again
            state["_captured"] = None
        return state

    def search_space(self) -> SearchSpace:
        """Returns every decision the mutators make, in the order they make them."""
        return self._space

    def freeze(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns the mutated base model for ``arch``: the base model's class when every
        mutator is module-level, else a ``GraphModule``. A Hugging Face model's ``config``
        then holds the frozen sizes (:mod:`nasforge.space.hf_config`), so ``save_pretrained``
        writes a folder that ``from_pretrained`` loads; where the config cannot hold them
        (sizes that differ per layer) a warning names the attributes.

        Raises:
            ArchitectureError: bad architecture, or the mutated model cannot be built.
        """
        arch = self._space.validate(arch)
        try:
            model = self._mutate(Frozen(arch))
        except NasforgeError:
            raise
        except Exception as exc:
            raise ArchitectureError(
                f"architecture {arch_repr(arch)} cannot be built: {type(exc).__name__}: {exc}"
            ) from exc
        history = [
            Mutation(d.label, d.kind, arch[d.label], self._where.get(d.label, ""))
            for d in self._space.decisions
        ]
        object.__setattr__(model, "_nf_history", history)
        if not self._graph_mutators and is_hf_model(model):
            unmapped = sync_config(model, self.base_model)  # config.json = the frozen sizes
            key = (type(model).__name__, tuple(unmapped))
            if unmapped and key not in _WARNED:
                _WARNED.add(key)  # once per process: every trial of a search would repeat it
                logger.warning("%s", unmapped_message(model, unmapped))
        return model

    def supernet_tree(self) -> nn.Module:
        """Returns a copy of the base model in which every module-level site is a
        ``LayerChoice`` holding all its candidates (what a one-shot supernet converts).

        Raises:
            SpaceError: the space has graph mutators, or a module-level mutator overrides
                ``mutate_modules`` (its candidates are unknown).
        """
        if self._graph_mutators:
            kinds = sorted({type(m).__name__ for m in self._graph_mutators})
            raise SpaceError(
                f"a one-shot supernet mixes module-level choices only; this space also has "
                f"graph mutators {kinds}; search it multi-trial or drop them"
            )
        root = copy.deepcopy(self.base_model)
        for mutator in self._module_mutators:
            if type(mutator).mutate_modules is not ModuleMutator.mutate_modules:
                raise SpaceError(
                    f"{type(mutator).__name__} overrides mutate_modules, so a supernet cannot "
                    "know all its candidates; use ModuleMutator's candidates or factory="
                )
            mutator.expand(root)
        return root

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise SpaceError(
            "a MutatedSpace is a model space, not a model: freeze an architecture "
            "with nasforge.freeze(space, arch) before calling it"
        )
