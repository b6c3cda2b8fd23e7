"""Tests of the pure per-layer cost tables: interpolation, loading, the shipped tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nasforge.errors import ConfigError
from nasforge.parallel.costs import interpolate, load_table, supernet_tables

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


@given(st.floats(1, 1000))
def test_interpolation_hits_points_and_is_monotone_between_them(x: float) -> None:
    """Exact at measured batches; between increasing points the curve increases too."""
    xs, ys = [1, 4, 16, 64], [1.0, 2.0, 5.0, 17.0]
    assert [interpolate(xs, ys, b) for b in xs] == ys
    assert interpolate(xs, ys, x) <= interpolate(xs, ys, x + 1) + 1e-12
    assert interpolate(xs, ys, x) >= 0.1


def test_shipped_tables_load_and_match_the_paper() -> None:
    """The paper table holds Table 5 at batch 192/64; the CPU table was measured here."""
    paper = load_table(DATA / "naspipe_costs_paper.json")
    att = paper.family("nlp")[3]
    assert att.name == "8 Head Attention" and (att.fwd(192), att.bwd(192)) == (7.9, 13.8)
    assert paper.family("cv")[0].fwd(64) == 7.9 and paper.family("cv")[0].swap_ms == 4.6
    assert att.fwd(32) < att.fwd(192)  # Table 2: smaller batches take less time...
    assert att.fwd(32) / 32 > att.fwd(192) / 192  # ...but more per sample
    cpu = load_table(DATA / "naspipe_costs_cpu.json")
    assert len(cpu.family("nlp")) == 4 and len(cpu.family("cv")) == 4
    with pytest.raises(ConfigError, match="no family 'speech'"):
        cpu.family("speech")


def test_bad_table_is_refused(tmp_path: Path) -> None:
    """A missing file or an entry with mismatched lengths raises ConfigError."""
    with pytest.raises(ConfigError, match="naspipe_costs.py"):
        load_table(tmp_path / "missing.json")
    bad = {"families": {"nlp": [{"name": "x", "batches": [1, 2], "fwd_ms": [1.0],
                                 "bwd_ms": [1.0, 2.0], "swap_ms": 1, "param_bytes": 1,
                                 "act_bytes": 1, "io_bytes": 1}]}}  # fmt: skip
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="one fwd_ms and bwd_ms per batch"):
        load_table(tmp_path / "bad.json")


def test_supernet_tables_keep_the_jitter_across_batches() -> None:
    """Tables at two batches describe the same supernet: time ratios per layer are the same."""
    types = load_table(DATA / "naspipe_costs_paper.json").family("nlp")
    a = supernet_tables(types, 3, 8, 192, seed=1)
    b = supernet_tables(types, 3, 8, 64, seed=1)
    assert a["swap"] == b["swap"] and a["param"] == b["param"]
    r = [a["fwd"][i][c] / b["fwd"][i][c] for i in range(3) for c in range(0, 8, 4)]
    assert max(r) - min(r) < 1e-9  # same type (c mod 4): same ratio whatever the jitter
