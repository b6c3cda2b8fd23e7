"""What a running run can be asked: requests decoded defensively, each kind's declared
controls, refusals in one line before anything is left, and the one hook that applies them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.errors import ConfigError
from nasforge.run.requests import CONTROL, MAX_REQUEST_BYTES, Request, take_requests
from nasforge.run.store import Store, TrialOutcome
from tests.run._kinds import MinimalRun
from tests.runwait import wait_for_run

ROOT = Path(__file__).resolve().parents[2]


def test_request_files_decode_to_typed_requests_or_bad_ones():
    """A request decodes with typed fields, or is ``bad`` with a reason; what each needs is
    named by the control it asks for."""
    assert Request.from_data({"action": "stop"}).needs() == ["stop"]
    assert Request.from_data({"action": "stop", "mode": "cancel"}).needs() == ["stop:cancel"]
    assert Request.from_data({"action": "cancel", "trial": 3}).trial == 3
    got = Request.from_data({"action": "set", "n_trials": 5, "concurrency": 2, "via": "x" * 99})
    assert got.needs() == ["set:n_trials", "set:concurrency"] and len(got.via) == 40
    for bad in (
        [1, 2], {"action": "stop", "mode": "now"}, {"action": "cancel", "trial": True},
        {"action": "cancel", "trial": 0}, {"action": "set", "n_trials": "5"},
        {"action": "set", "n_trials": True}, {"action": "set", "epochs": 3},
        {"action": "set"}, {"action": "rm -rf"},
    ):  # fmt: skip
        request = Request.from_data(bad)
        assert request.action == "bad" and request.error and request.needs() == [], bad
    assert Request.from_data(got.to_data()) == got


def test_take_requests_reads_only_small_regular_files_and_never_follows_links(tmp_path):
    """A symlink (to a secret), a FIFO (which would block a reader), a directory, an oversized
    file and a non-JSON file are each taken as a ``bad`` request, promptly and without reading
    what a link points to; a request still being written (``.tmp``) is left."""
    folder = tmp_path / CONTROL
    folder.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"action": "stop"}))
    (folder / "1-link.json").symlink_to(secret)
    os.mkfifo(folder / "2-fifo.json")
    (folder / "3-big.json").write_text(" " * (MAX_REQUEST_BYTES + 1) + "{}")
    (folder / "4-text.json").write_text("stop please")
    (folder / "5-good.json").write_text(json.dumps({"action": "stop", "via": "cli"}))
    (folder / ".6-half.json.tmp").write_text("{")
    taken = take_requests(tmp_path)
    assert [r.action for r in taken] == ["bad", "bad", "bad", "bad", "stop"]
    assert secret.exists() and sorted(p.name for p in folder.iterdir()) == [".6-half.json.tmp"]


class _StepRun(MinimalRun):
    """A kind that leaves requests to itself at its first step, as a shell would."""

    kind = "test-steps"
    controls = frozenset({"stop"})
    boundary = "step"
    asks: list[dict] = []

    def _execute(self, store: Store, resume: bool) -> None:
        for step in range(1, 4):
            store.add_progress(step, {"loss": 1.0 / step})
            if step == 1:
                (self.directory / CONTROL).mkdir(exist_ok=True)
                for i, ask in enumerate(self.asks):
                    (self.directory / CONTROL / f"{i}.json").write_text(json.dumps(ask))
            self.check_stop()
        store.record_trial("a" * 16, {"w": 1}, TrialOutcome("done", {"accuracy": 1.0}))


def test_the_hook_applies_what_the_kind_declares_and_notes_the_rest_as_ignored(tmp_path):
    """Requests left at step 1 are taken at that step's boundary: a ``set`` and a malformed
    file, which this kind does not take, become ``ignored`` notes; the ``stop`` ends the run
    there, recorded ``stopped``, with what it did kept; the kind's controls are recorded."""
    _StepRun.asks = [{"action": "set", "n_trials": 9}, {"action": "stop"}, "not an object"]
    _StepRun(tmp_path / "run").run()
    with Store.open(tmp_path / "run") as store:
        assert store.state() == "stopped" and store.n_progress() == 1 and not store.trials()
        assert store.controls() == frozenset({"stop"})
        notes = [(n["event"], n["detail"]) for n in store.notes("control")]
    assert [event for event, _ in notes] == ["ignored", "stop", "ignored"]
    assert "cannot take ['set:n_trials']" in notes[0][1] and "not a JSON object" in notes[2][1]


def test_undeclared_controls_are_a_config_error():
    """A kind that declares a control nasforge does not know is refused when built."""

    class _Odd(_StepRun):
        controls = frozenset({"stop", "pause"})

    with pytest.raises(ConfigError, match="pause"):
        _Odd(Path("nowhere"))


_WRITER = """
import sys, time
from nasforge.run.store import Store
s = Store.create(sys.argv[1], {"kind": "test-held", "objective": {"metric": "m", "mode": "max"}})
s.set_controls({"stop"})
s.set_meta("ready", "yes")
time.sleep(120)
"""


def test_a_request_the_kind_cannot_take_is_one_line_and_exit_2(tmp_path, caplog):
    """While a run that declared only ``stop`` is written by another process, ``set``,
    ``stop --trial`` and ``stop --cancel`` each answer one line naming what it takes, exit 2
    and leave no request; ``stop`` is left for it."""
    directory = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(directory)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        assert wait_for_run(directory, lambda s: s.get_meta("ready") == "yes", timeout=60)
        for argv in (["set", "n_trials=5"], ["stop", "--trial", "1"], ["stop", "--cancel"]):
            caplog.clear()
            assert main([argv[0], str(directory), *argv[1:]]) == 2
            said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
            assert len(said) == 1 and "\n" not in said[0], said
            assert "a test-held run cannot take" in said[0]
            assert "it can be asked to stop at the next boundary" in said[0]
        assert not list((directory / CONTROL).glob("*"))
        assert main(["stop", str(directory)]) == 0
        assert [r.action for r in take_requests(directory)] == ["stop"]
    finally:
        proc.kill()
        proc.wait()


_FLOCK = """
import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def test_stop_and_set_refuse_a_lock_held_by_another_program(tmp_path, caplog):
    """A run's writer lock held with a plain flock by a program that is not nasforge (no
    .writer.json, or one naming an ended process): `stop` and `set` exit 2 with one line
    saying so and leave no request."""
    from nasforge.run.lock import HOLDER_NAME, LOCK_NAME
    from tests.dashboard.records import make_record

    directory = tmp_path / "run"
    make_record(directory, n=2)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    holder = directory / HOLDER_NAME
    stale = holder.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {ended}')
    proc = subprocess.Popen([sys.executable, "-c", _FLOCK, str(directory / LOCK_NAME)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        for description in (None, stale):
            if description is None:
                holder.unlink()
            else:
                holder.write_text(description)
            for argv in (["stop"], ["set", "n_trials=5"]):
                caplog.clear()
                assert main([argv[0], str(directory), *argv[1:]]) == 2
                said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
                assert len(said) == 1 and "\n" not in said[0], said
                assert "is locked, but not by a nasforge run" in said[0]
        assert not (directory / CONTROL).exists()
    finally:
        proc.kill()
        proc.wait()


def test_a_request_is_never_written_through_a_linked_control_folder(tmp_path, caplog) -> None:
    """A `control` folder swapped for a link (to another run's) gets no request: the command
    refuses in one line, and the link's target stays empty."""
    directory, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(directory)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        assert wait_for_run(directory, lambda s: s.get_meta("ready") == "yes", timeout=60)
        (directory / CONTROL).symlink_to(elsewhere, target_is_directory=True)
        assert main(["stop", str(directory)]) == 2
        assert not list(elsewhere.iterdir())
    finally:
        proc.kill()
        proc.wait()
