"""The package's layering: the shared floor imports no family, and no subpackage cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "nasforge"
FAMILIES = {"engine", "oneshot", "ofa", "parallel"}
#: every floor module (a subpackage or a top module below the families), what each may import
FLOOR = {
    "_version": set(),
    "_deprecated": set(),  # the deprecation table and its import hook: the standard library only
    "_lazy": {"_deprecated"},  # the packages' lazy names (PEP 562), moved names from the table
    "errors": set(),
    "space": {"_lazy", "errors"},
    "strategy": {"errors", "space"},
    "spaces": {"_lazy", "errors", "space"},
    "proxies": {"errors", "space"},
    "data": {"errors"},
    "weightsharing": {"errors", "runtime", "space"},
    "partition": {"errors"},
    "runtime": {"errors"},
    "run": {"_deprecated", "_version", "errors", "runtime", "space", "strategy"},
    "dashboard": {"_version", "errors", "run", "runtime", "space"},
    # adapters for code written against other libraries (NNI 3.0's space language)
    "compat": {"_lazy", "errors", "space"},
}
#: modules above everything, which may import any family (the hub serves ofa/'s MobileNetV3
#: space as is; the two-stage search composes a one-shot first stage and the engine's trials)
TOP = {"cli", "runners", "__init__", "__main__", "hub", "twostage"}


def _imports() -> dict[str, set[str]]:
    """Returns subpackage (or top module) -> the nasforge subpackages it imports, anywhere in
    its code (function-level imports included)."""
    out: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).parts
        unit = rel[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "nasforge" and len(parts) > 1 and parts[1] != unit:
                    out.setdefault(unit, set()).add(parts[1])
    return out


def test_the_floor_imports_no_family() -> None:
    """Each floor module imports only the floor modules it is allowed (the example spaces, the
    proxies, the data, the run record and the runtime below it: never a family of search)."""
    imports = _imports()
    for floor, allowed in FLOOR.items():
        assert imports.get(floor, set()) <= allowed, (floor, imports.get(floor))
        assert not allowed & FAMILIES, floor


def test_every_module_has_a_place() -> None:
    """Every subpackage and top module is a family, a floor module or a top module, so the
    rules above cover the whole package (a new one must be placed here)."""
    units = {p.relative_to(PKG).parts[0].removesuffix(".py") for p in PKG.glob("*")}
    units = {u for u in units if not u.startswith(("__pycache__", ".")) and u != "py.typed"}
    assert units == FAMILIES | set(FLOOR) | TOP


def test_no_import_cycle_between_subpackages() -> None:
    """The graph of imports between subpackages (top modules aside) has no cycle."""
    graph = {u: {v for v in vs if v not in TOP} for u, vs in _imports().items() if u not in TOP}
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        if seen.get(node) == 1:
            raise AssertionError(f"import cycle: {' -> '.join([*stack, node])}")
        if seen.get(node) == 2:
            return
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*stack, node])
        seen[node] = 2

    for node in sorted(graph):
        visit(node, [])


def test_families_do_not_import_each_other_except_through_the_floor() -> None:
    """A family imports no other family's modules (they meet in the run record)."""
    imports = _imports()
    for family in FAMILIES:
        crossing = imports.get(family, set()) & (FAMILIES - {family})
        assert not crossing, f"{family} imports {crossing}"


def test_no_function_is_longer_than_120_lines() -> None:
    """Every function and method of the package fits in 120 lines (the style guide's limit:
    a longer body is split into steps, as ``simulate`` and the dashboard's registrars are)."""
    long = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > 120:
                    long.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.name} ({n})")
    assert not long, f"functions over 120 lines: {long}"


def _module_graph() -> dict[str, set[str]]:
    """Returns module -> the modules of its own folder it imports (anywhere in its code;
    ``__init__`` files aside, which re-export their folder)."""
    mods = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        if path.name == "__init__.py":
            continue
        folder = name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = name.split(".")[: -node.level] if node.level else []
                mod = ".".join([*base, *([node.module] if node.module else [])])
                targets = [mod, *(f"{mod}.{a.name}" for a in node.names)]
            found |= {
                t for t in targets
                if t in mods and t != name and mods[t].name != "__init__.py"
                and t.rsplit(".", 1)[0] == folder
            }  # fmt: skip
        graph[name] = found
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Returns the strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_circles_inside_folders() -> None:
    """Inside a folder, bases sit below what builds on them: no group of modules imports each
    other (issue 48; there were four: executor/ray_executor, ofa's record/train, run's
    store/_rows, the two mutators), function-level imports included."""
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]  # the measure works
    circles = _circles(_module_graph())
    assert not circles, f"modules of one folder importing each other: {circles}"
