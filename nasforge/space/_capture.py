"""Graph capture for graph mutators: ``torch.fx`` first, ``torch.export`` as the fallback.

``torch.fx`` symbolic tracing keeps modules as ``call_module`` nodes (so operator mutators can
match them by type) but fails on data-dependent Python (most Hugging Face models). ``torch.export``
runs the model on example inputs and records ATen operations: it captures those models, but
every node is a function call (module types are gone; a node keeps the path of the module that
computed it in ``meta["nn_module_stack"]``, which :class:`~nasforge.space.mutator.MutableGraph`
matches globs against), and shapes are fixed to the examples unless ``dynamic_shapes`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import fx, nn

from nasforge.errors import SpaceError

__all__ = []  # internal: used by nasforge.space.mutator


class _Tracer(fx.Tracer):
    def __init__(self, is_leaf: Callable[[nn.Module, str], bool]) -> None:
        super().__init__()
        self._is_leaf = is_leaf

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return self._is_leaf(m, qualname) or super().is_leaf_module(m, qualname)


def fx_trace(
    model: nn.Module, leaves: Sequence[type[nn.Module]], leaf_paths: set[str]
) -> fx.GraphModule:
    """Returns ``model`` traced by ``torch.fx``; modules of the ``leaves`` types and at
    ``leaf_paths`` stay single ``call_module`` nodes."""
    types = tuple(leaves)
    tracer = _Tracer(lambda m, q: isinstance(m, types) or q in leaf_paths)
    graph = tracer.trace(model)
    return fx.GraphModule(model, graph, type(model).__name__)


def split_inputs(example: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Returns ``(args, kwargs)`` of example inputs given as a tuple of positional inputs, a
    dict of keyword inputs, or ``(tuple, dict)``."""
    if isinstance(example, Mapping):
        return (), dict(example)
    if (
        isinstance(example, tuple)
        and len(example) == 2
        and isinstance(example[0], tuple)
        and isinstance(example[1], Mapping)
    ):
        return example[0], dict(example[1])
    if isinstance(example, tuple):
        return example, {}
    return (example,), {}


def export_graph(
    model: nn.Module, example: Any, options: Mapping[str, Any] | None
) -> fx.GraphModule:
    """Returns ``model`` captured by ``torch.export`` on ``example`` as a plain, trainable
    ``GraphModule`` with the model's parameter names and its input and output structure.

    The shape guard that export inserts is removed (the caller chose the shapes); ``train()``
    and ``eval()`` work but do not change ops recorded in the mode the model was captured in.
    """
    args, kwargs = split_inputs(example)
    ep = torch.export.export(model, args, kwargs, **dict(options or {}))
    unlifted = ep.module()
    graph = unlifted.graph
    for node in list(graph.nodes):
        if node.op == "call_module" and str(node.target).startswith("_guards"):
            graph.erase_node(node)
    gm = fx.GraphModule(unlifted, graph, type(model).__name__)
    return gm


def holder(gm: fx.GraphModule) -> nn.Module:
    """Returns a plain module holding what ``gm``'s graph reads (submodules, parameters,
    buffers, tensor constants), shared, not copied: deep-copying it is an ordinary module copy,
    which, unlike copying a ``GraphModule``, does not regenerate the graph's code."""
    root = nn.Module()
    root._modules.update(gm._modules)
    root._parameters.update(gm._parameters)
    root._buffers.update(gm._buffers)
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            head = str(node.target).split(".")[0]
            if head in gm.__dict__:
                root.__dict__[head] = gm.__dict__[head]
    return root


def capture_error(
    name: str, fx_exc: BaseException, export_exc: BaseException | None, has_example: bool
) -> SpaceError:
    """Returns the error that says which capture failed, why, and what still works."""
    text = f"graph mutators need a graph of {name}, and torch.fx cannot trace it: {fx_exc}. "
    if export_exc is not None:
        text += f"torch.export on the example inputs failed too: {export_exc}. "
    elif not has_example:
        text += (
            "Pass example_inputs=(...) (positional inputs, a dict of keyword inputs, or both) "
            "to capture it with torch.export instead. "
        )
    text += (
        "Module-level mutators (nf.ModuleMutator: swap submodules by type, name glob or "
        "predicate) need no graph and still work on this model"
    )
    return SpaceError(text)
