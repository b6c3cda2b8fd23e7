"""Fuzzing the run record: corrupt rows and headers give StoreErrors, never other errors, and
reading never changes a byte of the record."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path

import pytest

from nasforge.errors import StoreError
from nasforge.run.export import export_top
from nasforge.run.plot import plot_run
from nasforge.run.records import TrialOutcome
from nasforge.run.status import print_status
from nasforge.run.store import DB_NAME, Store

_JSON_COLUMNS = [
    ("trials", "arch"), ("trials", "metrics"), ("trials", "intermediates"),
    ("progress", "data"), ("artifacts", "meta"), ("meta", "value"),
]  # fmt: skip
_GARBAGE = ["{", "[1,", "null", "42", '"text"', '{"a": }', "\x00\xff", "", "[]", "{}"]


def _make_run(directory: Path) -> None:
    objective = {"metric": "acc", "mode": "max", "constraints": {}, "second": None}
    with Store.create(directory, {"kind": "x", "objective": objective, "space": None}) as s:
        for i in range(6):
            tid = s.add_trial(f"{i:016d}", {"w": i})
            s.finish_trial(tid, TrialOutcome("done", {"acc": i / 10}, [{"acc": i / 20}]))
            s.add_progress(i + 1, {"loss": 1.0 / (i + 1)})
        s.add_artifact("supernet", "artifacts/w.pt", "supernet")
        s.finish()


def _read_everything(directory: Path, out: Path, plot: bool) -> None:
    with Store.open(directory) as s:
        s.config(), s.trials(), s.progress(), s.artifacts(), s.state()
    print_status(directory)
    export_top(directory, 2, out)
    if plot:
        plot_run(directory, out / "plot.png")


def _digest(directory: Path) -> str:
    return hashlib.sha256((directory / DB_NAME).read_bytes()).hexdigest()


@pytest.mark.parametrize("seed", range(24))
def test_corrupt_rows_and_headers_give_store_errors_and_change_nothing(tmp_path, seed, capsys):
    """A random corruption of a random row or of the file's bytes makes every reader either
    succeed or raise StoreError, and the database file keeps every byte."""
    rng = random.Random(seed)
    run = tmp_path / "run"
    _make_run(run)
    if seed % 3 == 0:  # damage the file itself: the header or a random page
        data = bytearray((run / DB_NAME).read_bytes())
        start = rng.choice([0, 16, 40, 100, rng.randrange(len(data))])
        for i in range(start, min(len(data), start + rng.randrange(1, 64))):
            data[i] = rng.randrange(256)
        (run / DB_NAME).write_bytes(bytes(data))
        for aux in ("-wal", "-shm"):
            Path(str(run / DB_NAME) + aux).unlink(missing_ok=True)
    else:
        table, column = rng.choice(_JSON_COLUMNS)
        conn = sqlite3.connect(run / DB_NAME)
        rows = [r[0] for r in conn.execute(f"SELECT rowid FROM {table}")]
        conn.execute(
            f"UPDATE {table} SET {column}=? WHERE rowid=?", (rng.choice(_GARBAGE), rng.choice(rows))
        )
        conn.commit()
        conn.close()
    before = _digest(run)
    try:
        _read_everything(run, tmp_path / "out", plot=seed < 4)
    except StoreError:
        pass
    capsys.readouterr()
    assert _digest(run) == before
