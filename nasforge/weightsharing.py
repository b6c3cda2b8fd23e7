"""The weight-sharing toolkit every supernet uses: one protocol, one batch-norm recalibration,
one accuracy loop.

A *weight-sharing supernet* (a one-shot :class:`~nasforge.oneshot.supernet.Supernet`, an
once-for-all :class:`~nasforge.ofa.mobilenet.OFAMobileNetV3`, a pipeline-trained chain space)
can make any architecture of its space active and hand it out as a plain module whose weights
are copies of its own (:class:`WeightSharing`). A sub-network's batch-norm statistics differ
from the shared ones, so it is measured after :func:`recalibrate_bn`; :func:`accuracy` is the
one evaluation loop.

The single-path supernet lives here too, shared by the engine's weight-sharing trials
(:mod:`nasforge.engine.crossmodel`) and SPOS (:mod:`nasforge.oneshot.spos`): the path ops
(:class:`PathLayer`, :class:`PathInput`, :class:`PathRepeat`) run only the candidate, inputs and
depth an architecture picks, :func:`follow_path` points every one of them at an architecture,
:func:`convert_choices` puts them (or a one-shot algorithm's mixed ops) in place of a space's
choices, and :class:`SinglePath` is the plain supernet built from them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from nasforge.errors import SpaceError
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.space.model_space import ModelSpace
from nasforge.space.modules import InputChoice, LayerChoice, Reduction, Repeat, SelectInputs

__all__ = [
    "WeightSharing",
    "recalibrate_bn",
    "accuracy",
    "accuracy_and_loss",
    "SinglePath",
    "PathLayer",
    "PathInput",
    "PathRepeat",
    "follow_path",
    "convert_choices",
]


@runtime_checkable
class WeightSharing(Protocol):
    """What a weight-sharing supernet offers to searches and evaluations."""

    def activate(self, arch: Mapping[str, object]) -> None:
        """Makes the supernet compute architecture ``arch``."""
        ...

    def extract(self, arch: Mapping[str, object]) -> nn.Module:
        """Returns ``arch`` as a plain module with weights copied from the supernet."""
        ...


@torch.no_grad()
def recalibrate_bn(
    model: nn.Module, images: torch.Tensor | Iterable[torch.Tensor], batch_size: int = 256
) -> None:
    """Resets every batch norm's running statistics of ``model`` and re-estimates them as the
    cumulative average over ``images`` (a tensor, cut into batches, or an iterable of
    batches), in train mode; restores the module's mode and momenta afterwards.

    Invariants: only batch-norm buffers change; the statistics equal those of one pass over
    the given batches with ``momentum=None``.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batches
    was = model.training
    model.train()
    if isinstance(images, torch.Tensor):
        whole = images
        images = (whole[i : i + batch_size] for i in range(0, len(whole), batch_size))
    for x in images:
        model(x)
    model.train(was)
    for bn, m in zip(bns, momenta):
        bn.momentum = m


def _batched(
    data: tuple[torch.Tensor, torch.Tensor] | Iterable[tuple[torch.Tensor, torch.Tensor]],
    batch_size: int,
    device: str | torch.device | None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Returns the batches of ``data`` (an ``(x, y)`` pair of tensors, cut into batches of
    ``batch_size``, or an iterable of batches), moved to ``device`` when one is given."""
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], torch.Tensor):
        xs, ys = data
        data = (
            (xs[i : i + batch_size], ys[i : i + batch_size]) for i in range(0, len(xs), batch_size)
        )
    for x, y in data:
        yield (x, y) if device is None else (x.to(device), y.to(device))


@torch.no_grad()
def accuracy(
    model: nn.Module,
    data: tuple[torch.Tensor, torch.Tensor] | Iterable[tuple[torch.Tensor, torch.Tensor]],
    batch_size: int = 256,
    device: str | torch.device | None = None,
    ranks: Ranks = ONE,
) -> float:
    """Returns the top-1 accuracy of ``model`` in eval mode on ``data``: an ``(x, y)`` pair
    of tensors (cut into batches) or an iterable of such batches (a DataLoader); the module's
    mode is restored afterwards. On several ``ranks`` (every rank calling it with the same
    model and data) each rank scores its shard and the counts are summed: the same accuracy,
    sooner."""
    return accuracy_and_loss(model, data, batch_size, device, ranks, loss=False)[0]


@torch.no_grad()
def accuracy_and_loss(
    model: nn.Module,
    data: tuple[torch.Tensor, torch.Tensor] | Iterable[tuple[torch.Tensor, torch.Tensor]],
    batch_size: int = 256,
    device: str | torch.device | None = None,
    ranks: Ranks = ONE,
    loss: bool = True,
) -> tuple[float, float]:
    """Returns (top-1 accuracy, mean cross-entropy) of a classifier ``model`` in eval mode on
    ``data``, from one pass (as :func:`accuracy` reads it, sharded across ``ranks`` alike; the
    loss is 0 without ``loss``); the module's mode is restored afterwards."""
    was = model.training
    model.eval()
    correct = total = 0
    summed = 0.0
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], torch.Tensor):
        data = ranks.shard(data)
    elif ranks.distributed:
        data = (ranks.shard(b) for b in data)
    for x, y in _batched(data, batch_size, device):
        out = model(x)
        correct += int((out.argmax(-1) == y).sum())
        if loss:
            summed += float(nn.functional.cross_entropy(out, y, reduction="sum"))
        total += len(y)
    model.train(was)
    if ranks.distributed:
        right, summed, n = ranks.all_reduce_tensors([], correct, summed, total)
        return right / max(1.0, n), summed / max(1.0, n)
    n = max(1, total)
    return correct / n, summed / n


# -- the single-path supernet ------------------------------------------------------------------
# One module per converted choice runs only the path an architecture picks. The three path ops
# below carry that behaviour; SinglePath is built from them, and so are SPOS's mixed ops
# (nasforge.oneshot.spos), which add the supernet's bookkeeping on top: one rule, one walk.


class PathLayer(nn.Module):
    """Returns the chosen candidate's output: the path op of a ``LayerChoice`` (candidate
    ``c`` is the child named ``str(c)``, in ``names``; ``chosen`` is its position)."""

    label: str
    names: list[Any]
    chosen: int = 0

    def follow(self, arch: Mapping[str, Any]) -> None:
        """Makes this op compute ``arch``'s candidate (``arch`` may spell it as text, as JSON
        keys do)."""
        value = arch[self.label]
        if value not in self.names:
            value = {str(n): n for n in self.names}[str(value)]
        self.chosen = self.names.index(value)

    def path(self, *args: Any, **kwargs: Any) -> Any:
        """Returns the chosen candidate's output."""
        chosen = self._modules[str(self.names[self.chosen])]
        assert chosen is not None, f"{self.label}: candidate {self.chosen} was removed"
        return chosen(*args, **kwargs)


class PathInput(nn.Module):
    """Returns the reduction (``sum``, ``mean``, ``concat``) of the chosen inputs: the path op
    of an ``InputChoice``."""

    label: str
    reduction: Reduction
    chosen: list[int] = [0]

    def follow(self, arch: Mapping[str, Any]) -> None:
        """Makes this op pick ``arch``'s inputs."""
        value = arch[self.label]
        self.chosen = [value] if isinstance(value, int) else list(value)

    def path(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        """Returns the reduction of the chosen inputs: what a frozen InputChoice's
        ``SelectInputs`` computes (its forward, run on this op's ``chosen`` and ``reduction``;
        SelectInputs itself stays a TorchScript-able module)."""
        out: torch.Tensor = SelectInputs.forward(self, list(inputs))  # type: ignore[arg-type]
        return out


class PathRepeat(nn.Module):
    """Returns the output after the first ``chosen`` blocks: the path op of a ``Repeat`` of
    several depths (block ``i`` is the child named ``str(i)``)."""

    label: str
    chosen: int = 0

    def depth_of(self, arch: Mapping[str, Any]) -> int:
        """Returns the depth ``arch`` gives this repeat."""
        return int(arch[self.label])

    def follow(self, arch: Mapping[str, Any]) -> None:
        """Makes this op run ``arch``'s depth."""
        self.chosen = self.depth_of(arch)

    def path(self, x: Any) -> Any:
        """Returns the output after the chosen number of blocks."""
        for block in list(self._modules.values())[: self.chosen]:
            assert block is not None, f"{self.label}: a block was removed"
            x = block(x)
        return x


PATH_OPS = (PathLayer, PathInput, PathRepeat)


def follow_path(root: nn.Module, arch: Mapping[str, Any]) -> None:
    """Makes every path op under ``root`` compute architecture ``arch``'s path."""
    for m in root.modules():
        if isinstance(m, PATH_OPS):
            m.follow(arch)


def convert_choices(
    module: nn.Module,
    layer: Callable[[LayerChoice], nn.Module],
    input: Callable[[InputChoice], nn.Module],
    repeat: Callable[[Repeat], nn.Module],
) -> list[nn.Module]:
    """Returns the choices it replaced, after replacing in place, innermost first, every
    ``LayerChoice``, ``InputChoice`` and ``Repeat`` of several depths under ``module`` by what
    ``layer``, ``input`` and ``repeat`` build from it (a fixed-depth ``Repeat`` becomes a plain
    ``nn.Sequential`` of its blocks). Children keep their names, so state-dict keys are the
    space's.

    Invariants: the order of the calls is the same for the same module tree (the order
    supernets declare their architecture parameters in).
    """
    replaced: list[nn.Module] = []
    for name, child in list(module.named_children()):
        replaced += convert_choices(child, layer, input, repeat)  # candidates first
        if isinstance(child, LayerChoice):
            module._modules[name] = layer(child)
        elif isinstance(child, InputChoice):
            module._modules[name] = input(child)
        elif isinstance(child, Repeat) and len(child.depth_values) > 1:
            module._modules[name] = repeat(child)
        elif isinstance(child, Repeat):
            module._modules[name] = nn.Sequential(*child.blocks()[: child.depth_values[0]])
        else:
            continue
        replaced.append(child)
    return replaced


class _Layer(PathLayer):
    def __init__(self, choice: LayerChoice) -> None:
        super().__init__()
        self.label, self.names = str(choice.label), list(choice.names)
        for name in self.names:
            self.add_module(str(name), choice.candidate(name))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.path(*args, **kwargs)


class _Input(PathInput):
    def __init__(self, choice: InputChoice) -> None:
        super().__init__()
        self.label, self.reduction = str(choice.label), choice.reduction
        self.chosen = list(range(choice.n_chosen))

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.path(inputs)


class _Repeat(PathRepeat):
    rep: Repeat  # set with object.__setattr__: not a child module

    def __init__(self, rep: Repeat) -> None:
        super().__init__()
        self.label = str(rep.label)  # "None" for a depth derived from value choices
        object.__setattr__(self, "rep", rep)  # for depth_of; not a child
        for i, block in enumerate(rep.blocks()):
            self.add_module(str(i), block)
        self.chosen = max(rep.depth_values)

    def depth_of(self, arch: Mapping[str, Any]) -> int:
        return self.rep.depth_of(arch)  # also a depth derived from value choices

    def forward(self, x: Any) -> Any:
        return self.path(x)


class SinglePath(nn.Module):
    """Returns the space's forward along the active architecture's path: the single-path
    supernet (SPOS's, as the engine's weight-sharing trials train it). ``model`` is a deep copy
    of the space whose choices are path ops; its state-dict keys are the space's, so any
    architecture's weights can be looked up in it.

    Invariants: after ``activate(arch)`` it computes what ``freeze(space, arch)`` computes with
    the same weights; the space itself is not modified.

    Raises:
        SpaceError: a decision is not a LayerChoice, InputChoice or Repeat reachable in the
            module tree (e.g. a value choice that sets a width: its architectures do not share
            one set of weights).
    """

    space: ModelSpace  # set with object.__setattr__: not a child module

    def __init__(self, space: ModelSpace) -> None:
        super().__init__()
        object.__setattr__(self, "space", space)
        self.model: nn.Module = copy.deepcopy(space)
        replaced = convert_choices(self.model, _Layer, _Input, _Repeat)
        labels = {str(c.label) for c in replaced if getattr(c, "label", None) is not None}
        missing = [d.label for d in space.search_space().decisions if d.label not in labels]
        if missing:
            raise SpaceError(
                f"decision(s) {missing} are not LayerChoice/InputChoice/Repeat modules, so one "
                "super-graph cannot hold every architecture's weights; search this space "
                "without weight sharing"
            )

    def activate(self, arch: Mapping[str, Any]) -> None:
        """Makes the super-graph compute architecture ``arch``."""
        follow_path(self.model, arch)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)
