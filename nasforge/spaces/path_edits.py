"""The edit language of Path-level NAS (Cai et al. 2018): a tree of dense layers grown by
function-preserving transformations. Pure (no torch).

    state      {"n_inputs", "n_outputs", "body": [node, ...]}, a sequence of nodes:
               dense  {"type": "dense", "id", "units"}   relu(W x + b), ``id`` names its weights
               add    {"type": "add", "id", "branches": [seq, seq]}    mean of the branches
               concat {"type": "concat", "id", "branches": [seq, seq]} their outputs side by side
               then a linear classifier (not editable)
    edits      replicate {node}: a dense layer becomes ``add`` of two copies of itself
               split {node}: a dense layer of u units becomes ``concat`` of its first u//2
                 units and the rest
               deepen {node}: an identity dense layer after it (relu of a relu is the relu)
    preserving every edit: the child computes what the parent did, so it inherits its weights
    ids        derived from the edited node's id (``d0`` -> ``d0a``/``d0b``, ``d0+``), so
               independent edits commute
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.edits import BaseEdits, Edit, State

__all__ = ["PathEdits", "dense_nodes", "find", "width"]

_OPS = ("replicate", "split", "deepen")


def dense_nodes(seq: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Yields every dense node of a sequence, depth first, in order."""
    for node in seq:
        if node["type"] == "dense":
            yield node
        else:
            for branch in node["branches"]:
                yield from dense_nodes(branch)


def find(seq: list[dict[str, Any]], node_id: str) -> tuple[list[dict[str, Any]], int] | None:
    """Returns the sequence holding the node ``node_id`` and its position, or None."""
    for i, node in enumerate(seq):
        if node["id"] == node_id:
            return seq, i
        for branch in node.get("branches", ()):
            found = find(branch, node_id)
            if found is not None:
                return found
    return None


class PathEdits(BaseEdits):
    """Returns path-level states and their function-preserving edits (see the module
    docstring); the base is one hidden dense layer of ``units``.

    Raises:
        SpaceError: a size below 1, or ``ops`` not among replicate, split, deepen.
    """

    name = "pathlevel"

    def __init__(
        self,
        n_inputs: int,
        n_outputs: int,
        units: int = 16,
        ops: tuple[str, ...] | list[str] = _OPS,
    ) -> None:
        if min(n_inputs, n_outputs, units) < 1:
            raise SpaceError(f"sizes must be >= 1, got {n_inputs}, {n_outputs}, {units}")
        if not ops or any(op not in _OPS for op in ops):
            raise SpaceError(f"ops must be among {list(_OPS)}, got {list(ops)}")
        self.n_inputs, self.n_outputs, self.units = n_inputs, n_outputs, units
        self.ops = tuple(ops)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        return {
            "n_inputs": self.n_inputs,
            "n_outputs": self.n_outputs,
            "units": self.units,
            "ops": list(self.ops),
        }

    def base(self) -> State:
        """Returns one hidden dense layer ``d`` of ``units`` units."""
        dense = {"type": "dense", "id": "d", "units": self.units}
        return {"n_inputs": self.n_inputs, "n_outputs": self.n_outputs, "body": [dense]}

    def preserves(self, edit: Edit) -> bool:
        """Returns True: every path-level edit keeps the function."""
        return True

    def edits(self, state: State) -> list[Edit]:
        """Returns each op on each dense layer it applies to (split needs 2 units or more)."""
        out: list[Edit] = []
        for node in dense_nodes(state["body"]):
            for op in self.ops:
                if op != "split" or node["units"] >= 2:
                    out.append({"op": op, "node": node["id"]})
        return out

    def apply(self, state: State, edit: Edit) -> State:
        """Returns the state after ``edit``.

        Raises:
            ArchitectureError: an unknown op or node, or a split of a one-unit layer.
        """
        op, node_id = edit.get("op"), edit.get("node")
        if op not in self.ops:
            raise ArchitectureError(f"unknown path-level edit {op!r}; ops: {list(self.ops)}")
        state = copy.deepcopy(state)
        found = find(state["body"], str(node_id))
        if found is None or found[0][found[1]]["type"] != "dense":
            ids = [n["id"] for n in dense_nodes(state["body"])]
            raise ArchitectureError(f"no dense layer {node_id!r}; dense layers: {ids}")
        seq, i = found
        node = seq[i]
        nid, units = node["id"], node["units"]
        if op == "deepen":
            seq.insert(i + 1, {"type": "dense", "id": nid + "+", "units": units})
        elif op == "replicate":
            copies = [[{**node, "id": nid + s}] for s in ("a", "b")]
            seq[i] = {"type": "add", "id": nid + "*", "branches": copies}
        else:
            if units < 2:
                raise ArchitectureError(f"layer {nid!r} has one unit and cannot be split")
            halves = [(nid + "l", units // 2), (nid + "r", units - units // 2)]
            branches = [[{"type": "dense", "id": h, "units": u}] for h, u in halves]
            seq[i] = {"type": "concat", "id": nid + "|", "branches": branches}
        return state


def width(seq: list[dict[str, Any]], n_in: int) -> int:
    """Returns the number of outputs of a sequence fed ``n_in`` inputs."""
    for node in seq:
        if node["type"] == "dense":
            n_in = node["units"]
        elif node["type"] == "add":
            n_in = width(node["branches"][0], n_in)
        else:
            n_in = sum(width(b, n_in) for b in node["branches"])
    return n_in
