"""The inline choices that are modules: ``LayerChoice``, ``InputChoice`` and ``Repeat``.

Each is constructed in one of two contexts (see :mod:`nasforge.space.context`):

    recording   the module itself, holding every candidate (every block, for Repeat), so that a
                supernet can be made of it and nested choices are recorded;
    frozen      ``__new__`` returns the *chosen* plain module instead: the candidate module
                (LayerChoice), a fixed input selector (InputChoice) or an ``nn.Sequential`` of
                the chosen number of blocks (Repeat). Candidates given as factories are built
                only when chosen.

A recorded module refuses ``forward``: a space is not a model until it is frozen or made into a
supernet.
"""

from __future__ import annotations

import copy
import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import nn

from nasforge.errors import SpaceError
from nasforge.space.context import Declaration, Frozen, Recording, current, require
from nasforge.space.expr import ChoiceInt, ChoiceValue, Leaf

__all__ = ["LayerChoice", "InputChoice", "Repeat", "SelectInputs", "SelectInputList"]

Candidate = nn.Module | Callable[[], nn.Module]
Reduction = Literal["sum", "mean", "concat", "none"]


def _not_runnable(module: nn.Module) -> SpaceError:
    return SpaceError(
        f"{type(module).__name__} {getattr(module, 'label', '')!r} is part of a model space, not "
        "a model: freeze an architecture with nasforge.freeze(space, arch), or build a supernet "
        "(nasforge.oneshot) before calling forward"
    )


def _candidate_names(candidates: Sequence[Candidate] | Mapping[str, Candidate]) -> list[Any]:
    if isinstance(candidates, Mapping):
        names = list(candidates)
        for n in names:
            if not isinstance(n, str) or not n or "." in n:
                raise SpaceError(
                    f"LayerChoice candidate names must be non-empty strings without '.', got {n!r}"
                )
        return names
    if isinstance(candidates, (list, tuple, nn.ModuleList)):
        return list(range(len(candidates)))
    raise SpaceError(
        f"LayerChoice candidates must be a list or an ordered dict of modules (or of factories "
        f"returning modules), got {type(candidates).__name__}"
    )


def _build(candidate: Candidate, where: str) -> nn.Module:
    if isinstance(candidate, nn.Module):
        return candidate
    if callable(candidate):
        module = candidate()
        if not isinstance(module, nn.Module):
            raise SpaceError(
                f"{where}: the factory returned {type(module).__name__}, expected an nn.Module"
            )
        return module
    raise SpaceError(
        f"{where}: a candidate must be an nn.Module or a factory returning one, got "
        f"{type(candidate).__name__}"
    )


def _items(candidates: Sequence[Candidate] | Mapping[str, Candidate]) -> list[Candidate]:
    return list(candidates.values()) if isinstance(candidates, Mapping) else list(candidates)


class _ChoiceModule(nn.Module):
    """Base of the choice modules: constructed under a frozen context, ``__new__`` returns the
    chosen plain module from ``cls._frozen`` instead of an instance; recorded, it refuses forward.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = current()
        if isinstance(ctx, Frozen) and (args or kwargs):  # no arguments: unpickling, deepcopy
            return cls._frozen(ctx, *args, **kwargs)
        return super().__new__(cls)

    @staticmethod
    def _frozen(ctx: Frozen, *args: Any, **kwargs: Any) -> nn.Module:
        raise NotImplementedError

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_runnable(self)


class LayerChoice(_ChoiceModule):
    """Returns, once frozen, exactly one of ``candidates``; while recording, holds them all.

    ``candidates`` is a list or an ordered dict of modules, or of zero-argument factories that
    return modules (a factory is called only for a chosen candidate when freezing). The
    decision's values are the list indices or the dict keys.

    Invariants: children are named by candidate (``str(index)`` for a list), in order.
    """

    @staticmethod
    def _frozen(
        ctx: Frozen,
        candidates: Sequence[Candidate] | Mapping[str, Candidate],
        label: str | None = None,
    ) -> nn.Module:
        names = _candidate_names(candidates)
        value = ctx.resolve(label, tuple(names))
        index = names.index(value)
        with ctx.scope(index):
            return _build(_items(candidates)[index], f"LayerChoice {label!r}")

    def __init__(
        self,
        candidates: Sequence[Candidate] | Mapping[str, Candidate],
        label: str | None = None,
    ) -> None:
        super().__init__()
        ctx = require("LayerChoice")
        assert isinstance(ctx, Recording)
        names = _candidate_names(candidates)
        if not names:
            raise SpaceError(f"LayerChoice {label!r} has no candidates")
        self._declaration = ctx.declare("layer", tuple(names), label, self)
        self.names: list[Any] = names
        for i, (name, cand) in enumerate(zip(names, _items(candidates))):
            with ctx.scope(i):
                self.add_module(str(name), _build(cand, f"LayerChoice {label!r}"))

    @property
    def label(self) -> str | None:
        """Returns the decision's label (automatic labels are set when recording ends)."""
        return self._declaration.label

    def candidate(self, name: int | str) -> nn.Module:
        """Returns the candidate module called ``name`` (an index for list candidates)."""
        return self._modules[str(name)]  # type: ignore[return-value]

    def candidates(self) -> list[nn.Module]:
        """Returns the candidate modules in order."""
        return [self._modules[str(n)] for n in self.names]  # type: ignore[misc]


class SelectInputs(nn.Module):
    """Returns the reduction of the chosen inputs among a list of tensors (a frozen InputChoice)."""

    def __init__(self, chosen: Sequence[int], reduction: str) -> None:
        super().__init__()
        self.chosen = list(chosen)
        self.reduction = reduction

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        picked = [inputs[i] for i in self.chosen]
        if self.reduction == "concat":
            return torch.cat(picked, dim=1)
        out = picked[0]
        for t in picked[1:]:
            out = out + t
        if self.reduction == "mean":
            out = out / len(picked)
        return out

    def extra_repr(self) -> str:
        return f"chosen={self.chosen}, reduction={self.reduction!r}"


class SelectInputList(nn.Module):
    """Returns the chosen inputs as a list (a frozen InputChoice with reduction ``none``)."""

    def __init__(self, chosen: Sequence[int]) -> None:
        super().__init__()
        self.chosen = list(chosen)

    def forward(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [inputs[i] for i in self.chosen]


def input_choice_values(n_candidates: int, n_chosen: int) -> tuple[Any, ...]:
    """Returns the candidate values of an InputChoice: indices, or sorted index lists."""
    if n_chosen == 1:
        return tuple(range(n_candidates))
    return tuple(list(c) for c in itertools.combinations(range(n_candidates), n_chosen))


def _check_input_choice(n_candidates: Any, n_chosen: Any, reduction: Any, label: Any) -> None:
    if not isinstance(n_candidates, int) or n_candidates < 1:
        raise SpaceError(
            f"InputChoice {label!r}: n_candidates must be a positive int, got {n_candidates!r}"
        )
    if not isinstance(n_chosen, int) or not 1 <= n_chosen <= n_candidates:
        raise SpaceError(
            f"InputChoice {label!r}: n_chosen must be in 1..{n_candidates}, got {n_chosen!r}"
        )
    if reduction not in ("sum", "mean", "concat", "none"):
        raise SpaceError(
            f"InputChoice {label!r}: reduction must be one of sum, mean, concat, "
            f"none; got {reduction!r}"
        )


class InputChoice(_ChoiceModule):
    """Returns, once frozen, a selector of ``n_chosen`` of ``n_candidates`` input tensors,
    reduced by ``reduction``; called with the list of candidate tensors.

    The decision's values are input indices (``n_chosen == 1``) or sorted lists of indices.
    """

    @staticmethod
    def _frozen(
        ctx: Frozen,
        n_candidates: int,
        n_chosen: int = 1,
        reduction: Reduction = "sum",
        label: str | None = None,
    ) -> nn.Module:
        _check_input_choice(n_candidates, n_chosen, reduction, label)
        value = ctx.resolve(label, input_choice_values(n_candidates, n_chosen))
        chosen = [value] if isinstance(value, int) else list(value)
        return SelectInputList(chosen) if reduction == "none" else SelectInputs(chosen, reduction)

    def __init__(
        self,
        n_candidates: int,
        n_chosen: int = 1,
        reduction: Reduction = "sum",
        label: str | None = None,
    ) -> None:
        super().__init__()
        _check_input_choice(n_candidates, n_chosen, reduction, label)
        ctx = require("InputChoice")
        assert isinstance(ctx, Recording)
        self.n_candidates, self.n_chosen, self.reduction = n_candidates, n_chosen, reduction
        values = input_choice_values(n_candidates, n_chosen)
        self._declaration = ctx.declare("input", values, label, self)

    @property
    def label(self) -> str | None:
        return self._declaration.label

    def chosen(self, value: int | Sequence[int]) -> list[int]:
        """Returns the input indices that decision value ``value`` selects."""
        return [value] if isinstance(value, int) else list(value)


BlockFactory = Callable[..., nn.Module] | nn.Module


def _depth_values(depth: Any, label: str | None) -> tuple[tuple[int, ...], Leaf | None]:
    """Returns the candidate depths and, when the depth is a value choice, its leaf."""
    if isinstance(depth, ChoiceValue):
        values = depth.candidates()
        leaves = depth.expr.leaves()
        leaf = leaves[0] if len(leaves) == 1 and depth.expr is leaves[0] else None
    elif isinstance(depth, int):
        values, leaf = [depth], None
    elif isinstance(depth, tuple) and len(depth) == 2 and all(isinstance(d, int) for d in depth):
        values, leaf = list(range(depth[0], depth[1] + 1)), None
    else:
        raise SpaceError(
            f"Repeat {label!r}: depth must be an int, a (min, max) tuple or a value "
            f"choice of ints, got {depth!r}"
        )
    if not values or any(not isinstance(v, int) or v < 0 for v in values):
        raise SpaceError(f"Repeat {label!r}: depths must be non-negative ints, got {values}")
    return tuple(values), leaf


def _block(factory: BlockFactory, index: int) -> nn.Module:
    if isinstance(factory, nn.Module):
        return copy.deepcopy(factory)
    try:
        n_params = len(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        n_params = 1
    block = factory(index) if n_params >= 1 else factory()
    if not isinstance(block, nn.Module):
        raise SpaceError(
            f"Repeat: the block factory returned {type(block).__name__}, expected an nn.Module"
        )
    return block


class Repeat(_ChoiceModule):
    """Returns, once frozen, an ``nn.Sequential`` of the chosen number of blocks; while
    recording, holds the largest number of blocks as children ``0, 1, ...``.

    ``block_factory`` is a callable taking the block index (or nothing) and returning a module,
    or a module that is deep-copied per block. ``depth`` is an int, a ``(min, max)`` tuple
    (inclusive), or a value choice of ints. Block ``i`` of any depth is the same module, so the
    frozen model's state-dict keys are those of the first ``d`` blocks of the space.
    """

    @staticmethod
    def _frozen(
        ctx: Frozen, block_factory: BlockFactory, depth: Any, label: str | None = None
    ) -> nn.Module:
        if isinstance(depth, tuple):
            depth = ctx.resolve(label, tuple(range(depth[0], depth[1] + 1)))
        elif not isinstance(depth, int) or depth < 0:
            raise SpaceError(f"Repeat {label!r}: depth {depth!r} is not a non-negative int")
        blocks = []
        for i in range(depth):
            with ctx.scope(i):
                blocks.append(_block(block_factory, i))
        return nn.Sequential(*blocks)

    def __init__(
        self, block_factory: BlockFactory, depth: int | tuple[int, int], label: str | None = None
    ) -> None:
        super().__init__()
        ctx = require("Repeat")
        assert isinstance(ctx, Recording)
        values, leaf = _depth_values(depth, label)
        self._declaration: Declaration | None = None
        if isinstance(depth, tuple):
            self._declaration = ctx.declare("depth", values, label, self)
        elif leaf is not None:  # a value choice used as a depth is a depth decision
            assert leaf.declaration is not None, "a recorded value choice is declared"
            leaf.declaration.kind = "depth"
        self.depth_values: tuple[int, ...] = values
        self.depth = depth if isinstance(depth, ChoiceInt) else None
        self._leaf = leaf
        for i in range(max(values)):
            with ctx.scope(i):
                self.add_module(str(i), _block(block_factory, i))

    @property
    def label(self) -> str | None:
        """Returns the label of the depth decision (None when the depth is fixed or derived)."""
        if self._declaration is not None:
            return self._declaration.label
        if self._leaf is not None:
            return self._leaf.label
        return None

    def blocks(self) -> list[nn.Module]:
        """Returns every block, up to the largest depth."""
        return list(self._modules.values())  # type: ignore[arg-type]

    def depth_of(self, arch: Mapping[str, Any]) -> int:
        """Returns the number of blocks that architecture ``arch`` keeps."""
        if self._declaration is not None:
            label = self._declaration.label
            assert label is not None, "labels are assigned when recording ends"
            return int(arch[label])
        if self.depth is not None:
            return int(self.depth.evaluate(arch))
        return self.depth_values[0]
