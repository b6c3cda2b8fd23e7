"""Which directories the dashboard serves, and the check that keeps it inside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasforge.dashboard.runs import ServedRuns
from nasforge.errors import ConfigError, StoreError
from tests.dashboard.records import make_record


def test_discover_finds_runs_below_a_root_and_flags_a_root_without_runs(tmp_path: Path) -> None:
    """A folder of runs lists each run (two levels down too); a folder without any run is
    listed with a message; a run directory given directly is listed itself."""
    make_record(tmp_path / "runs" / "a", n=2)
    make_record(tmp_path / "runs" / "group" / "b", n=2)
    (tmp_path / "runs" / "artifacts_only").mkdir()
    (tmp_path / "empty").mkdir()
    served = ServedRuns([tmp_path / "runs", tmp_path / "empty", tmp_path / "runs" / "a"])
    found = served.discover()
    assert [(r.key, r.problem is None) for r in found] == [
        ("runs/a", True),
        ("runs/group/b", True),
        ("empty", False),
        ("a", True),
    ]  # keys are the names shown (the roots' names differ)
    assert "is not a nasforge run directory" in (found[2].problem or "")
    assert served.resolve("0/runs/group/b") == (tmp_path / "runs" / "group" / "b").resolve()
    assert served.resolve("runs/group/b") == (tmp_path / "runs" / "group" / "b").resolve()


def test_resolve_refuses_every_way_out_of_the_roots(tmp_path: Path) -> None:
    """`..`, absolute paths, unknown roots, sibling folders and symlinks out are refused."""
    make_record(tmp_path / "runs" / "a", n=1)
    make_record(tmp_path / "secret", n=1)
    (tmp_path / "runs" / "link").symlink_to(tmp_path / "secret")
    served = ServedRuns([tmp_path / "runs"])
    for key in [
        "0/runs/../secret",
        "0/../secret",
        "0//etc/passwd",
        "1/runs/a",
        "x/runs/a",
        "0/runs/link",
        "0/runsx",
        "0/secret",
        "runs/../secret",
        "runs/link",
        "secret",
    ]:
        with pytest.raises(StoreError):
            served.resolve(key)
    assert [r.key for r in served.discover()] == ["runs/a"]  # the link out is not followed


def test_a_missing_root_is_a_config_error(tmp_path: Path) -> None:
    """A root that does not exist stops `nasforge serve` before it starts, naming the path."""
    with pytest.raises(ConfigError, match="nope is not a directory"):
        ServedRuns([tmp_path / "nope"])
    with pytest.raises(ConfigError):
        ServedRuns([])
