"""NNI 3.0's space modules (``nni.nas.nn.pytorch``) as nasforge's.

Each class takes NNI's arguments and is the nasforge construct of the same meaning, with the
label NNI would give it (:mod:`._labels`):

    ModelSpace           nasforge.ModelSpace; ``label_prefix`` and NNI's strict labels
    LayerChoice          nasforge.LayerChoice (frozen: the chosen candidate)
    InputChoice          nasforge.InputChoice (frozen: :class:`ChosenInputs`); NNI writes its
                         value as a list (``[2]``), nasforge as an index: both freeze
    Repeat               nasforge.Repeat: an int, a ``(min, max)`` or an expression depth
    Cell                 the same nodes of InputChoices and LayerChoices (frozen: the cell of
                         the chosen ops and inputs, NNI's state-dict keys)
    ParametrizedModule   a module whose arguments may be mutables; ``Mutable<Name>`` for every
                         ``torch.nn.<Name>`` (``MutableConv2d``): frozen, the plain torch module

A frozen model is the plain PyTorch model NNI's ``freeze`` builds: the same modules, parameters
and state-dict keys.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from nasforge.compat.nni._labels import auto_label, label_scope, strict_label_scope
from nasforge.compat.nni._mutable import Categorical, Mutable, concretize, evaluate
from nasforge.errors import SpaceError
from nasforge.space import model_space as _ms
from nasforge.space import modules as _nf
from nasforge.space.context import Frozen, Recording, current, use
from nasforge.space.search_space import Decision

__all__ = [
    "MutableModule",
    "ModelSpace",
    "ParametrizedModule",
    "LayerChoice",
    "InputChoice",
    "ChosenInputs",
    "Repeat",
    "Cell",
    "model_context",
    "current_model",
    "parametrized",
    "nni_arch",
    "choice",
]


def current_model() -> dict[str, Any] | None:
    """Returns the architecture being frozen (NNI's ``current_model``), or None."""
    ctx = current()
    return dict(ctx.arch) if isinstance(ctx, Frozen) else None


@contextlib.contextmanager
def model_context(sample: Mapping[str, Any]) -> Iterator[None]:
    """Builds every space module inside the block frozen to ``sample`` (NNI's
    ``model_context``)."""
    with use(Frozen(dict(sample))):
        yield


def nni_arch(space: _ms.ModelSpace, arch: Mapping[str, Any]) -> dict[str, Any]:
    """Returns ``arch`` as nasforge's space takes it: an NNI one-input list (``[2]``) becomes
    the index ``2``; every other value is kept."""
    out = dict(arch)
    for d in space.search_space().decisions:
        v = out.get(d.label)
        if d.kind == "input" and isinstance(v, list) and len(v) == 1 and d.values:
            if isinstance(d.values[0], int):
                out[d.label] = v[0]
    return out


class MutableModule(nn.Module):
    """A module that holds choices (NNI's ``MutableModule``); ``add_mutable`` declares a
    dangling mutable, and a subclass with a ``create_fixed_module`` classmethod builds its own
    frozen module."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = current()
        fixed = getattr(cls, "create_fixed_module", None)
        if isinstance(ctx, Frozen) and fixed is not None and (args or kwargs):
            return cls.create_fixed_module(dict(ctx.arch), *args, **kwargs)  # type: ignore[attr-defined]
        return super().__new__(cls)

    def add_mutable(self, mutable: Any) -> Any:
        """Returns ``mutable`` after declaring its decisions in the space being recorded."""
        if isinstance(mutable, Mutable):
            concretize(mutable)
            self.__dict__.setdefault("_nni_mutables", []).append(mutable)
        return mutable

    @property
    def mutables(self) -> list[Any]:
        """Returns the mutables added with :meth:`add_mutable`."""
        return list(self.__dict__.get("_nni_mutables", []))


def _label_init(init: Callable[..., None], prefix: Any) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        if self.__dict__.get("_nni_scope") is not None:  # a subclass's init entered it
            init(self, *args, **kwargs)
            return
        scope = label_scope(prefix) if prefix is not None else strict_label_scope()
        object.__setattr__(self, "_nni_scope", scope)
        with scope:
            init(self, *args, **kwargs)
        object.__setattr__(self, "trace_args", tuple(args))
        object.__setattr__(self, "trace_kwargs", dict(kwargs))

    return __init__


class ModelSpace(_ms.ModelSpace, MutableModule):
    """Returns a nasforge model space from an NNI-style ``__init__`` (NNI's ``ModelSpace``):
    ``class Net(ModelSpace, label_prefix='net')`` labels unlabelled choices ``net/1``, ...;
    without a prefix every choice needs a label, as in NNI. ``freeze`` takes NNI's
    architecture dicts too."""

    _label_prefix: str | None = None

    def __init_subclass__(
        cls, disable_init_wrapper: bool = False, label_prefix: str | None = None, **kwargs: Any
    ) -> None:
        cls._label_prefix = label_prefix
        init = cls.__dict__.get("__init__")
        if init is not None and not disable_init_wrapper:
            cls.__init__ = _label_init(init, label_prefix)  # type: ignore[method-assign]
        super().__init_subclass__(**kwargs)

    def freeze(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns the plain model of ``arch`` (NNI's or nasforge's form of it)."""
        return super().freeze(nni_arch(self, arch))


class ParametrizedModule(MutableModule):
    """A module whose constructor arguments may be NNI mutables (NNI's
    ``ParametrizedModule``): recorded with nasforge choice values, frozen as the plain class it
    ``wraps`` with the architecture's values."""

    _bound_type: type[nn.Module] | None = None

    def __init_subclass__(
        cls,
        disable_init_wrapper: bool = False,
        wraps: type[nn.Module] | None = None,
        copy_wrapped: bool = False,
        pure_fixed_module: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if not disable_init_wrapper:
            cls.__init__ = _arguments_init(wraps.__init__ if wraps else cls.__init__)  # type: ignore[method-assign]
        if copy_wrapped and wraps is not None:
            cls.__name__ = cls.__qualname__ = wraps.__name__
        if pure_fixed_module is None:
            pure_fixed_module = wraps is not None
        if pure_fixed_module:
            cls._bound_type = wraps

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = current()
        if isinstance(ctx, Frozen) and cls._bound_type is not None and (args or kwargs):
            args = tuple(concretize(a) for a in args)
            kwargs = {k: concretize(v) for k, v in kwargs.items()}
            return cls._bound_type(*args, **kwargs)
        if isinstance(ctx, Recording) and cls._bound_type is not None:
            leaf = _one_width(ctx, args, kwargs)
            if leaf is not None:
                return _WidthChoice(leaf, cls._bound_type, args, kwargs)
        return nn.Module.__new__(cls)

    @property
    def args(self) -> dict[str, Any]:
        """Returns the keyword arguments the module was built with (mutables kept)."""
        return dict(self.__dict__.get("trace_kwargs", {}))


def _one_width(ctx: Recording, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Returns the one ``Categorical`` every mutable argument depends on, when its values are
    ints or dot-free strings and its label is not a value decision already; else None."""
    mutables = [a for a in (*args, *kwargs.values()) if isinstance(a, Mutable)]
    leaves = {leaf.label: leaf for m in mutables for leaf in m.leaves()}
    if len(leaves) != 1:
        return None
    (leaf,) = leaves.values()
    if not isinstance(leaf, Categorical):
        return None
    ok = all(
        (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and "." not in v)
        for v in leaf.values
    )
    first = ctx.first(leaf.label)
    if not ok or (first is not None and first.kind != "layer"):
        return None
    return leaf


class _WidthChoice(_nf.LayerChoice):
    """A mutable layer whose arguments depend on one choice of ints (a width, a kernel size):
    recorded as a layer choice over that choice's values, one candidate module per value, so
    that one-shot search mixes it like any LayerChoice. Frozen, it is the plain module of the
    chosen value, as the mutable layer itself freezes."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return nn.Module.__new__(cls)

    def __init__(
        self, leaf: Categorical, bound: type[nn.Module], args: tuple[Any, ...], kw: dict[str, Any]
    ) -> None:
        nn.Module.__init__(self)
        ctx = current()
        assert isinstance(ctx, Recording)
        self._declaration = ctx.declare("layer", tuple(leaf.values), leaf.label, self)
        self.names = list(leaf.values)
        for v in self.names:
            sample = {leaf.label: v}
            built = bound(*evaluate(list(args), sample), **evaluate(kw, sample))
            self.add_module(str(v), built)


def _arguments_init(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: nn.Module, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "trace_args", tuple(args))
        object.__setattr__(self, "trace_kwargs", dict(kwargs))
        init(
            self,
            *(concretize(a) for a in args),
            **{k: concretize(v) for k, v in kwargs.items()},
        )

    return __init__


@functools.cache
def parametrized(torch_class: type[nn.Module], name: str | None = None) -> type[nn.Module]:
    """Returns NNI's parametrized form of ``torch_class`` (``MutableConv2d`` for
    ``nn.Conv2d``): its arguments may be mutables, and it freezes to ``torch_class``."""
    name = name or f"Mutable{torch_class.__name__}"
    made = type(
        name, (ParametrizedModule, torch_class), {"__module__": __name__}, wraps=torch_class
    )
    return made


#: a constructor called with no arguments: copy.deepcopy or pickle re-making the object
_UNSET: Any = object()


def _candidates(candidates: Any) -> Any:
    if isinstance(candidates, (list, tuple, Mapping)):
        return candidates
    raise SpaceError(
        f"NNI construct not mapped: LayerChoice candidates of type {type(candidates).__name__}; "
        "give a list or a dict of modules"
    )


class LayerChoice(_nf.LayerChoice):
    """NNI's ``LayerChoice(candidates, *, weights=None, label=None)``."""

    def __new__(
        cls, candidates: Any = _UNSET, *, weights: Any = None, label: str | None = None
    ) -> Any:
        if candidates is _UNSET:  # copy.deepcopy and pickle make the object bare
            return nn.Module.__new__(cls)
        full = auto_label(label)
        ctx = current()
        if isinstance(ctx, Frozen):
            return _nf.LayerChoice._frozen(ctx, _candidates(candidates), full)
        obj = nn.Module.__new__(cls)
        object.__setattr__(obj, "_nni_label", full)
        return obj

    def __init__(self, candidates: Any, *, weights: Any = None, label: str | None = None) -> None:
        super().__init__(_candidates(candidates), label=self.__dict__["_nni_label"])

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, name: int | str) -> nn.Module:
        return self.candidate(name)

    def __iter__(self) -> Iterator[nn.Module]:
        return iter(self.candidates())


def choice(label: str, choices: list[Any]) -> Any:
    """Returns NNI's ``nni.choice(label, choices)``: a :class:`LayerChoice` when every choice is
    a module, else a :class:`~nasforge.compat.nni._mutable.Categorical`."""
    if choices and all(isinstance(c, nn.Module) for c in choices):
        return LayerChoice(list(choices), label=label)
    return Categorical(choices, label=label)


class ChosenInputs(nn.Module):
    """Returns the chosen inputs reduced (``sum``, ``mean``, ``concat``, or ``none``: the
    list): a frozen InputChoice, as NNI's ``ChosenInputs``."""

    def __init__(self, chosen: int | list[int], reduction: str) -> None:
        super().__init__()
        self.chosen = list(chosen) if isinstance(chosen, (list, tuple)) else [chosen]
        self.reduction = reduction

    def forward(self, candidate_inputs: list[torch.Tensor]) -> Any:
        picked = [candidate_inputs[i] for i in self.chosen]
        if self.reduction == "none":
            return picked
        if not picked:
            return None
        if len(picked) == 1:
            return picked[0]
        if self.reduction == "concat":
            return torch.cat(picked, dim=1)
        out = picked[0]
        for t in picked[1:]:
            out = out + t
        return out / len(picked) if self.reduction == "mean" else out

    def extra_repr(self) -> str:
        return f"chosen={self.chosen}, reduction={self.reduction!r}"


def _n_chosen(n_chosen: Any, label: str) -> int:
    if n_chosen is None:
        raise SpaceError(
            f"NNI construct not mapped: InputChoice {label!r} with n_chosen=None (any number of "
            "inputs); nasforge chooses a fixed number: give n_chosen=k, or one InputChoice "
            "per input"
        )
    return int(n_chosen)


class InputChoice(_nf.InputChoice):
    """NNI's ``InputChoice(n_candidates, n_chosen=1, reduction='sum', *, weights=None,
    label=None)``."""

    def __new__(
        cls,
        n_candidates: Any = _UNSET,
        n_chosen: int | None = 1,
        reduction: str = "sum",
        *,
        weights: Any = None,
        label: str | None = None,
    ) -> Any:
        if n_candidates is _UNSET:  # copy.deepcopy and pickle make the object bare
            return nn.Module.__new__(cls)
        with label_scope(label) as scope:  # NNI's CategoricalMultiple labels so
            full = scope.name
        k = _n_chosen(n_chosen, full)
        ctx = current()
        if isinstance(ctx, Frozen):
            _nf._check_input_choice(n_candidates, k, reduction, full)
            raw = ctx.resolve(full)  # checked below: NNI writes one input as a list, [i]
            value = raw[0] if k == 1 and isinstance(raw, list) and len(raw) == 1 else raw
            Decision(full, "input", _nf.input_choice_values(n_candidates, k)).index(value)
            return ChosenInputs(value, reduction)
        obj = nn.Module.__new__(cls)
        object.__setattr__(obj, "_nni_label", full)
        return obj

    def __init__(
        self,
        n_candidates: int,
        n_chosen: int | None = 1,
        reduction: str = "sum",
        *,
        weights: Any = None,
        label: str | None = None,
    ) -> None:
        full = self.__dict__["_nni_label"]
        super().__init__(n_candidates, _n_chosen(n_chosen, full), reduction, label=full)  # type: ignore[arg-type]


def _depth(depth: Any, label: str | None) -> Any:
    if isinstance(depth, tuple):
        low, high = depth
        return concretize(Categorical(list(range(low, high + 1)), label=label))
    if isinstance(depth, (int, Mutable)):
        return concretize(depth)
    raise SpaceError(
        f"NNI construct not mapped: Repeat depth {depth!r}; give an int, a (min, max) tuple or "
        "an nni.choice of ints"
    )


def _factory(blocks: Any) -> Any:
    if isinstance(blocks, nn.ModuleList) or not isinstance(blocks, (list, tuple)):
        return blocks
    items = list(blocks)

    def block(index: int) -> nn.Module:
        b = items[index]
        return b if isinstance(b, nn.Module) else b(index)

    return block


class Repeat(_nf.Repeat):
    """NNI's ``Repeat(blocks, depth, *, label=None)``: ``blocks`` a module (copied), a factory
    of the block index, or a list of either."""

    def __new__(cls, blocks: Any = _UNSET, depth: Any = _UNSET, *, label: str | None = None) -> Any:
        if blocks is _UNSET:  # copy.deepcopy and pickle make the object bare
            return nn.Module.__new__(cls)
        value = _depth(depth, label)
        ctx = current()
        if isinstance(ctx, Frozen):
            return _nf.Repeat._frozen(ctx, _factory(blocks), int(value))
        obj = nn.Module.__new__(cls)
        object.__setattr__(obj, "_nni_depth", value)
        return obj

    def __init__(self, blocks: Any, depth: Any, *, label: str | None = None) -> None:
        value = self.__dict__["_nni_depth"]
        super().__init__(_factory(blocks), value)
        self.depth_choice = depth if not isinstance(depth, tuple) else value
        self.min_depth, self.max_depth = min(self.depth_values), max(self.depth_values)

    def __len__(self) -> int:
        return max(self.depth_values)

    def __getitem__(self, index: int) -> nn.Module:
        return self.blocks()[index]


class _ListIdentity(nn.Module):
    def forward(self, x: list[torch.Tensor]) -> list[torch.Tensor]:
        return x


class _DefaultPostprocessor(nn.Module):
    def forward(self, this_cell: torch.Tensor, prev_cell: list[torch.Tensor]) -> torch.Tensor:
        return this_cell


def _cell_ops(op_candidates: Any, node: int, op: int, chosen: int | None) -> dict[str, nn.Module]:
    def one(c: Any) -> nn.Module:
        if isinstance(c, nn.Module):
            return copy.deepcopy(c)
        if callable(c):
            return c(node, op, chosen)  # type: ignore[no-any-return]
        raise SpaceError(f"NNI construct not mapped: Cell op candidate of type {type(c).__name__}")

    if isinstance(op_candidates, Mapping):
        return {k: one(c) for k, c in op_candidates.items()}
    if isinstance(op_candidates, (list, tuple)):
        return {str(i): one(c) for i, c in enumerate(op_candidates)}
    raise SpaceError(
        "NNI construct not mapped: Cell op_candidates as a callable returning the candidates; "
        "give a list or a dict of modules or of factories"
    )


class Cell(MutableModule):
    """NNI's ``Cell``: ``num_nodes`` nodes, each the sum of ``num_ops_per_node`` ops, each op a
    LayerChoice over ``op_candidates`` applied to an InputChoice over the earlier nodes; the
    output concatenates the nodes (``merge_op='all'``) or those no node uses (``loose_end``)."""

    def __init__(
        self,
        op_candidates: Any,
        num_nodes: int,
        num_ops_per_node: int = 1,
        num_predecessors: int = 1,
        merge_op: str = "all",
        preprocessor: nn.Module | None = None,
        postprocessor: nn.Module | None = None,
        concat_dim: int = 1,
        *,
        label: str | None = None,
    ) -> None:
        super().__init__()
        if merge_op not in ("all", "loose_end"):
            raise SpaceError(f"Cell merge_op must be 'all' or 'loose_end', got {merge_op!r}")
        self.label_scope = label_scope(label)
        self.preprocessor = preprocessor or _ListIdentity()
        self.ops = nn.ModuleList()
        self.inputs = nn.ModuleList()
        self.postprocessor = postprocessor or _DefaultPostprocessor()
        self.num_nodes, self.num_ops_per_node = num_nodes, num_ops_per_node
        self.num_predecessors, self.merge_op, self.concat_dim = (
            num_predecessors,
            merge_op,
            concat_dim,
        )
        self.output_node_indices = list(range(num_predecessors, num_predecessors + num_nodes))
        with self.label_scope:
            for i in range(num_predecessors, num_nodes + num_predecessors):
                ops, inputs = nn.ModuleList(), nn.ModuleList()
                for k in range(num_ops_per_node):
                    inp = InputChoice(i, 1, label=f"input_{i}_{k}")
                    chosen = inp.chosen[0] if isinstance(inp, ChosenInputs) else None
                    if chosen is not None and merge_op == "loose_end":
                        if chosen in self.output_node_indices:
                            self.output_node_indices.remove(chosen)
                    cands = _cell_ops(op_candidates, i, k, chosen)
                    ops.append(LayerChoice(cands, label=f"op_{i}_{k}"))
                    inputs.append(inp)
                self.ops.append(ops)
                self.inputs.append(inputs)

    @property
    def label(self) -> str:
        """Returns the cell's scope name."""
        return self.label_scope.name

    def forward(self, *inputs: Any) -> Any:
        if len(inputs) == 1 and isinstance(inputs[0], list):
            processed = list(inputs[0])
        else:
            processed = list(inputs)
        states: list[torch.Tensor] = self.preprocessor(processed)
        for ops, inps in zip(self.ops, self.inputs):
            current_state = [op(inp(states)) for op, inp in zip(ops, inps)]  # type: ignore[call-overload]
            states.append(torch.sum(torch.stack(current_state), 0))
        this_cell = torch.cat([states[k] for k in self.output_node_indices], self.concat_dim)
        return self.postprocessor(this_cell, processed)
