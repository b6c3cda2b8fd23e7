"""Per-layer cost tables: time as a function of batch size, and memory per layer type.

Pure: no torch (tables are JSON, read with :mod:`json`). A table describes a few layer types
per family (the paper's Table 5 has four NLP and four CV types); a supernet block's candidate
``c`` takes type ``c mod n_types``, as the simulator benchmark does. Each layer type has::

    batches      batch sizes at which time was measured (ascending)
    fwd_ms       forward time at each batch (ms)
    bwd_ms       backward time at each batch (ms)
    swap_ms      host-to-device copy of the layer's context (parameters and optimizer state)
    param_bytes  parameter bytes
    act_bytes    bytes saved for backward per sample (no recomputation)
    io_bytes     output bytes per sample (the next layer's input)

Time between measured batches is linear interpolation; beyond them, the nearest segment's
line is extended (never below a tenth of the smallest measurement)::

    t |            .  <- extended
      |        o
      |    o               o measured
      | o
      +----------------- batch

Tables: ``benchmarks/data/naspipe_costs_paper.json`` (Table 5 at its batch sizes, the batch
scaling from Table 2) and ``benchmarks/data/naspipe_costs_cpu.json`` (measured on this CPU by
``benchmarks/naspipe_costs.py``; a GPU table comes from the same script on a GPU).

Invariants: a loaded table has, per type, as many times as batches, all > 0, batches ascending.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nasforge.errors import ConfigError

__all__ = ["LayerCost", "CostTable", "load_table", "interpolate", "supernet_tables"]


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Returns y at ``x`` on the piecewise-linear curve through ``(xs, ys)``, extended at the
    ends by the nearest segment and floored at a tenth of ``min(ys)``."""
    if len(xs) == 1:
        return float(ys[0]) * x / xs[0]  # one point: proportional to batch
    i = 1
    while i < len(xs) - 1 and x > xs[i]:
        i += 1
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    y = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return max(y, 0.1 * min(ys))


@dataclass(frozen=True)
class LayerCost:
    """Returns nothing; one layer type's measured costs (see the module docstring)."""

    name: str
    batches: tuple[int, ...]
    fwd_ms: tuple[float, ...]
    bwd_ms: tuple[float, ...]
    swap_ms: float
    param_bytes: int
    act_bytes: int
    io_bytes: int

    def fwd(self, batch: int) -> float:
        """Returns the forward time in ms at ``batch`` samples."""
        return interpolate(self.batches, self.fwd_ms, batch)

    def bwd(self, batch: int) -> float:
        """Returns the backward time in ms at ``batch`` samples."""
        return interpolate(self.batches, self.bwd_ms, batch)


@dataclass(frozen=True)
class CostTable:
    """Returns nothing; layer types per family, with where the numbers come from."""

    source: str
    device: str
    families: dict[str, tuple[LayerCost, ...]]

    def family(self, name: str) -> tuple[LayerCost, ...]:
        """Returns the layer types of family ``name``.

        Raises:
            ConfigError: the table has no such family.
        """
        if name not in self.families:
            raise ConfigError(
                f"cost table {self.source!r} has no family {name!r}; it has {sorted(self.families)}"
            )
        return self.families[name]


def _layer(raw: dict, where: str) -> LayerCost:
    """Returns one checked layer type."""
    keys = ("name", "batches", "fwd_ms", "bwd_ms", "swap_ms", "param_bytes", "act_bytes")
    missing = [k for k in (*keys, "io_bytes") if k not in raw]
    if missing:
        raise ConfigError(f"{where}: layer entry lacks {missing}; see nasforge.parallel.costs")
    b, f, g = list(raw["batches"]), list(raw["fwd_ms"]), list(raw["bwd_ms"])
    if not b or len(f) != len(b) or len(g) != len(b):
        raise ConfigError(
            f"{where}: {raw['name']!r} needs one fwd_ms and bwd_ms per batch, got "
            f"{len(b)} batches, {len(f)} fwd, {len(g)} bwd"
        )
    if b != sorted(set(b)) or min(b) < 1 or min(f + g) <= 0:
        raise ConfigError(
            f"{where}: {raw['name']!r} needs ascending batches >= 1 and times > 0, got "
            f"batches {b}, fwd {f}, bwd {g}"
        )
    return LayerCost(
        name=str(raw["name"]),
        batches=tuple(int(x) for x in b),
        fwd_ms=tuple(float(x) for x in f),
        bwd_ms=tuple(float(x) for x in g),
        swap_ms=float(raw["swap_ms"]),
        param_bytes=int(raw["param_bytes"]),
        act_bytes=int(raw["act_bytes"]),
        io_bytes=int(raw["io_bytes"]),
    )


def load_table(path: str | Path) -> CostTable:
    """Returns the cost table stored as JSON at ``path``.

    Raises:
        ConfigError: the file is missing, not JSON, or an entry breaks the invariants.
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(
            f"cannot read cost table {str(p)!r}: {err}; produce it with benchmarks/naspipe_costs.py"
        ) from err
    fams = {
        fam: tuple(_layer(x, f"{p.name}:{fam}") for x in layers)
        for fam, layers in raw.get("families", {}).items()
    }
    if not fams or not all(fams.values()):
        raise ConfigError(f"cost table {str(p)!r} has no layer types under 'families'")
    return CostTable(source=str(raw.get("source", p.name)), device=str(raw.get("device", "")),
                     families=fams)  # fmt: skip


def supernet_tables(
    types: Sequence[LayerCost], n_blocks: int, n_candidates: int, batch: int, seed: int
) -> dict[str, list[list[float]]]:
    """Returns per-layer tables ``[block][candidate]`` at ``batch`` samples: ``fwd``, ``bwd``,
    ``swap`` (ms) and ``param``, ``act``, ``io`` (bytes).

    Candidate c of every block takes type ``c mod len(types)``; times get a seeded +-20 %
    jitter per (block, candidate), the same for every batch, so tables at different batches
    describe the same supernet.
    """
    rng = random.Random(seed)
    out: dict[str, list[list[float]]] = {k: [] for k in ("fwd", "bwd", "swap", "param", "act",
                                                         "io")}  # fmt: skip
    for _ in range(n_blocks):
        row = [types[c % len(types)] for c in range(n_candidates)]
        jit = [rng.uniform(0.8, 1.2) for _ in range(n_candidates)]
        out["fwd"].append([t.fwd(batch) * j for t, j in zip(row, jit)])
        out["bwd"].append([t.bwd(batch) * j for t, j in zip(row, jit)])
        out["swap"].append([t.swap_ms * j for t, j in zip(row, jit)])
        out["param"].append([float(t.param_bytes) for t in row])
        out["act"].append([float(t.act_bytes) for t in row])
        out["io"].append([float(t.io_bytes) for t in row])
    return out
