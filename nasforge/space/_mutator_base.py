"""The base of both mutator kinds and the graph a graph mutator edits.

:class:`Mutator` (its ``choose``) is shared by graph mutators (:mod:`nasforge.space.mutator`)
and module-level mutators (:mod:`nasforge.space.module_mutator`); :class:`MutableGraph` is the
traced model a graph mutator edits. Both sit here, below both kinds, so that neither kind's
module imports the other's. Their public home is :mod:`nasforge.space.mutator` (and
:mod:`nasforge.space`), which re-exports them; this module is internal.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from torch import fx, nn

from nasforge.errors import SpaceError
from nasforge.space.context import Recording, require
from nasforge.space.search_space import DecisionKind

__all__: list[str] = []

Match = type | str | Callable[..., bool]
T = TypeVar("T")


def _is_plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


class MutableGraph:
    """Returns nodes of a traced model and edits them; the graph a mutator works on.

    Invariants: after each primitive the graph is well-formed (``lint`` passes at the end of a
    mutator); modules created by primitives get unique, deterministic names.
    """

    def __init__(self, gm: fx.GraphModule, capture: str | None = "fx") -> None:
        self.gm = gm
        self.graph = gm.graph
        self.capture = capture  # how the graph was captured: "fx" or "export"

    # -- matching ------------------------------------------------------------------------------
    def nodes(self, match: Match | None = None) -> list[fx.Node]:
        """Returns, in graph order, the nodes that ``match``: a module type (call_module nodes
        whose module is an instance), a glob over node names and module paths (``"layer*.conv"``;
        in a graph captured by ``torch.export``, the path of the module that computed a node),
        a function called by a call_function node (``torch.relu``), or a predicate
        ``(node, module_or_None) -> bool``. ``None`` matches every operator node."""
        out = []
        for node in self.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            module = self.module(node) if node.op == "call_module" else None
            if match is None:
                ok = True
            elif isinstance(match, type) and issubclass(match, nn.Module):
                ok = module is not None and isinstance(module, match)
            elif isinstance(match, str):
                names = [node.name] + ([str(node.target)] if node.op == "call_module" else [])
                stack = node.meta.get("nn_module_stack")
                if stack and node.op == "call_function":  # a torch.export node: its module path
                    names.append(str(list(stack.values())[-1][0]))
                ok = any(fnmatch.fnmatchcase(n, match) for n in names)
            elif node.op == "call_function" and node.target is match:
                ok = True
            elif callable(match) and not isinstance(match, type):
                try:
                    ok = bool(match(node, module))
                except TypeError:
                    ok = False
            else:
                ok = False
            if ok:
                out.append(node)
        return out

    def node(self, name: str) -> fx.Node:
        """Returns the node called ``name`` (or whose module path is ``name``).

        Raises:
            SpaceError: no such node; the message lists the graph's node names.
        """
        nodes: list[fx.Node] = list(self.graph.nodes)
        for node in nodes:
            if node.name == name or (node.op == "call_module" and node.target == name):
                return node
        names = [n.name for n in self.graph.nodes]
        raise SpaceError(f"no node {name!r} in the traced base model; nodes are {names}")

    def module(self, node: fx.Node) -> nn.Module:
        """Returns the module a call_module node calls."""
        if node.op != "call_module":
            raise SpaceError(f"node {node.name!r} is a {node.op}, not a module call")
        return self.gm.get_submodule(str(node.target))

    # -- editing -------------------------------------------------------------------------------
    def _unique(self, base: str) -> str:
        base = base.replace(".", "_")
        name, i = base, 1
        while hasattr(self.gm, name):
            name, i = f"{base}_{i}", i + 1
        return name

    def replace_module(self, node: fx.Node, module: nn.Module) -> None:
        """Makes call_module ``node`` call ``module`` instead of its current module."""
        if node.op != "call_module":
            raise SpaceError(f"replace_module needs a module call, node {node.name!r} is {node.op}")
        _set_submodule(self.gm, str(node.target), module)

    def create_node(self, module: nn.Module, args: Sequence[Any], name: str) -> fx.Node:
        """Returns a new call_module node of ``module`` on ``args``, placed after its inputs."""
        target = self._unique(name)
        self.gm.add_submodule(target, module)
        anchors = [a for a in args if isinstance(a, fx.Node)]
        anchor = max(anchors, key=_position) if anchors else None
        if anchor is None:
            return self.graph.call_module(target, tuple(args))
        with self.graph.inserting_after(anchor):
            return self.graph.call_module(target, tuple(args))

    def create_function(self, fn: Callable[..., Any], args: Sequence[Any]) -> fx.Node:
        """Returns a new call_function node of ``fn`` on ``args``, placed after its inputs."""
        anchor = max((a for a in args if isinstance(a, fx.Node)), key=_position)
        with self.graph.inserting_after(anchor):
            return self.graph.call_function(fn, tuple(args))

    def delete_node(self, node: fx.Node) -> None:
        """Removes ``node``; its users read its first input instead."""
        inputs = [a for a in node.args if isinstance(a, fx.Node)]
        if node.users and not inputs:
            raise SpaceError(f"cannot delete node {node.name!r}: it has users and no input")
        if node.users:
            node.replace_all_uses_with(inputs[0])
        self.graph.erase_node(node)

    def connect(self, src: fx.Node, dst: fx.Node, index: int = 0) -> None:
        """Makes ``src`` the ``index``-th positional input of ``dst``."""
        if _position(src) >= _position(dst):
            raise SpaceError(
                f"cannot connect {src.name!r} to {dst.name!r}: it comes after it, "
                "so the graph would have a cycle"
            )
        args = list(dst.args)
        if index >= len(args):
            raise SpaceError(f"node {dst.name!r} has {len(args)} inputs, no input {index}")
        args[index] = src
        dst.args = tuple(args)

    def insert_after(self, node: fx.Node, module: nn.Module, name: str) -> fx.Node:
        """Returns a new node applying ``module`` to ``node``'s output; ``node``'s users now read
        the new node."""
        users = list(node.users)
        new = self.create_node(module, (node,), name)
        for user in users:
            user.replace_input_with(node, new)
        return new

    def finish(self) -> fx.GraphModule:
        """Returns the checked, recompiled module with unused submodules dropped."""
        self.graph.eliminate_dead_code()
        for node in self.graph.nodes:  # traced annotations print as names TorchScript can't read
            node.type = None
        self.graph.lint()
        self.gm.delete_all_unused_submodules()
        self.gm.recompile()
        return self.gm


def _position(node: fx.Node) -> int:
    for i, n in enumerate(node.graph.nodes):
        if n is node:
            return i
    raise AssertionError("node not in its graph")


def _set_submodule(root: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


class Mutator:
    """Returns nothing; edits a traced model in ``mutate(graph)`` and calls ``self.choose`` for
    every decision. Subclass it and override :meth:`mutate`.

    Invariants: ``mutate`` must make the same ``choose`` calls (labels and candidates) whatever
    values earlier calls returned, so that the space is one flat set of decisions.
    """

    def mutate(self, graph: MutableGraph) -> None:
        raise NotImplementedError

    def choose(
        self,
        candidates: Sequence[T] | Mapping[str, T],
        label: str | None = None,
        kind: DecisionKind = "value",
    ) -> T:
        """Returns the chosen candidate: the first while recording, the architecture's when
        frozen. Decision values are the dict keys, the values themselves when they are plain
        (int, float, str, bool, None), or else the list indices.

        Raises:
            SpaceError: no candidates, or ``choose`` called outside a MutatedSpace.
        """
        values: tuple[Any, ...]
        if isinstance(candidates, Mapping):
            values, items = tuple(candidates), list(candidates.values())
        else:
            items = list(candidates)
            plain = all(_is_plain(c) for c in items)
            values = tuple(items) if plain else tuple(range(len(items)))
        if not values:
            raise SpaceError(f"{type(self).__name__}.choose(label={label!r}) got no candidates")
        if label is None:
            self._n_auto = getattr(self, "_n_auto", 0) + 1
            label = f"{type(self).__name__}/{self._n_auto - 1}"
        ctx = require("Mutator.choose")
        if isinstance(ctx, Recording):
            ctx.declare(kind, values, label, self)
            value = values[0]
        else:
            value = ctx.resolve(label, values)
        return (
            items[list(values).index(value)]
            if not isinstance(candidates, Mapping)
            else (candidates[value])
        )

    def _reset(self) -> None:
        self._n_auto = 0
