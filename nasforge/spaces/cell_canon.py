"""The function an architecture of the benchmark cell computes (``nasforge.spaces.bench_cell``):
one canonical architecture and one key per function, so a table holds each function once.

Pure logic, no torch. Node ``j`` of the cell is the sum of ``op(node i)`` over its edges ``i < j``;
node 3 is the output. Two rewrites give the canonical form:

- **dead ends dropped**: an edge that lies on no path from node 0 to node 3 through non-``none``
  edges, or whose input node is identically zero, becomes ``none`` (a ``conv`` of a zero node
  contributes only its batch norm's bias, a constant; it is dropped like NAS-Bench-201 does);
- **identical functions collapse**: each node is expanded into a multiset of terms, ``skip_connect``
  passing its input's terms through, ``pool`` (linear) distributing over a sum, every
  parametric op (``conv``, ``conv1x1``: ReLU first, so not linear) one term of its input's
  expansion. Sums commute, so swapped intermediate nodes, ``skip`` then ``op`` versus ``op``
  then ``skip``, and the like give the same key.

An architecture is *competent* when at least one parametric op lies on a live path (its key
holds a parametric term); the others compute a fixed function of the stem (or zero).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "PARAMETRIC",
    "canonical_arch",
    "function_key",
    "competent",
    "live_param_ops",
    "distinct_functions",
]

#: Operations with weights (a term of their own in the expansion).
PARAMETRIC: frozenset[str] = frozenset({"conv", "conv1x1"})
_EDGES: tuple[tuple[int, int], ...] = tuple((j, i) for j in range(1, 4) for i in range(j))

Term = str


def _label(j: int, i: int) -> str:
    return f"e{j}_{i}"


def _live_edges(arch: Mapping[str, str]) -> set[tuple[int, int]]:
    """Returns the edges (j, i) on some path 0 -> 3 made of non-``none`` edges."""
    on = {(j, i) for j, i in _EDGES if arch[_label(j, i)] != "none"}
    from_input = {0}
    for j in range(1, 4):
        if any((j, i) in on and i in from_input for i in range(j)):
            from_input.add(j)
    to_output = {3}
    for i in range(2, -1, -1):
        if any((j, i) in on and j in to_output for j in range(i + 1, 4)):
            to_output.add(i)
    return {(j, i) for j, i in on if i in from_input and j in to_output}


def canonical_arch(arch: Mapping[str, str]) -> dict[str, str]:
    """Returns ``arch`` with every edge off the live paths set to ``none`` (same function)."""
    live = _live_edges(arch)
    return {_label(j, i): (arch[_label(j, i)] if (j, i) in live else "none") for j, i in _EDGES}


def _expand(arch: Mapping[str, str]) -> list[list[Term]]:
    nodes: list[list[Term]] = [["x"]]
    for j in range(1, 4):
        terms: list[Term] = []
        for i in range(j):
            op, src = arch[_label(j, i)], nodes[i]
            if op == "none" or not src:
                continue
            if op == "skip_connect":
                terms += src
            elif op == "pool":
                terms += [f"pool({t})" for t in src]
            else:
                terms.append(f"{op}({'+'.join(sorted(src))})")
        nodes.append(terms)
    return nodes


def function_key(arch: Mapping[str, str]) -> str:
    """Returns the key of the function ``arch`` computes: equal keys, same function (up to the
    constant of a dead ``conv``'s batch norm); ``"0"`` for a cell that passes nothing."""
    out = sorted(_expand(canonical_arch(arch))[3])
    return "+".join(out) if out else "0"


def competent(arch: Mapping[str, str]) -> bool:
    """Returns whether a parametric op lies on a live path of ``arch``."""
    return live_param_ops(arch) > 0


def live_param_ops(arch: Mapping[str, str]) -> int:
    """Returns the number of parametric edges on live paths of ``arch``."""
    return sum(op in PARAMETRIC for op in canonical_arch(arch).values())


def distinct_functions(
    ops: Sequence[str], archs: Iterable[Mapping[str, str]] | None = None
) -> tuple[list[dict[str, str]], dict[str, int]]:
    """Returns (one canonical architecture per distinct function, in first-seen order, and
    counts): ``archs`` (default: every architecture over ``ops``, in product order) collapsed
    by :func:`function_key`. Counts: ``architectures`` seen, ``functions``, ``competent``
    functions, ``degenerate`` functions (no parametric op live) and ``degenerate_archs``."""
    if archs is None:
        labels = [_label(j, i) for j, i in _EDGES]
        archs = (dict(zip(labels, c)) for c in itertools.product(ops, repeat=len(labels)))
    seen: dict[str, dict[str, str]] = {}
    n = degenerate_archs = 0
    for arch in archs:
        n += 1
        if not competent(arch):
            degenerate_archs += 1
        seen.setdefault(function_key(arch), canonical_arch(arch))
    n_comp = sum(competent(a) for a in seen.values())
    return list(seen.values()), {
        "architectures": n,
        "functions": len(seen),
        "competent": n_comp,
        "degenerate": len(seen) - n_comp,
        "degenerate_archs": degenerate_archs,
    }
