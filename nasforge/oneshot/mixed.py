"""Mixed operations: what a supernet puts where a recorded space has a choice.

:class:`~nasforge.oneshot.supernet.Supernet` replaces each ``LayerChoice`` by a
:class:`MixedLayer`, each ``InputChoice`` by a :class:`MixedInput` and each ``Repeat`` by a
:class:`MixedRepeat`; an algorithm (:class:`~nasforge.oneshot.supernet.Algorithm`) subclasses
them with its ``mixed_forward`` (a weighted sum, one sampled path, binary gates, ...). They
keep the candidates as children under their recorded names, declare their architecture
parameters on the supernet, and tag their outputs while the supernet traces its nodes.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.oneshot.common import frozen_bn_stats as _frozen_bn_stats
from nasforge.space import InputChoice, LayerChoice, Repeat

__all__ = ["Host", "Mixed", "MixedLayer", "MixedInput", "MixedRepeat", "is_zero"]


class Host(Protocol):
    """What a mixed op asks of the supernet that holds it (a
    :class:`~nasforge.oneshot.supernet.Supernet`): the architecture parameters by label, the
    algorithm (for messages) and, while the supernet traces its nodes, the trace."""

    algorithm: Any
    arch_params: nn.ParameterList
    key_of: dict[str, int]
    _trace: dict[int, tuple[MixedLayer, torch.Tensor]] | None
    _trace_inputs: list[tuple[MixedInput, list[MixedLayer | None]]]

    def declare_arch(self, label: str, n: int) -> None:
        """Returns None after giving ``label`` an architecture parameter of ``n`` entries."""


def is_zero(name: Any, module: nn.Module) -> bool:
    """Returns whether a candidate is the zero op, which export never keeps (DARTS convention)."""
    return name == "none" or bool(getattr(module, "nf_zero", False))


class Mixed(nn.Module):
    """Common part of the mixed ops: the label, a back reference to the supernet (not a child)."""

    kind = ""
    net: Host  # set with object.__setattr__ in __init__, so typed here

    def __init__(self, label: str, net: Host) -> None:
        super().__init__()
        self.label = label
        object.__setattr__(self, "net", net)  # not a submodule: no cycle in the module tree

    def arch(self, suffix: str = "") -> torch.Tensor:
        """Returns this op's architecture parameter (shared by every op with the same label)."""
        return self.net.arch_params[self.net.key_of[self.label + suffix]]


class MixedLayer(Mixed):
    """Returns a combination of the candidates of one ``LayerChoice`` (the algorithm decides).

    Invariants: candidate ``c`` is the child named ``str(c)``, as in the recorded LayerChoice.
    """

    kind = "layer"

    def __init__(self, choice: LayerChoice, net: Host) -> None:
        super().__init__(str(choice.label), net)
        self.names: list[Any] = list(choice.names)
        for name in self.names:
            if hasattr(self, str(name)):
                raise SpaceError(
                    f"LayerChoice {self.label!r}: candidate name {name!r} is taken by the "
                    f"{net.algorithm.name} supernet's mixed op ({type(self).__name__}.{name}); "
                    "rename the candidate"
                )
            self.add_module(str(name), choice.candidate(name))
        self.node: MixedInput | None = None  # set when this layer is an edge of a node
        self._shapes: dict[tuple[int, ...], torch.Size] = {}
        net.declare_arch(self.label, len(self.names))

    def candidates(self) -> list[nn.Module]:
        """Returns the candidate modules in order."""
        return [self._modules[str(n)] for n in self.names]  # type: ignore[misc]

    def exportable(self) -> list[int]:
        """Returns the candidate positions export may choose (all but the zero op)."""
        keep = [
            i for i, (n, m) in enumerate(zip(self.names, self.candidates())) if not is_zero(n, m)
        ]
        return keep or list(range(len(self.names)))

    def out_shape(self, x: torch.Tensor) -> torch.Size:
        """Returns the output shape of the candidates for input ``x`` (computed once per shape)."""
        key = tuple(x.shape[1:])  # per-example shape: the batch size may vary
        if key not in self._shapes:
            cand = self.candidates()[self.exportable()[0]]
            with torch.no_grad(), _frozen_bn_stats(cand):
                self._shapes[key] = cand(x[:1]).shape[1:]
        return torch.Size((x.shape[0], *self._shapes[key]))

    def zeros(self, x: torch.Tensor) -> torch.Tensor:
        """Returns a zero tensor of the output shape that occupies no memory (stride 0)."""
        return x.new_zeros(()).expand(self.out_shape(x))

    def mixed_forward(self, *args: Any) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        # keyword inputs: a module-level site of a third-party model (a transformer layer)
        out = self.mixed_forward(*args, **kwargs) if kwargs else self.mixed_forward(*args)
        if self.net._trace is not None:
            out = out.view_as(out)  # a distinct object even when a candidate returns its input
            self.net._trace[id(out)] = (self, out)  # holding ``out`` keeps its id unique
            if args and isinstance(args[0], torch.Tensor):
                self._shapes[tuple(args[0].shape[1:])] = out.shape[1:]
        return out


class MixedInput(Mixed):
    """Returns a combination of the inputs of one ``InputChoice``; a *node* when every input is
    an edge (a mixed LayerChoice output), in which case ``edges`` lists them by input position."""

    kind = "input"

    def __init__(self, choice: InputChoice, net: Host) -> None:
        super().__init__(str(choice.label), net)
        self.n_candidates, self.n_chosen = choice.n_candidates, choice.n_chosen
        self.reduction = choice.reduction
        if self.n_chosen > 1 and self.reduction in ("concat", "none"):
            raise SpaceError(
                f"InputChoice {self.label!r}: reduction {self.reduction!r} with n_chosen="
                f"{self.n_chosen} changes shapes between architectures, which one-shot search "
                "cannot mix; use reduction 'sum' or 'mean', or search this space multi-trial"
            )
        self.edges: list[MixedLayer] = []
        net.declare_arch(self.label, self.n_candidates)

    def reduce(self, tensors: list[torch.Tensor], n: int) -> torch.Tensor:
        """Returns the sum (or mean over ``n``) of ``tensors``."""
        out = tensors[0]
        for t in tensors[1:]:
            out = out + t
        return out / n if self.reduction == "mean" else out

    def mixed_forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        if len(inputs) != self.n_candidates:
            raise ArchitectureError(
                f"InputChoice {self.label!r} received {len(inputs)} inputs, expected "
                f"n_candidates={self.n_candidates}"
            )
        if self.net._trace is not None:
            found = [self.net._trace.get(id(t)) for t in inputs]
            self.net._trace_inputs.append((self, [f[0] if f else None for f in found]))
        return self.mixed_forward(inputs)


class MixedRepeat(Mixed):
    """Returns the output of a ``Repeat`` whose depth the algorithm mixes or samples.

    Invariants: block ``i`` is the child named ``str(i)``; ``depths`` are sorted.
    """

    kind = "depth"

    def __init__(self, rep: Repeat, net: Host) -> None:
        label = rep.label
        if label is None:
            raise SpaceError(
                f"a Repeat with depths {list(rep.depth_values)} takes its depth from an "
                "expression of value choices; one-shot search needs the depth to be its own "
                "decision: pass depth=(min, max) or depth=nf.choice([...], label=...)"
            )
        super().__init__(label, net)
        for i, block in enumerate(rep.blocks()):
            self.add_module(str(i), block)
        self.depths: list[int] = sorted(rep.depth_values)
        self.values: list[int] = list(rep.depth_values)  # decision order
        net.declare_arch(self.label, len(self.values))

    def blocks(self) -> list[nn.Module]:
        """Returns every block, up to the largest depth."""
        return list(self._modules.values())  # type: ignore[arg-type]

    def outputs(self, x: Any, upto: int) -> dict[int, Any]:
        """Returns the output after each candidate depth ``<= upto`` (depth 0 is ``x``)."""
        outs: dict[int, Any] = {}
        if 0 in self.values:
            outs[0] = x
        for i, block in enumerate(self.blocks()[:upto]):
            x = block(x)
            if i + 1 in self.values:
                outs[i + 1] = x
        return outs
