"""Path-level NAS (Cai et al. 2018) on nasforge's growing spaces: the network of a path-level
state, the net2net weight transfer of each edit, and the search loop in which each child
inherits its parent's trained weights.

    model     PathNet(state): the tree of dense layers (``nasforge.spaces.path_edits``), then a
              linear head; weights keyed by layer id, so an edit leaves the others in place
    inherit   deepen: an identity layer; replicate: two copies, averaged; split: the parent's
              rows cut in two (each child computes what its parent did)
    search    ``grow_search``: ask a history (a strategy over edits), grow it from the trained
              weights of its parent (the history less its last edit; else its longest trained
              prefix), train it briefly, tell its validation accuracy
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from nasforge.space.edits import EDITS, Edit, State
from nasforge.space.growing import GrowingSpace
from nasforge.spaces.path_edits import PathEdits, width

__all__ = ["PathLevelSpace", "PathNet", "grow_search"]

log = logging.getLogger(__name__)


class PathNet(nn.Module):
    """Returns the logits of a path-level network for inputs ``(N, n_inputs)`` (or images,
    which it flattens)."""

    def __init__(self, state: State) -> None:
        super().__init__()
        self.state = state
        self.layers = nn.ModuleDict()
        self._make(state["body"], state["n_inputs"])
        self.head = nn.Linear(width(state["body"], state["n_inputs"]), state["n_outputs"])

    def _make(self, seq: list[dict[str, Any]], n_in: int) -> int:
        for node in seq:
            if node["type"] == "dense":
                self.layers[node["id"]] = nn.Linear(n_in, node["units"])
                n_in = node["units"]
            else:
                outs = [self._make(b, n_in) for b in node["branches"]]
                n_in = outs[0] if node["type"] == "add" else sum(outs)
        return n_in

    def _run(self, seq: list[dict[str, Any]], x: torch.Tensor) -> torch.Tensor:
        for node in seq:
            if node["type"] == "dense":
                x = torch.relu(self.layers[node["id"]](x))
            elif node["type"] == "add":
                x = torch.stack([self._run(b, x) for b in node["branches"]]).mean(0)
            else:
                x = torch.cat([self._run(b, x) for b in node["branches"]], dim=1)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self._run(self.state["body"], x.reshape(x.shape[0], -1)))


class PathLevelSpace(GrowingSpace):
    """Returns path-level networks grown from one hidden layer of ``units`` by replicate,
    split and deepen, every edit function-preserving.

    Raises:
        SpaceError: see :class:`~nasforge.spaces.path_edits.PathEdits`.
    """

    def __init__(
        self,
        n_inputs: int = 64,
        n_outputs: int = 10,
        units: int = 16,
        max_edits: int = 12,
        sample_length: int = 4,
    ) -> None:
        super().__init__(PathEdits(n_inputs, n_outputs, units), max_edits, sample_length)

    def build(self, state: State) -> nn.Module:
        """Returns a freshly initialised PathNet of ``state``."""
        return PathNet(state)

    @torch.no_grad()
    def inherit(self, parent: nn.Module, state: State, edit: Edit, child: nn.Module) -> None:
        """Copies every layer the edit kept, and makes the edited one's successors compute
        what it did (see the module docstring)."""
        assert isinstance(parent, PathNet) and isinstance(child, PathNet)
        child.head.load_state_dict(parent.head.state_dict())
        for key, layer in parent.layers.items():
            if key in child.layers:
                child.layers[key].load_state_dict(layer.state_dict())
        nid = str(edit["node"])
        old = _linear(parent, nid)
        if edit["op"] == "deepen":
            new = _linear(child, nid + "+")
            new.weight.copy_(torch.eye(new.weight.shape[0]))
            new.bias.zero_()
        elif edit["op"] == "replicate":
            for s in ("a", "b"):
                _linear(child, nid + s).load_state_dict(old.state_dict())
        else:
            cut = _linear(child, nid + "l").weight.shape[0]
            for s, rows in (("l", slice(0, cut)), ("r", slice(cut, None))):
                _linear(child, nid + s).weight.copy_(old.weight[rows])
                _linear(child, nid + s).bias.copy_(old.bias[rows])


def _linear(net: PathNet, key: str) -> nn.Linear:
    """Returns the dense layer ``key`` of a PathNet."""
    layer = net.layers[key]
    assert isinstance(layer, nn.Linear)
    return layer


def _train(model: nn.Module, data: Any, epochs: int, lr: float, seed: int) -> float:
    """Returns the validation accuracy of ``model`` after ``epochs`` of Adam on the training
    split (full passes in batches of 128)."""
    x, y = data["train"]
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for start in range(0, len(x), 128):
            batch = order[start : start + 128]
            loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return accuracy(model, *data["val"])


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Returns the fraction of ``x`` that ``model`` classifies as ``y``."""
    model.eval()
    return float((model(x).argmax(1) == y).float().mean())


def grow_search(
    space: PathLevelSpace,
    strategy: Any,
    data: dict[str, tuple[torch.Tensor, torch.Tensor]],
    n_trials: int,
    epochs: int = 2,
    lr: float = 3e-3,
    seed: int = 0,
) -> dict[str, Any]:
    """Returns the best of ``n_trials`` networks that ``strategy`` (a ``BaseStrategy`` that
    grows histories: ``edit_rl``, ``evolution``, ``random``) asks, each grown from its
    parent's trained weights and trained ``epochs`` more: ``arch``, ``val`` and ``test``
    accuracy, ``params``, and ``history`` (val accuracy per trial). ``data`` maps ``train``,
    ``val``, ``test`` to ``(x, y)``; the base network is trained ``epochs`` first."""
    ss = space.search_space()
    strategy.setup(ss)
    torch.manual_seed(seed)
    base_arch: dict[str, Any] = {EDITS: []}
    base = space.freeze(base_arch)
    bank: dict[str, tuple[dict[str, Any], nn.Module]] = {}
    best = (_train(base, data, epochs, lr, seed), base_arch, base)
    bank[ss.id_of(base_arch)] = (base_arch, base)
    history = []
    for trial in range(n_trials):
        arch = strategy.ask()
        assert arch is not None
        edits = arch[EDITS]
        # the longest prefix of the history whose network was trained: the parent
        cut = next(k for k in range(len(edits), -1, -1) if ss.id_of({EDITS: edits[:k]}) in bank)
        parent_arch, parent = bank[ss.id_of({EDITS: edits[:cut]})]
        if cut == len(edits):  # the same network as one trained before: tell it again
            acc = accuracy(parent, *data["val"])
        else:
            model = space.grow(parent, {EDITS: edits[:cut]}, arch)
            acc = _train(model, data, epochs, lr, seed + trial + 1)
            bank[ss.id_of(arch)] = (arch, model)
            if acc > best[0]:
                best = (acc, arch, model)
        strategy.tell(arch, acc)
        history.append(acc)
        log.info("trial %d: val %.4f, %d edits (parent: %d)", trial, acc, len(edits), cut)
    acc, arch, model = best
    return {
        "arch": arch,
        "val": acc,
        "test": accuracy(model, *data["test"]),
        "params": sum(p.numel() for p in model.parameters()),
        "history": history,
    }
