"""Weight Agnostic Networks (Gaier & Ha 2019) on nasforge's growing spaces: the network of a
WANN state with one shared weight on every connection, and its evaluation over several shared
weights with no training.

    model     WannNet(state): neurons in topological order, each act(w * sum of its inputs);
              outputs linear; ``weight`` (a buffer) is the one shared weight
    evaluate  ``evaluate_shared``: accuracy for each shared weight of ``WEIGHTS``; the mean, the
              best single weight and the number of connections
    rank      ``wann_score``: the mean accuracy less a cost per connection, one number that
              prefers the simpler of two equally good networks (the paper ranks by mean
              performance and connections; a strategy here maximises one metric)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from nasforge.space.edits import State
from nasforge.space.growing import GrowingSpace
from nasforge.spaces.wann_edits import WannEdits, connections, topological_order

__all__ = ["WEIGHTS", "WannNet", "WannSpace", "evaluate_shared", "wann_score"]

#: the shared weights a network is evaluated with (the paper's series, less zero)
WEIGHTS = (-2.0, -1.0, -0.5, 0.5, 1.0, 2.0)


def _act(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "linear":
        return x
    if name == "step":
        return (x > 0).to(x.dtype)
    if name == "sin":
        return torch.sin(math.pi * x)
    if name == "gauss":
        return torch.exp(-(x * x) / 2.0)
    if name == "tanh":
        return torch.tanh(x)
    if name == "sigmoid":
        return (torch.tanh(x / 2.0) + 1.0) / 2.0
    if name == "inv":
        return -x
    if name == "abs":
        return x.abs()
    if name == "relu":
        return torch.relu(x)
    assert name == "cos", name
    return torch.cos(math.pi * x)


class WannNet(nn.Module):
    """Returns the outputs (logits) of a WANN for inputs ``(N, n_inputs)`` (or images, which
    it flattens); every connection carries the shared ``weight``.

    Invariants: it has no trainable parameter; its output depends on ``weight`` and the state.
    """

    weight: torch.Tensor  # the shared weight, a buffer

    def __init__(self, state: State, weight: float = 1.0) -> None:
        super().__init__()
        self.state = state
        self.register_buffer("weight", torch.tensor(float(weight)))
        self.order = topological_order(state)
        names = [f"i{i}" for i in range(state["n_inputs"])] + ["b", *self.order]
        names += [f"o{o}" for o in range(state["n_outputs"])]
        self.position = {n: k for k, n in enumerate(names)}
        #: node -> the positions of the nodes that feed it
        self.feeds: dict[str, list[int]] = {}
        for src, dst in state["conns"]:
            self.feeds.setdefault(dst, []).append(self.position[src])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)
        values: list[torch.Tensor] = list(x.T) + [torch.ones_like(x[:, 0])]
        zero = torch.zeros_like(x[:, 0])
        for node in [*self.order, *(f"o{o}" for o in range(self.state["n_outputs"]))]:
            feeds = self.feeds.get(node)
            total = torch.stack([values[k] for k in feeds]).sum(0) if feeds else zero
            total = self.weight * total
            values.append(_act(self.state["nodes"][node], total) if node[0] == "h" else total)
        return torch.stack(values[-self.state["n_outputs"] :], dim=1)


class WannSpace(GrowingSpace):
    """Returns WANNs of a minimal network grown by add_node, add_connection and
    change_activation (``nasforge.spaces.wann_edits``); no edit is function-preserving, and a
    WANN is never trained.

    Raises:
        SpaceError: see :class:`~nasforge.spaces.wann_edits.WannEdits`.
    """

    def __init__(
        self,
        n_inputs: int = 64,
        n_outputs: int = 10,
        per_output: int = 2,
        seed: int = 0,
        max_edits: int = 200,
        sample_length: int = 4,
    ) -> None:
        super().__init__(WannEdits(n_inputs, n_outputs, per_output, seed), max_edits, sample_length)

    def build(self, state: State) -> nn.Module:
        """Returns the WannNet of ``state`` with shared weight 1."""
        return WannNet(state)


@torch.no_grad()
def evaluate_shared(
    model: WannNet, x: torch.Tensor, y: torch.Tensor, weights: Sequence[float] = WEIGHTS
) -> dict[str, Any]:
    """Returns ``mean_accuracy`` over ``weights``, ``best_shared_weight_accuracy`` (and
    ``best_weight``), ``per_weight`` accuracies and ``connections`` of a WANN on ``(x, y)``."""
    per_weight = []
    for w in weights:
        model.weight.fill_(float(w))
        logits = model(x)
        per_weight.append(float((logits.argmax(1) == y).float().mean()))
    best = max(range(len(per_weight)), key=per_weight.__getitem__)
    return {
        "mean_accuracy": sum(per_weight) / len(per_weight),
        "best_shared_weight_accuracy": per_weight[best],
        "best_weight": float(weights[best]),
        "per_weight": per_weight,
        "connections": connections(model.state),
    }


def wann_score(mean_accuracy: float, n_connections: int, cost: float = 2e-4) -> float:
    """Returns the mean accuracy less ``cost`` per connection: what a WANN search maximises."""
    return mean_accuracy - cost * n_connections
