"""Numeric series of progress rows and artifact metadata, read by shape, not by kind."""

from __future__ import annotations

from pathlib import Path

from nasforge.dashboard.series import artifact_series, progress_series
from nasforge.run.store import Store
from tests.dashboard.records import make_record


def test_rows_split_into_scalars_groups_weights_and_decisions() -> None:
    """Numbers become lines, mappings of numbers and lists of numbers become grouped lines,
    a mapping of number lists (architecture weights) a chart per decision, `arch` the
    decisions per step; text is left out."""
    rows = [
        {
            "step": 1,
            "loss": 2.0,
            "val_loss": None,
            "hit": {"s0": 0.5, "s1": 0.25},
            "alpha": {"op": [0.5, 0.5]},
            "arch": {"op": "conv"},
            "checkpoint": "c1.pt",
        },
        {
            "step": 2,
            "loss": 1.5,
            "val_loss": 1.7,
            "hit": {"s0": 0.75, "s1": 0.5},
            "alpha": {"op": [0.2, 0.8]},
            "arch": {"op": "pool"},
            "checkpoint": "c2.pt",
        },
    ]
    s = progress_series(rows)
    assert s["steps"] == [1, 2]
    assert s["scalars"] == {"loss": [2.0, 1.5], "val_loss": [None, 1.7]}
    assert s["groups"]["hit"] == {"s0": [0.5, 0.75], "s1": [0.25, 0.5]}
    assert s["groups"]["alpha: op"] == {"0": [0.5, 0.2], "1": [0.5, 0.8]}
    assert s["decisions"] == [(1, {"op": "conv"}), (2, {"op": "pool"})]
    assert "checkpoint" not in s["scalars"] and "checkpoint" not in s["groups"]


def test_artifact_metadata_numbers_and_lists(tmp_path: Path) -> None:
    """An artifact's numeric metadata and lists of numbers (a hit rate per stage) are read."""
    make_record(tmp_path / "a", n=1)
    with Store.open(tmp_path / "a", readonly=False) as store:
        store.add_artifact(
            "supernet",
            "artifacts/s.pt",
            "supernet",
            {"cache_hit_rate": [0.9, 0.5], "bubble_ratio": 0.1, "note": "x"},
        )
        store.finish()
    with Store.open(tmp_path / "a") as store:
        (a,) = artifact_series(store)
    assert a["lists"] == {"cache_hit_rate": [0.9, 0.5]} and a["numbers"] == {"bubble_ratio": 0.1}
    assert a["path"] == "artifacts/s.pt"
