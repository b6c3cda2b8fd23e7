"""The edit language of Weight Agnostic Networks (Gaier & Ha 2019): a feed-forward graph of
neurons grown from a minimal network by adding nodes, adding connections and changing
activations. Pure (no torch).

    state    {"n_inputs", "n_outputs", "nodes": {hidden id: activation}, "conns": [[src, dst]]}
             inputs are ``i0..``, a bias ``b`` (always 1), outputs ``o0..`` (linear)
    base     each output connected to a few inputs drawn with ``seed`` (``per_output``)
    edits    add_node {src, dst, act}: split connection src->dst by a new neuron
             add_connection {src, dst}: a new connection that keeps the graph acyclic
             change_activation {node, act}: another activation for a hidden neuron
    ids      a hidden neuron's id is derived from the connection it split, so the order of
             independent edits does not change the graph (one network, one id)
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from nasforge.errors import ArchitectureError, SpaceError
from nasforge.space.edits import BaseEdits, Edit, State

__all__ = ["ACTIVATIONS", "WannEdits", "connections", "topological_order"]

#: the activations of the paper's Table 1 (``inv`` is 1 - x as its "inverse")
ACTIVATIONS = ("linear", "step", "sin", "gauss", "tanh", "sigmoid", "inv", "abs", "relu", "cos")


def _successors(state: State) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for src, dst in state["conns"]:
        out.setdefault(src, []).append(dst)
    return out


def _reaches(succ: dict[str, list[str]], start: str) -> set[str]:
    seen, stack = {start}, [start]
    while stack:
        for nxt in succ.get(stack.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def topological_order(state: State) -> list[str]:
    """Returns the hidden neurons of a state in an order where each comes after every neuron
    that feeds it (ties by id, so the order is stable)."""
    hidden = set(state["nodes"])
    preds: dict[str, set[str]] = {h: set() for h in hidden}
    for src, dst in state["conns"]:
        if dst in hidden and src in hidden:
            preds[dst].add(src)
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(hidden):
        ready = sorted(h for h in hidden - done if preds[h] <= done)
        assert ready, "a WANN state is acyclic"
        order += ready
        done.update(ready)
    return order


class WannEdits(BaseEdits):
    """Returns WANN states and the edits that grow them (see the module docstring).

    Raises:
        SpaceError: fewer than 1 input or output, ``per_output`` outside [1, n_inputs], or an
            activation that is not in :data:`ACTIVATIONS`.
    """

    name = "wann"

    def __init__(
        self,
        n_inputs: int,
        n_outputs: int,
        per_output: int = 2,
        seed: int = 0,
        activations: tuple[str, ...] | list[str] = ACTIVATIONS,
    ) -> None:
        if n_inputs < 1 or n_outputs < 1:
            raise SpaceError(f"a WANN needs inputs and outputs, got {n_inputs}, {n_outputs}")
        if not 1 <= per_output <= n_inputs:
            raise SpaceError(f"per_output must lie in [1, {n_inputs}], got {per_output!r}")
        unknown = [a for a in activations if a not in ACTIVATIONS]
        if unknown or not activations:
            raise SpaceError(f"activations {unknown} are not among {list(ACTIVATIONS)}")
        self.n_inputs, self.n_outputs = n_inputs, n_outputs
        self.per_output, self.seed = per_output, seed
        self.activations = tuple(activations)

    def config(self) -> dict[str, Any]:
        """Returns the constructor arguments as plain JSON-able data."""
        return {
            "n_inputs": self.n_inputs,
            "n_outputs": self.n_outputs,
            "per_output": self.per_output,
            "seed": self.seed,
            "activations": list(self.activations),
        }

    def base(self) -> State:
        """Returns the minimal network: each output fed by ``per_output`` inputs."""
        rng = random.Random(self.seed)
        conns = [
            [f"i{i}", f"o{o}"]
            for o in range(self.n_outputs)
            for i in sorted(rng.sample(range(self.n_inputs), self.per_output))
        ]
        return {
            "n_inputs": self.n_inputs,
            "n_outputs": self.n_outputs,
            "nodes": {},
            "conns": sorted(conns),
        }

    def _sources(self, state: State) -> list[str]:
        return [f"i{i}" for i in range(self.n_inputs)] + ["b", *sorted(state["nodes"])]

    def _sinks(self, state: State) -> list[str]:
        return sorted(state["nodes"]) + [f"o{o}" for o in range(self.n_outputs)]

    def edits(self, state: State) -> list[Edit]:
        """Returns every add_node, add_connection and change_activation that applies."""
        out: list[Edit] = []
        for src, dst in state["conns"]:
            out += [{"op": "add_node", "src": src, "dst": dst, "act": a} for a in self.activations]
        succ = _successors(state)
        present = {(s, d) for s, d in state["conns"]}
        for src in self._sources(state):
            below = _reaches(succ, src) if src in state["nodes"] else {src}
            for dst in self._sinks(state):
                if (src, dst) in present or dst in below:
                    continue
                # dst must not reach src: a path dst -> src plus src -> dst is a cycle
                if src in state["nodes"] and src in _reaches(succ, dst):
                    continue
                out.append({"op": "add_connection", "src": src, "dst": dst})
        for node, act in sorted(state["nodes"].items()):
            out += [
                {"op": "change_activation", "node": node, "act": a}
                for a in self.activations
                if a != act
            ]
        return out

    def apply(self, state: State, edit: Edit) -> State:
        """Returns the state after ``edit``.

        Raises:
            ArchitectureError: an unknown op, a connection that is absent (add_node), present
                or cyclic (add_connection), an unknown neuron or activation.
        """
        op = edit.get("op")
        nodes, conns = dict(state["nodes"]), [list(c) for c in state["conns"]]
        act = edit.get("act")
        if op in ("add_node", "change_activation") and act not in self.activations:
            raise ArchitectureError(f"activation {act!r} is not one of {list(self.activations)}")
        if op == "add_node":
            pair = [edit.get("src"), edit.get("dst")]
            if pair not in conns:
                raise ArchitectureError(f"add_node splits a connection, and {pair} is not one")
            node = _node_id(str(pair[0]), str(pair[1]), nodes)
            conns.remove(pair)
            conns += [[pair[0], node], [node, pair[1]]]
            nodes[node] = act
        elif op == "add_connection":
            src, dst = edit.get("src"), edit.get("dst")
            if src not in self._sources(state) or dst not in self._sinks(state):
                raise ArchitectureError(f"no connection can run from {src!r} to {dst!r}")
            if [src, dst] in conns or src == dst:
                raise ArchitectureError(f"connection {src}->{dst} exists already")
            if src in _reaches(_successors(state), str(dst)):
                raise ArchitectureError(f"connection {src}->{dst} would close a cycle")
            conns.append([src, dst])
        elif op == "change_activation":
            target = str(edit.get("node"))
            if target not in nodes:
                raise ArchitectureError(f"no hidden neuron {target!r}; neurons: {sorted(nodes)}")
            nodes[target] = act
        else:
            raise ArchitectureError(
                f"unknown WANN edit {op!r}; ops: add_node, add_connection, change_activation"
            )
        return {**state, "nodes": nodes, "conns": sorted(conns)}

    def canonical(self, state: State) -> Any:
        """Returns the neurons and connections, sorted."""
        return {"nodes": sorted(state["nodes"].items()), "conns": sorted(state["conns"])}


def _node_id(src: str, dst: str, taken: dict[str, str]) -> str:
    """Returns the id of the neuron that splits ``src -> dst``: a hash of the pair, with a
    suffix in the rare case that this pair was split before."""
    base = "h" + hashlib.sha256(f"{src}>{dst}".encode()).hexdigest()[:8]
    node, n = base, 1
    while node in taken:
        node, n = f"{base}_{n}", n + 1
    return node


def connections(state: State) -> int:
    """Returns the number of connections of a WANN state (its complexity)."""
    return len(state["conns"])
