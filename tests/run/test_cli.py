"""Tests of the shared commands at their edge: a path that cannot be a run directory or an
output folder, a missing optional package or data file, are one line and exit status 2, and
nothing is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.run.records import TrialOutcome
from nasforge.run.store import Store
from tests.run.test_kind_settings import TINY_RUN_FILE

ROOT = Path(__file__).resolve().parents[2]
PIPE = (
    'kind = "pipeline"\nsteps = 2\npipeline = 1\nbatch_size = 16\nn_eval = 3\n'
    "space_kwargs = {n_blocks = 3, n_candidates = 2, hidden = 16}\n"
)


def _nasforge(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "nasforge.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_run_into_a_file_is_one_line_and_status_2(tmp_path: Path) -> None:
    """`nasforge run FILE --dir PATH` with PATH an existing file: one line on stderr naming
    it, exit status 2, the file untouched (it was a FileExistsError traceback, status 1)."""
    (tmp_path / "pipe.toml").write_text(PIPE)
    target = tmp_path / "notes.txt"
    target.write_text("keep me\n")
    got = _nasforge("run", str(tmp_path / "pipe.toml"), "--dir", str(target))
    assert got.returncode == 2, got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and str(target) in got.stderr
    assert "is a file" in got.stderr and "Traceback" not in got.stderr
    assert target.read_text() == "keep me\n" and sorted(os.listdir(tmp_path)) == [
        "notes.txt", "pipe.toml"]  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{pipe}", "--dir", "{file}/sub"],
        ["train-supernet", "--out", "{file}", "--steps", "1"],
        ["ofa", "train", "--out", "{file}", "--full-epochs", "1", "--shrink-epochs", "1"],
        ["export", "{run}", "--out", "{file}"],
        ["export", "{run}", "--out", "{file}/x"],
        ["plot", "{run}", "--out", "{file}/x.png"],
        ["resume", "{file}"],
        ["status", "{file}"],
    ],
)
def test_every_command_refuses_a_file_where_a_folder_belongs(
    tmp_path: Path, argv: list[str], caplog
) -> None:
    """Each command that takes a run directory or an output folder answers a file there (or
    a path under one) with a NasforgeError (status 2), never an OSError, and writes nothing."""
    run = tmp_path / "run"
    with Store.create(run, {"kind": "x", "objective": {"metric": "acc", "mode": "max"}}) as s:
        s.record_trial("a" * 16, {"w": 1}, TrialOutcome("done", {"acc": 0.5}, evaluation="trained"))
        s.finish()
    (tmp_path / "pipe.toml").write_text(PIPE)
    file = tmp_path / "notes.txt"
    file.write_text("keep me\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    names = {"pipe": str(tmp_path / "pipe.toml"), "file": str(file), "run": str(run)}
    assert main([a.format(**names) for a in argv]) == 2
    assert str(file) in caplog.text and "is a file" in caplog.text
    assert file.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_plot_makes_the_folder_it_is_given(tmp_path: Path) -> None:
    """`nasforge plot DIR --out new/x.png` makes the missing folder (it was a
    FileNotFoundError traceback)."""
    run = tmp_path / "run"
    with Store.create(run, {"kind": "x", "objective": {"metric": "acc", "mode": "max"}}) as s:
        for i in range(3):
            s.record_trial(
                f"{i:016x}", {"w": i}, TrialOutcome("done", {"acc": i / 3}, evaluation="trained")
            )
        s.finish()
    assert main(["plot", str(run), "--out", str(tmp_path / "new" / "x.png")]) == 0
    assert (tmp_path / "new" / "x.png").stat().st_size > 1000


TOY = ROOT.parent / "shared" / "data" / "opennmt_toy_ende"
DARTSFORMER = (
    "kind: dartsformer\ndata: {data}\npairs: 120\ntest: 6\nvocab: 300\n"
    "space: {{d: 24, e: 8, n_splits: 2, s: 1, heads: 4}}\nmax_steps: 4\nlog_every: 2\n"
    "batch_tokens: 300\nretrain: {{steps: 2}}\nthreads: 1\nprogress: 'off'\n"
)


@pytest.mark.skipif(not TOY.is_dir(), reason="needs the toy translation data (shared/data)")
@pytest.mark.parametrize("missing", ["tokenizers", "sacrebleu"])
def test_a_missing_optional_package_leaves_no_record(tmp_path: Path, missing: str) -> None:
    """`nasforge run` of a dartsformer file without `tokenizers` (or, with a retrain scored by
    BLEU, `sacrebleu`): one line naming the package and its extra, status 2, and no run
    directory (it was left `failed`, so the next `run` there was refused)."""
    f = tmp_path / "toy.yaml"
    f.write_text(DARTSFORMER.format(data=TOY))
    code = (
        f"import sys; sys.modules[{missing!r}] = None; from nasforge.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-c", code, "run", str(f), "--dir", str(tmp_path / "run")]
    got = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 2, got.stderr
    assert len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert missing in got.stderr and "nasforge[translation]" in got.stderr
    assert not (tmp_path / "run").exists()


def test_a_missing_data_file_leaves_no_record(tmp_path: Path, caplog) -> None:
    """A run file naming a data file that is not there (an OFA run here) is refused before
    the record exists: status 2, a message naming the file, no run directory."""
    f = tmp_path / "ofa.yaml"
    f.write_text("kind: ofa\nspace: compofa\ndata: gone.pt\nfull_epochs: 1\nshrink_epochs: 1\n")
    assert main(["run", str(f), "--dir", str(tmp_path / "run")]) == 2
    assert str(tmp_path / "gone.pt") in caplog.text
    assert not (tmp_path / "run").exists()


def test_a_missing_executor_package_leaves_no_record(tmp_path: Path, monkeypatch, caplog):
    """A multi-trial run file asking for the `ray` executor without Ray installed is refused
    before the record exists (it failed at the first trial, leaving a failed run)."""
    from tests.run.test_kinds import FILES, SPACE

    (tmp_path / "kinds_space.py").write_text(SPACE)
    f = tmp_path / "multitrial.py"
    f.write_text("from kinds_space import Net, evaluate\n" + FILES["multitrial"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "ray", None)
    argv = ["run", str(f), "--dir", str(tmp_path / "run"), "--executor", "ray"]
    assert main(argv) == 2
    assert "'ray' package" in caplog.text and "nasforge[ray]" in caplog.text
    assert not (tmp_path / "run").exists()


def test_resume_reads_the_record_once_before_the_run_opens_it(tmp_path: Path, monkeypatch):
    """`nasforge resume DIR` reads the record once to pick the kind and rebuild the runner
    (it was opened three times: for the flags, the kind and the rebuild); the rebuild from
    what was read opens no store, and the resumed run goes on from the same record."""
    import nasforge.run.files as files

    f = tmp_path / "exp.py"
    f.write_text(TINY_RUN_FILE)
    run = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(run)]) == 0
    reads: list[str] = []
    read = files.read_recorded

    def counted(directory):
        reads.append(str(directory))
        return read(directory)

    for module in ("nasforge.run.cli", "nasforge.run.files"):
        monkeypatch.setattr(f"{module}.read_recorded", counted)
    rebuild = files.rebuild_runner

    def rebuild_without_the_store(recorded, **overrides):
        with monkeypatch.context() as m:
            m.setattr(Store, "open", None)  # any opening here fails
            return rebuild(recorded, **overrides)

    monkeypatch.setattr("nasforge.run.cli.rebuild_runner", rebuild_without_the_store)
    assert main(["resume", str(run), "--n-trials", "3"]) == 0
    assert reads == [str(run)]
    with Store.open(run) as store:
        assert len(store.trials()) == 5  # --n-trials on resume adds trials
