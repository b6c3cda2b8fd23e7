"""Tests of `nasforge migrate`: a real nasforge 0.1 record copied into format 2, never changed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import torch

import nasforge
from nasforge.cli import main
from nasforge.errors import StoreError
from nasforge.run.export import export_top
from nasforge.run.migrate import MIGRATE_NOTE, MIGRATED_KEY, migrate
from nasforge.run.status import print_status
from nasforge.run.store import DB_NAME, OLD_DB_NAME, Store
from tests.run import _format1_record, _format1_store


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Returns every file under ``directory`` with its bytes and modification time."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """Returns a directory holding a nasforge 0.1 record written by 0.1's own store."""
    return _format1_record.build(tmp_path / "old")


def test_a_0_1_record_is_copied_with_its_trials_events_progress_and_weights(
    old: Path, tmp_path: Path
) -> None:
    """Trials (ids, statuses, metrics, checkpoints as relative paths), events, the records
    rows as progress, the config as a multitrial one, and where it came from, all in NEW;
    OLD keeps every byte and modification time, and gains no file."""
    before = _snapshot(old)
    new = migrate(old, tmp_path / "new")
    assert _snapshot(old) == before  # no -wal/-shm left either: the set of files is the same
    with Store.open(new) as s:
        trials = s.trials()
        assert [(t.id, t.status) for t in trials] == [
            (1, "done"), (2, "failed"), (3, "cached"), (4, "interrupted")
        ]  # fmt: skip
        assert trials[0].arch == _format1_record.ARCH
        assert trials[0].metrics == {"accuracy": 0.9, "params": 5e3}
        assert trials[0].intermediates == [{"accuracy": 0.9}] and trials[0].duration == 2.5
        assert trials[1].error == "RuntimeError: boom"
        assert trials[2].cached_from == 1
        assert [t.checkpoint for t in trials] == [
            "checkpoints/trial_1.pt", None, "checkpoints/trial_1.pt", None
        ]  # fmt: skip
        assert {t.evaluation for t in trials} == {"trained"}
        assert {t.placement for t in trials} == {None}
        assert s.events() == [
            ("ask", 1), ("ask", 2), ("tell", 1), ("tell", 2), ("ask", 3), ("tell", 3), ("ask", 4)
        ]  # fmt: skip
        assert s.progress() == [{"record": "epoch", "epoch": 1, "loss": 0.5, "step": 1}]
        config = s.config()
        assert config["kind"] == s.kind == "multitrial"
        assert s.objective() == {
            "metric": "accuracy",
            "mode": "max",
            "constraints": {"params": ["<=", 1e6]},
            "second": ["params", "min"],
        }
        assert config["multitrial"]["strategy"] == {"name": "random", "config": {"seed": 0}}
        assert config["space"] == {
            "object": "nasforge.spaces.cnn:DigitsCNN", "args": [], "kwargs": {}
        }  # fmt: skip
        assert s.state() == "finished" and s.get_meta("elapsed") == "3.0"
        origin = json.loads(s.get_meta(MIGRATED_KEY) or "")
        assert origin["path"] == str(old.resolve()) and origin["format"] == 1
        (note,) = s.notes(MIGRATE_NOTE)
        assert str(old.resolve()) in note["detail"] and note["trials"] == 4
        assert note["weights"] == 1 and note["missing_weights"] == 0
    weights = (new / "checkpoints" / "trial_1.pt").read_bytes()
    assert weights == (old / "checkpoints" / "trial_1.pt").read_bytes()


def test_export_and_load_model_work_on_the_copy(old: Path, tmp_path: Path) -> None:
    """The best trial exports from the copy and loads back as the 0.1 space's model with the
    weights 0.1 saved."""
    new = migrate(old, tmp_path / "new")
    (folder,) = export_top(new, 1)
    assert folder.name == "rank1_trial1"
    model = nasforge.load_model(folder)
    saved = torch.load(old / "checkpoints" / "trial_1.pt", weights_only=True)
    got = model.state_dict()
    assert set(got) == set(saved) and all(torch.equal(got[k], saved[k]) for k in saved)
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 10)


def test_the_cli_migrates_shows_status_and_refuses_resume(
    old: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`nasforge migrate OLD NEW` writes the copy; `status`, `export`, `plot` read it; `resume`
    is refused with a message saying why and what to do instead."""
    new = tmp_path / "new"
    assert main(["migrate", str(old), str(new)]) == 0
    assert capsys.readouterr().out.strip() == str(new)
    assert main(["status", str(new)]) == 0
    out = capsys.readouterr().out
    assert "finished" in out and "nasforge 0.1 record" in out
    assert main(["export", str(new), "--top", "1"]) == 0
    assert (new / "export" / "rank1_trial1" / "weights.pt").exists()
    assert main(["plot", str(new), "--out", str(tmp_path / "plot.png")]) == 0
    assert (tmp_path / "plot.png").stat().st_size > 0
    before = (new / DB_NAME).read_bytes()
    assert main(["resume", str(new)]) == 2
    assert "copy of a nasforge 0.1 run" in caplog.text and "nasforge run FILE" in caplog.text
    assert (new / DB_NAME).read_bytes() == before


def test_opening_a_0_1_record_names_the_migrate_command(old: Path) -> None:
    """Store.open (so status, export, resume) refuses format 1 naming `nasforge migrate`."""
    before = _snapshot(old)
    with pytest.raises(StoreError, match=f"nasforge migrate {old} NEW_DIR"):
        Store.open(old)
    with pytest.raises(StoreError, match="nasforge migrate"):
        print_status(old)
    assert _snapshot(old) == before


def test_a_new_directory_holding_a_run_or_files_is_refused(old: Path, tmp_path: Path) -> None:
    """NEW holding a run (either format), holding other files, or inside OLD is refused and
    left as it was."""
    taken = tmp_path / "taken"
    Store.create(taken, {"kind": "x"}).close()
    before = _snapshot(taken)
    with pytest.raises(StoreError, match="already holds a run"):
        migrate(old, taken)
    assert _snapshot(taken) == before
    with pytest.raises(StoreError, match="already holds a run"):
        migrate(old, old)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep")
    with pytest.raises(StoreError, match="not empty"):
        migrate(old, busy)
    with pytest.raises(StoreError, match="lies in"):
        migrate(old, old / "copy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "old", "taken"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (migrate(old, empty) / DB_NAME).exists()


def test_a_newer_format_is_still_refused(old: Path, tmp_path: Path) -> None:
    """A format-2 record of a newer version is refused by Store.open; migrate refuses a
    directory of format 2 (nothing to migrate) and a format-1 file of another version."""
    new = migrate(old, tmp_path / "new")
    with sqlite3.connect(new / DB_NAME) as conn:
        conn.execute("UPDATE meta SET value='3' WHERE key='version'")
    conn.close()
    with pytest.raises(StoreError, match="store format version 3.*upgrade nasforge"):
        Store.open(new)
    with pytest.raises(StoreError, match="nothing to migrate"):
        migrate(new, tmp_path / "again")
    odd = tmp_path / "odd"
    shutil.copytree(old, odd)
    with sqlite3.connect(odd / OLD_DB_NAME) as conn:
        conn.execute("UPDATE meta SET value='2' WHERE key='version'")
    conn.close()
    with pytest.raises(StoreError, match="version '2'; migrate reads nasforge 0.1's version 1"):
        migrate(odd, tmp_path / "odd-new")
    assert not (tmp_path / "again").exists() and not (tmp_path / "odd-new").exists()


def test_a_missing_or_corrupt_record_is_one_line(tmp_path: Path) -> None:
    """No experiment.db, a file that is not SQLite, or SQLite that is not a 0.1 record: a
    one-line StoreError, and nothing written anywhere."""
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / OLD_DB_NAME).write_bytes(b"SQLite format 3\x00 torn in half")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    sqlite3.connect(foreign / OLD_DB_NAME).execute("CREATE TABLE t (a)").connection.close()
    for directory, words in (
        (empty, "no nasforge 0.1 record"),
        (bad, "not a readable nasforge 0.1 record"),
        (foreign, "not a nasforge 0.1 record"),
    ):
        before = _snapshot(directory)
        with pytest.raises(StoreError, match=words) as info:
            migrate(directory, tmp_path / "new")
        assert "\n" not in str(info.value)
        assert _snapshot(directory) == before
        assert not (tmp_path / "new").exists()


def test_other_0_1_kinds_and_gone_weights(old: Path, tmp_path: Path) -> None:
    """A 0.1 one-shot record is refused; a trial whose weight file is gone migrates without a
    checkpoint and the note counts it; a space class of a script's __main__ gives no space
    reference and the note says to pass one to load_model."""
    oneshot = _format1_store.Store.create(tmp_path / "oneshot", {"kind": "oneshot"})
    oneshot.close()
    with pytest.raises(StoreError, match="'oneshot' run; migrate copies multi-trial runs only"):
        migrate(tmp_path / "oneshot", tmp_path / "oneshot-new")
    (old / "checkpoints" / "trial_1.pt").unlink()
    new = migrate(old, tmp_path / "new")
    with Store.open(new) as s:
        assert [t.checkpoint for t in s.trials()] == [None] * 4
        assert s.notes(MIGRATE_NOTE)[0]["missing_weights"] == 2
    script = _format1_record.build(tmp_path / "script", space_class="__main__.Net")
    with Store.open(migrate(script, tmp_path / "script-new")) as s:
        assert s.config()["space"] is None
        assert "pass space= to load_model" in s.notes(MIGRATE_NOTE)[0]["detail"]


def _damage(old: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(old / OLD_DB_NAME)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "sql, args, words",
    [
        ("UPDATE trials SET metrics=? WHERE id=1", ('{"accuracy": "high"}',), "trial 1.*metrics"),
        ("UPDATE trials SET duration=? WHERE id=1", ("two seconds",), "trial 1.*duration"),
        ("UPDATE trials SET error=? WHERE id=2", (b"\x00\xff",), "trial 2.*error"),
        ("UPDATE events SET trial=? WHERE seq=1", ("one",), "events row 1"),
        ("UPDATE records SET time=? WHERE seq=1", ("noon",), "records row 1"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_in_one_line(
    old: Path, tmp_path: Path, sql: str, args: tuple, words: str
) -> None:
    """A text metric or duration, a BLOB error, a text event trial or record time: migrate
    refuses the record naming the row, as it refuses JSON that does not decode (the CLI: one
    line, exit 2), and writes nothing."""
    _damage(old, sql, *args)
    with pytest.raises(StoreError, match=words) as info:
        migrate(old, tmp_path / "new")
    assert "\n" not in str(info.value)
    assert main(["migrate", str(old), str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["old"]


def test_a_symlink_as_new_is_refused(old: Path, tmp_path: Path) -> None:
    """NEW a symlink to a folder, a dangling symlink or a symlink loop: one line, exit 2,
    nothing written through it."""
    target = tmp_path / "target"
    target.mkdir()
    links = {"to-folder": target, "dangling": tmp_path / "nowhere", "loop": tmp_path / "loop"}
    for name, to in links.items():
        (tmp_path / name).symlink_to(to)
        with pytest.raises(StoreError, match="symbolic link") as info:
            migrate(old, tmp_path / name)
        assert "\n" not in str(info.value)
        assert main(["migrate", str(old), str(tmp_path / name)]) == 2
    assert list(target.iterdir()) == [] and not (tmp_path / "nowhere").exists()


def test_two_migrations_into_one_new_the_second_is_refused(old: Path, tmp_path: Path) -> None:
    """A second migration into a NEW that another filled meanwhile (between its checks and its
    rename) is one line, keeps the first copy and leaves no folder of its own."""
    import nasforge.run.migrate as m

    new = tmp_path / "new"
    real_write = m._write

    def racing(work, *a, **k):  # the other migration finishes while this one writes
        real_write(work, *a, **k)
        m._write = real_write
        migrate(old, new)

    m._write = racing
    try:
        with pytest.raises(StoreError, match="another migration") as info:
            migrate(old, new)
    finally:
        m._write = real_write
    assert "\n" not in str(info.value)
    with Store.open(new) as s:
        assert len(s.trials()) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old"]


def test_files_outside_old_are_never_copied(old: Path, tmp_path: Path) -> None:
    """A checkpoint stored as an absolute path outside OLD, as ``../x``, or a symlink in
    ``checkpoints/`` pointing outside: none is copied (the trial keeps no checkpoint, the
    note counts it), so export cannot ship it."""
    secret = tmp_path / "secret.pt"
    secret.write_bytes(b"not yours")
    (old / "checkpoints" / "trial_1.pt").unlink()
    (old / "checkpoints" / "trial_1.pt").symlink_to(secret)
    new = migrate(old, tmp_path / "new")
    for stored in (str(secret), "../secret.pt"):
        _damage(old, "UPDATE trials SET checkpoint=? WHERE id IN (1, 3)", stored)
        (old / "checkpoints" / "trial_1.pt").unlink(missing_ok=True)
        shutil.rmtree(new)
        new = migrate(old, tmp_path / "new")
        with Store.open(new) as s:
            assert [t.checkpoint for t in s.trials()] == [None] * 4
    assert not any(b"not yours" in p.read_bytes() for p in new.rglob("*") if p.is_file())


def test_a_wal_that_is_not_a_regular_file_is_refused(old: Path, tmp_path: Path) -> None:
    """An ``experiment.db-wal`` that is a symlink (to /dev/zero: it would fill the disk) or
    not a regular file is refused in one line before anything is copied."""
    wal = old / (OLD_DB_NAME + "-wal")
    wal.symlink_to("/dev/zero")
    with pytest.raises(StoreError, match="-wal.*not a regular file") as info:
        migrate(old, tmp_path / "new")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "new").exists()


def test_a_killed_migrations_leftovers_are_removed(old: Path, tmp_path: Path) -> None:
    """A migrate killed (kill -9) while writing leaves its hidden work folder beside NEW; the
    next migrate into that NEW removes it, and keeps its own scratch copy beside NEW too
    (nothing in the system temp folder that a kill would leave)."""
    import subprocess
    import sys

    new = tmp_path / "new"
    code = (
        "import os, sys, nasforge.run.migrate as m\n"
        "real = m._write\n"
        "def slow(work, *a, **k):\n"
        "    real(work, *a, **k)\n"
        "    sys.stdout.write('written\\n'); sys.stdout.flush()\n"
        "    import time; time.sleep(60)\n"
        "m._write = slow\n"
        f"m.migrate({str(old)!r}, {str(new)!r})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    finally:
        proc.kill()
        proc.wait()  # reaped: nothing of it writes any more
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".new.migrating-")]
    assert left  # what a kill leaves
    migrate(old, new)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old"]
