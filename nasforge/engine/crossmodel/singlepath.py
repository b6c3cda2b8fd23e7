"""The super-graph: a recorded model space made runnable one architecture at a time by control
flow (the engine's own, so that the engine family needs nothing from ``oneshot``).

A deep copy of the space has each ``LayerChoice`` replaced by a module that runs its chosen
candidate, each ``Repeat`` of several depths by one that runs its first ``depth`` blocks, each
``InputChoice`` by a selection of its chosen inputs. Children keep the recorded names, so the
super-graph's state-dict keys are the space's, and the chosen path of an architecture holds
exactly the weights the frozen model of that architecture holds.

Invariants: after ``activate(arch)`` the super-graph computes what ``freeze(space, arch)``
computes with the same weights; the space itself is not modified.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from nasforge.errors import SpaceError
from nasforge.space.model_space import ModelSpace
from nasforge.space.modules import InputChoice, LayerChoice, Repeat, SelectInputs

__all__ = ["SinglePath"]


class _PathLayer(nn.Module):
    """Returns the output of the chosen candidate (children: the candidates, by name)."""

    def __init__(self, choice: LayerChoice) -> None:
        super().__init__()
        self.label = str(choice.label)
        for name in choice.names:
            self.add_module(str(name), choice.candidate(name))
        self.chosen = str(choice.names[0])

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        chosen = self._modules[self.chosen]
        assert chosen is not None, f"{self.label}: candidate {self.chosen!r} was removed"
        return chosen(*args, **kwargs)


class _PathRepeat(nn.Module):
    """Returns the output of the first ``depth`` blocks (children: every block, ``0, 1, ...``)."""

    rep: Repeat  # set with object.__setattr__: not a child module

    def __init__(self, rep: Repeat) -> None:
        super().__init__()
        object.__setattr__(self, "rep", rep)  # for depth_of; not a child
        for i, block in enumerate(rep.blocks()):
            self.add_module(str(i), block)
        self.depth = max(rep.depth_values)

    def forward(self, x: Any) -> Any:
        for i in range(self.depth):
            block = self._modules[str(i)]
            assert block is not None, f"repeat block {i} was removed"
            x = block(x)
        return x


class _PathInput(SelectInputs):
    """Returns the reduction of the chosen inputs (a frozen InputChoice that can change)."""

    def __init__(self, choice: InputChoice) -> None:
        super().__init__(list(range(choice.n_chosen)), choice.reduction)
        self.label = str(choice.label)


class SinglePath(nn.Module):
    """Returns the space's forward along the active architecture's path.

    Raises:
        SpaceError: a decision is not a LayerChoice, InputChoice or Repeat reachable in the
            module tree (e.g. a value choice that sets a width: its architectures do not share
            one set of weights).
    """

    space: ModelSpace  # set with object.__setattr__: not a child module

    def __init__(self, space: ModelSpace) -> None:
        super().__init__()
        object.__setattr__(self, "space", space)
        self.model = copy.deepcopy(space)
        self._labels: set[str] = set()
        self._convert(self.model)
        missing = [d.label for d in space.search_space().decisions if d.label not in self._labels]
        if missing:
            raise SpaceError(
                f"decision(s) {missing} are not LayerChoice/InputChoice/Repeat modules, so one "
                "super-graph cannot hold every architecture's weights; search this space "
                "without weight sharing"
            )

    def _convert(self, module: nn.Module) -> None:
        for name, child in list(module.named_children()):
            self._convert(child)
            if isinstance(child, LayerChoice):
                module._modules[name] = _PathLayer(child)
            elif isinstance(child, InputChoice):
                module._modules[name] = _PathInput(child)
            elif isinstance(child, Repeat) and len(child.depth_values) > 1:
                module._modules[name] = _PathRepeat(child)
            elif isinstance(child, Repeat):
                module._modules[name] = nn.Sequential(*child.blocks()[: child.depth_values[0]])
            else:
                continue
            label = getattr(module._modules[name], "label", None)
            label = label if not isinstance(child, Repeat) else child.label
            if label is not None:
                self._labels.add(str(label))

    def activate(self, arch: Mapping[str, Any]) -> None:
        """Makes the super-graph compute architecture ``arch``."""
        for m in self.model.modules():
            if isinstance(m, _PathLayer):
                m.chosen = str(arch[m.label])
            elif isinstance(m, _PathInput):
                v = arch[m.label]
                m.chosen = [v] if isinstance(v, int) else list(v)
            elif isinstance(m, _PathRepeat):
                m.depth = m.rep.depth_of(arch)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.model(*args, **kwargs)
