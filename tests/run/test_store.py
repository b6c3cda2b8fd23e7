"""Tests of the experiment store: round trips, format checks, no silent overwrite."""

import json
import os
import sqlite3

import pytest

from nasforge.errors import StoreError
from nasforge.run.records import TrialOutcome
from nasforge.run.store import DB_NAME, FORMAT_VERSION, Store


def test_round_trip_of_config_trials_and_events(tmp_path):
    """Config, trials and events come back as written, as plain data."""
    s = Store.create(tmp_path, {"metric": "acc", "n": 3})
    t1 = s.add_trial("a" * 16, {"w": 8, "op": "conv"})
    t2 = s.add_trial("b" * 16, {"w": 16, "op": "id"})
    s.finish_trial(t2, TrialOutcome("failed", error="boom"))
    s.finish_trial(
        t1,
        TrialOutcome(
            "done", {"acc": 0.9}, [{"acc": 0.5}, {"acc": 0.9}], duration=1.5, checkpoint="c.pt"
        ),
    )
    s.close()
    s = Store.open(tmp_path)
    assert s.config() == {"metric": "acc", "n": 3}
    a, b = s.trials()
    assert (a.id, a.arch, a.status, a.metrics, a.intermediates, a.checkpoint) == (
        1,
        {"w": 8, "op": "conv"},
        "done",
        {"acc": 0.9},
        [{"acc": 0.5}, {"acc": 0.9}],
        "c.pt",
    )
    assert (b.status, b.error, b.metrics) == ("failed", "boom", None)
    assert s.events() == [("ask", 1), ("ask", 2), ("tell", 2), ("tell", 1)]
    assert s.trials("failed")[0].id == 2


def test_wal_mode_and_no_pickles(tmp_path):
    """The database runs in WAL mode and holds only text and numbers."""
    s = Store.create(tmp_path, {})
    s.finish_trial(s.add_trial("x" * 16, {"a": 1}), TrialOutcome("done", {"m": 1.0}))
    s.close()
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    for table in ("meta", "trials", "events"):
        for row in conn.execute(f"SELECT * FROM {table}"):
            assert all(v is None or isinstance(v, (str, int, float)) for v in row)
    row = conn.execute("SELECT arch, metrics FROM trials").fetchone()
    assert json.loads(row[0]) == {"a": 1} and json.loads(row[1]) == {"m": 1.0}


def test_create_never_overwrites(tmp_path):
    """Creating a store where one exists is a StoreError and leaves the old one intact."""
    s = Store.create(tmp_path, {"v": 1})
    s.add_trial("a" * 16, {"a": 1})
    s.close()
    with pytest.raises(StoreError, match="already holds a run"):
        Store.create(tmp_path, {"v": 2})
    assert Store.open(tmp_path).config() == {"v": 1}


@pytest.mark.parametrize("existed", [True, False])
def test_discard_leaves_the_folder_as_it_was(tmp_path, existed):
    """A writer that discards the run it created removes the record and whatever appeared in
    the folder since (links removed, not followed), keeps what was there before, removes a
    folder it made, and a new run can then be created there."""
    d, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the run's")
    if existed:
        d.mkdir()
        (d / "notes.txt").write_text("the user's")
    store = Store.create(d, {"v": 1})
    store.add_trial("a" * 16, {"a": 1})
    (d / "logs").mkdir(exist_ok=True)
    (d / "logs" / "trial_1.log").write_text("output")
    (d / "link").symlink_to(outside, target_is_directory=True)
    store.discard()
    assert sorted(os.listdir(d)) == ["notes.txt"] if existed else not d.exists()
    assert (outside / "keep.txt").read_text() == "not the run's"
    with Store.create(d, {"v": 2}) as again:
        assert again.config() == {"v": 2}


def test_missing_store(tmp_path):
    """Opening a directory without a database names the fix."""
    with pytest.raises(StoreError, match="nasforge run"):
        Store.open(tmp_path)


def test_corrupted_file(tmp_path):
    """A file that is not SQLite is a StoreError, not a new empty experiment."""
    (tmp_path / DB_NAME).write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a readable run record|corrupted|cannot be opened"):
        Store.open(tmp_path)
    assert (tmp_path / DB_NAME).read_bytes().startswith(b"this is not")


def test_foreign_sqlite_database(tmp_path):
    """An SQLite database of another program is refused."""
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a nasforge run"):
        Store.open(tmp_path)


def _set_meta(directory, **values):
    """Rewrites meta keys of a closed record, as another nasforge would have written them."""
    conn = sqlite3.connect(directory / DB_NAME)
    for key, value in values.items():
        if value is None:
            conn.execute("DELETE FROM meta WHERE key=?", (key,))
        else:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
    conn.commit()
    conn.close()


def test_a_record_names_the_nasforge_that_created_and_last_wrote_it(tmp_path):
    """A new record stores this nasforge's version beside the format version; a writer that
    opens a record an earlier nasforge wrote sets nasforge_version and keeps created_by."""
    from nasforge import __version__

    Store.create(tmp_path, {}).close()
    with Store.open(tmp_path) as r:
        assert r.get_meta("version") == str(FORMAT_VERSION)
        assert r.get_meta("nasforge_version") == r.get_meta("created_by") == __version__
    _set_meta(tmp_path, nasforge_version="0.1.9", created_by="0.1.9")
    Store.open(tmp_path, readonly=False).close()
    with Store.open(tmp_path) as r:
        assert (r.get_meta("nasforge_version"), r.get_meta("created_by")) == (__version__, "0.1.9")


def test_a_newer_format_is_refused_naming_its_nasforge_and_unchanged(tmp_path):
    """A record of a newer format version is refused, to readers and writers, with the
    nasforge that wrote it and the advice to upgrade; its bytes stay as they were."""
    Store.create(tmp_path, {}).close()
    _set_meta(tmp_path, version=str(FORMAT_VERSION + 1), nasforge_version="9.1.0")
    before = (tmp_path / DB_NAME).read_bytes()
    for readonly in (True, False):
        with pytest.raises(StoreError, match=r"written by nasforge 9\.1\.0.*upgrade nasforge"):
            Store.open(tmp_path, readonly=readonly)
    assert (tmp_path / DB_NAME).read_bytes() == before


def test_an_older_or_unnumbered_format_is_refused_and_unchanged(tmp_path):
    """A run.db of an older format version (or a version that is no number) is refused with
    both versions named; nothing is migrated in place."""
    Store.create(tmp_path, {}).close()
    for version, match in (
        ("1", "version 1.*reads version 2.*nasforge that wrote it"),
        ("x", "'x', not a number"),
    ):
        _set_meta(tmp_path, version=version, nasforge_version=None)
        before = (tmp_path / DB_NAME).read_bytes()
        for readonly in (True, False):
            with pytest.raises(StoreError, match=match):
                Store.open(tmp_path, readonly=readonly)
        assert (tmp_path / DB_NAME).read_bytes() == before


def test_format_1_of_nasforge_0_1_is_refused_and_unchanged(tmp_path):
    """A directory holding format 1 (experiment.db of nasforge 0.1) is refused with what it
    is and what to do; the file is untouched and no run.db appears."""
    old = tmp_path / "experiment.db"
    old.write_bytes(b"SQLite format 3\x00 as nasforge 0.1 left it")
    with pytest.raises(StoreError, match="nasforge 0.1.*format 1"):
        Store.open(tmp_path, readonly=False)
    assert old.read_bytes() == b"SQLite format 3\x00 as nasforge 0.1 left it"
    assert not (tmp_path / DB_NAME).exists()


def test_a_format_2_record_from_before_0_2_0_is_read_unchanged(tmp_path):
    """A format-2 record made before versions were stored (no nasforge_version, created_by)
    is read as it is, and a reader changes no byte of it."""
    s = Store.create(tmp_path, {"kind": "x"})
    s.finish_trial(s.add_trial("a" * 16, {"a": 1}), TrialOutcome("done", {"m": 1.0}))
    s.finish()
    s.close()
    _set_meta(tmp_path, nasforge_version=None, created_by=None)
    before = (tmp_path / DB_NAME).read_bytes()
    with Store.open(tmp_path) as r:
        assert r.get_meta("nasforge_version") is None
        assert [t.metrics for t in r.trials()] == [{"m": 1.0}]
    assert (tmp_path / DB_NAME).read_bytes() == before


def test_progress_rows_replace_by_step_and_artifacts_round_trip(tmp_path):
    """Progress rows come back in step order (a rewritten step replaces its row, NaN becomes
    None); artifacts come back with absolute paths; non-JSON data is refused."""
    s = Store.create(tmp_path, {"kind": "x"})
    s.add_progress(1, {"loss": 1.5})
    s.add_progress(2, {"loss": float("nan"), "arch": {"a": 1}})
    s.add_progress(1, {"loss": 1.25})
    with pytest.raises(StoreError):
        s.add_progress(3, {"bad": object()})
    s.add_artifact("supernet", tmp_path / "artifacts" / "w.pt", "supernet", {"n": 1})
    s.close()
    s = Store.open(tmp_path)
    assert s.progress() == [{"loss": 1.25, "step": 1}, {"loss": None, "arch": {"a": 1}, "step": 2}]
    assert s.progress(last=1)[0]["step"] == 2
    assert s.artifact("supernet") == tmp_path / "artifacts" / "w.pt"
    assert s.artifacts()["supernet"]["meta"] == {"n": 1}
    s.close()


def test_second_writer_is_refused_naming_the_holder_and_readers_are_not(tmp_path):
    """While a writer holds a run, another writer gets a LockError naming its pid; a reader
    opens and reads at once; after the writer closes, a writer may open it."""
    import os

    from nasforge.errors import LockError

    w = Store.create(tmp_path, {"kind": "x"})
    with pytest.raises(LockError, match=f"process {os.getpid()}"):
        Store.open(tmp_path, readonly=False)
    with Store.open(tmp_path) as r:
        assert r.config() == {"kind": "x"} and r.state() == "running"
    w.close()
    with Store.open(tmp_path) as r:
        assert r.state() == "interrupted"  # says running, but nobody writes it
    Store.open(tmp_path, readonly=False).close()


def test_a_killed_writer_leaves_no_lock(tmp_path):
    """A writer process killed with SIGKILL while holding the lock does not lock the run."""
    import signal
    import subprocess
    import sys

    code = (
        "import sys, time; from nasforge.run.store import Store; "
        f"s = Store.create({str(tmp_path)!r}, {{'kind': 'x'}}); print('held', flush=True); "
        "time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        from nasforge.errors import LockError

        with pytest.raises(LockError, match=f"process {proc.pid}"):
            Store.open(tmp_path, readonly=False)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()  # reaped: its descriptors, and with them its lock, are closed
    with Store.open(tmp_path, readonly=False) as s:
        assert s.config() == {"kind": "x"}


def test_corrupt_rows_are_store_errors_naming_the_row(tmp_path):
    """Invalid JSON in a trial or in the stored config gives a StoreError naming the row, not
    a JSONDecodeError."""
    s = Store.create(tmp_path, {"kind": "x"})
    s.finish_trial(s.add_trial("a" * 16, {"a": 1}), TrialOutcome("done", {"m": 1.0}))
    s.close()
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE trials SET metrics='{not json' WHERE id=1")
    conn.commit()
    with Store.open(tmp_path) as r, pytest.raises(StoreError, match="trials row 1"):
        r.trials()
    conn.execute("UPDATE meta SET value='[1, 2' WHERE key='config'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="meta row 'config'"):
        Store.open(tmp_path)


def test_placement_round_trips_and_an_older_record_gains_its_column(tmp_path):
    """A trial's placement is stored as JSON and read back; a record written before the
    placement column existed reads as None, and gains the column when a writer opens it."""
    import sqlite3

    obj = {"kind": "x", "objective": {"metric": "acc", "mode": "max"}}
    with Store.create(tmp_path / "new", obj) as s:
        t = s.add_trial("a" * 16, {"w": 1})
        s.finish_trial(
            t, TrialOutcome("done", {"acc": 1.0}, placement={"node": "h", "devices": [1]})
        )
        assert s.trial(t).placement == {"node": "h", "devices": [1]}
        assert s.trials(light=True)[0].placement == {"node": "h", "devices": [1]}
    old = tmp_path / "old"
    with Store.create(old, obj) as s:
        s.finish_trial(s.add_trial("a" * 16, {"w": 1}), TrialOutcome("done", {"acc": 1.0}))
    conn = sqlite3.connect(old / "run.db")
    conn.execute("ALTER TABLE trials DROP COLUMN placement")  # as an older nasforge made it
    conn.commit()
    conn.close()
    with Store.open(old) as r:  # a reader never changes the file
        assert r.trials()[0].placement is None and r.trial(1).placement is None
    with Store.open(old, readonly=False) as w:
        t = w.add_trial("b" * 16, {"w": 2})
        w.finish_trial(
            t, TrialOutcome("done", {"acc": 0.5}, placement={"node": "h", "devices": []})
        )
        assert [x.placement for x in w.trials()] == [None, {"node": "h", "devices": []}]


def test_a_writer_that_does_not_finish_leaves_the_state_it_found(tmp_path):
    """A writer that opens a finished (or failed) run for extra work, or only to check it,
    and closes without finish() leaves the state as it found it, not ``running``."""
    s = Store.create(tmp_path, {"kind": "x"})
    s.finish("failed", "a diverged loss")
    s.close()
    with Store.open(tmp_path, readonly=False) as w:
        w.record_trial("a" * 16, {"a": 1}, TrialOutcome("done", {"m": 1.0}, evaluation="inherited"))
    with Store.open(tmp_path) as r:
        assert (r.state(), r.get_meta("error")) == ("failed", "a diverged loss")
    w = Store.open(tmp_path, readonly=False)
    w.finish("finished")
    w.close()
    Store.open(tmp_path, readonly=False).close()
    assert Store.open(tmp_path).state() == "finished"


@pytest.mark.parametrize(
    "column, value",
    [
        ("metrics", '{"m": "high"}'),  # a text metric
        ("duration", "two seconds"),  # a text duration
        ("error", b"\x00\xffbinary"),  # a BLOB error
        ("started", "yesterday"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_store_error_naming_the_row(tmp_path, column, value):
    """A trial column holding a value of another type (as a damaged or migrated record can)
    is a StoreError naming the row and the column, for every reader: trials, one trial,
    and `nasforge status` (one line, exit 2, no traceback)."""
    from nasforge.cli import main

    objective = {"metric": "m", "mode": "max", "constraints": {}, "second": None}
    s = Store.create(tmp_path, {"kind": "multitrial", "objective": objective})
    s.finish_trial(s.add_trial("a" * 16, {"a": 1}), TrialOutcome("done", {"m": 1.0}, duration=1.0))
    s.finish_trial(s.add_trial("b" * 16, {"a": 2}), TrialOutcome("done", {"m": 2.0}, duration=1.0))
    s.close()
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute(f"UPDATE trials SET {column}=? WHERE id=2", (value,))
    conn.commit()
    conn.close()
    with Store.open(tmp_path) as r:
        with pytest.raises(StoreError, match=f"trials row 2.*{column}"):
            r.trials()
        # the light read and a read of one status find it too (one scan in SQLite first)
        with pytest.raises(StoreError, match=f"trials row 2.*{column}"):
            r.trials(light=True)
        with pytest.raises(StoreError, match=f"trials row 2.*{column}"):
            r.trials("done")
        with pytest.raises(StoreError, match=f"trials row 2.*{column}"):
            r.trial_metrics()
        with pytest.raises(StoreError, match=f"trials row 2.*{column}"):
            r.trial(2)
        assert r.trial(1).metrics == {"m": 1.0}
    assert main(["status", str(tmp_path)]) == 2


def test_trial_metrics_reads_what_trials_shows_of_each_trial(tmp_path):
    """The metrics-only read (what plot and export rank by) gives each trial the id, arch id,
    status and metrics that trials() gives: a trial left running by a writer that is gone
    reads interrupted in both, a failed one has no metrics; the other fields stay empty."""
    objective = {"metric": "m", "mode": "max", "constraints": {}, "second": None}
    s = Store.create(tmp_path, {"kind": "multitrial", "objective": objective})
    s.finish_trial(
        s.add_trial("a" * 16, {"a": 1}), TrialOutcome("done", {"m": 1.0, "n": None}, duration=1.0)
    )
    s.finish_trial(s.add_trial("b" * 16, {"a": 2}), TrialOutcome("failed", None, error="boom"))
    s.add_trial("c" * 16, {"a": 3})  # left running
    s.close()
    with Store.open(tmp_path) as r:
        full, light = r.trials(), r.trial_metrics()
    assert [(t.id, t.arch_id, t.status, t.metrics) for t in light] == [
        (t.id, t.arch_id, t.status, t.metrics) for t in full
    ]
    assert [t.status for t in light] == ["done", "failed", "interrupted"]
    assert all(t.arch == {} and t.error is None and t.duration is None for t in light)
