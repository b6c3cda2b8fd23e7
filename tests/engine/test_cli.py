"""Tests of the engine's command line: run, resume, status, export, plot."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.engine import Store
from nasforge.run.export import load_model

ROOT = Path(__file__).parent.parent.parent

EXPERIMENT = """
import torch.nn as nn
import nasforge as nf

class Net(nf.ModelSpace):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, nf.choice([2, 4, 8], label="w"))
        self.act = nf.LayerChoice({"relu": nn.ReLU, "tanh": nn.Tanh}, label="act")

def evaluate(model, report):
    n = sum(p.numel() for p in model.parameters())
    return {"score": float(n), "params": float(n)}

space = Net()
strategy = "grid"
config = {"metric": "score", "second_objective": ("params", "min"), "executor": "inprocess",
          "progress": "off", "n_trials": 4}
"""


def test_run_status_resume_export_plot(tmp_path, capsys):
    """The five subcommands work end to end on a Python experiment file."""
    f = tmp_path / "exp.py"
    f.write_text(EXPERIMENT)
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    assert len(Store.open(d).trials()) == 4
    assert main(["resume", str(d), "--n-trials", "6"]) == 0
    assert len(Store.open(d).trials()) == 6
    capsys.readouterr()
    assert main(["status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "score" in out and "done" in out
    assert main(["export", str(d), "--top", "2"]) == 0
    paths = capsys.readouterr().out.split()
    meta = json.loads((Path(paths[0]) / "arch.json").read_text())
    assert meta["arch"]["w"] == 8 and meta["rank"] == 1
    model = load_model(paths[0])  # the space is rebuilt from the recorded experiment file
    assert model.fc.out_features == 8
    assert main(["plot", str(d)]) == 0
    png = Path(capsys.readouterr().out.strip())
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_yaml_experiment_on_the_tabular_benchmark(tmp_path):
    """A YAML file can name a benchmark, a strategy with arguments and a budget."""
    bench = Path("/work/shared/data/nas-bench-macro_cifar10.json")
    if not bench.exists():
        return
    f = tmp_path / "exp.yaml"
    f.write_text(
        f"benchmark: {{nas_bench_macro: {bench}}}\nstrategy: {{name: evolution, "
        "population_size: 10, seed: 1}\nn_trials: 20\nexecutor: inprocess\n"
        "progress: 'off'\n"
    )
    assert main(["run", str(f), "--dir", str(tmp_path / "y")]) == 0
    trials = Store.open(tmp_path / "y").trials()
    assert sum(t.status == "done" for t in trials) == 20


def test_errors_exit_2_with_a_message(tmp_path):
    """A missing experiment directory exits 2 with a message naming the fix."""
    out = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", "status", str(tmp_path)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "nasforge run" in out.stderr


def test_runs_of_another_kind_are_delegated_or_refused(tmp_path, capsys):
    """A store whose config names a kind without commands gets a clear error, exit code 2."""
    Store.create(tmp_path / "x", {"kind": "nosuchkind"}).close()
    for cmd in ("status", "resume", "export", "plot"):
        assert main([cmd, str(tmp_path / "x")]) == 2


PLAIN = """
from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace([Decision(f"d{i}", "value", (0, 1, 2, 3)) for i in range(4)])
strategy = "random"
config = {"n_trials": 5, "executor": "inprocess", "progress": "off"}


def evaluate(arch, report):
    return float(sum(arch.values()))
"""


def test_resume_of_a_plain_data_space_never_imports_torch(tmp_path):
    """A search over plain data (a benchmark table, a no-op evaluator) resumes without
    importing torch: the cross-model plan only loads it for an evaluator that trains models
    (a cold torch import was most of `nasforge resume`'s time on 10,000 trials)."""
    f = tmp_path / "exp.py"
    f.write_text(PLAIN)
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    code = (
        "import sys\n"
        "from nasforge.cli import main\n"
        f"assert main(['resume', {str(d)!r}, '--n-trials', '7']) == 0\n"
        "print('torch' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert len(Store.open(d).trials()) == 7


SCRIPT = """
from nasforge.engine import Experiment
from nasforge.space.search_space import Decision, SearchSpace


class Scorer:  # an instance: found again only as the script's global
    def __call__(self, arch, report):
        return float(sum(arch.values()))


space = SearchSpace([Decision(f"d{i}", "value", (0, 1, 2)) for i in range(3)])
evaluator = Scorer()

if __name__ == "__main__":
    Experiment(space, evaluator, "random", n_trials=2, executor="inprocess", progress="off",
               directory=__import__("sys").argv[1]).run()
"""


def test_a_run_started_from_python_resumes_again_and_again(tmp_path):
    """A run started by `python script.py` resumes from the command line twice, then is
    extended: a resume never replaces what the record says of the space or the evaluator
    with something it cannot rebuild (it once recorded the evaluator `unrebuildable`)."""
    f = tmp_path / "script.py"
    f.write_text(SCRIPT)
    d = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, str(f), str(d)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    with Store.open(d) as s:
        recorded = s.config()
    assert main(["resume", str(d)]) == 0
    with Store.open(d) as s:
        again = s.config()
    for key in ("space", "source"):
        assert again[key] == recorded[key]
    assert again["multitrial"]["evaluator"] == recorded["multitrial"]["evaluator"]
    assert main(["resume", str(d)]) == 0
    assert main(["resume", str(d), "--n-trials", "4"]) == 0
    assert len(Store.open(d).trials()) == 4


@pytest.mark.slow
def test_the_first_example_of_docs_engine_runs_as_a_script_and_resumes(tmp_path):
    """docs/engine.md's first block, saved as a file and run with `python` as a reader would,
    records a run that `nasforge resume` continues (resume imports the file again: its run
    must not start a second time), in a directory no other page writes."""
    from tests.test_docs import parse_blocks

    block = next(b for b in parse_blocks(ROOT / "docs" / "engine.md") if b.lang == "python")
    f = tmp_path / "search.py"
    f.write_text(block.text)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NASFORGE_THREADS="1")
    run = [sys.executable, "-m", "nasforge.cli"]
    out = subprocess.run(
        [sys.executable, str(f)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    d = tmp_path / "runs" / "engine_digits"
    assert len(Store.open(d).trials()) == 4
    out = subprocess.run(
        [*run, "resume", str(d)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(Store.open(d).trials()) == 4
    for page in ROOT.glob("docs/*.md"):
        if page.name != "engine.md":
            assert "runs/engine_digits" not in page.read_text(), page


def test_set_stopper_null_turns_the_files_stopper_off(tmp_path):
    """`--set stopper=null` turns off the stopper a run file sets (it was silently kept)."""
    f = tmp_path / "exp.py"
    f.write_text(EXPERIMENT.replace('"n_trials": 4}', '"n_trials": 2, "stopper": "asha"}'))
    on, off = tmp_path / "on", tmp_path / "off"
    assert main(["run", str(f), "--dir", str(on)]) == 0
    assert main(["run", str(f), "--dir", str(off), "--set", "stopper=null"]) == 0
    with Store.open(on) as s:
        assert s.config()["multitrial"]["stopper"] is not None
    with Store.open(off) as s:
        assert s.config()["multitrial"]["stopper"] is None


# -- a resume keeps the run's settings (issue 50, item 1) -----------------------------------------
INTERRUPTED = """
import os
from nasforge.space.search_space import Decision, SearchSpace

space = SearchSpace([Decision(n, "value", tuple(range(6))) for n in ("a", "b")])
strategy = "random"
config = {"n_trials": 30, "executor": "inprocess", "progress": "off"}
calls = []


def evaluate(arch, report):
    calls.append(arch)
    if len(calls) == int(os.environ.get("NF_INTERRUPT_AT", "0")):
        raise KeyboardInterrupt  # as Ctrl-C does, after a few trials
    return float(arch["a"] + arch["b"])
"""


def _interrupted(tmp_path: Path, monkeypatch, *flags: str) -> Path:
    """Returns the directory of a run of a file whose n_trials is 30, started with ``flags``
    and interrupted (status 130) after 3 trials."""
    f = tmp_path / "exp.py"
    f.write_text(INTERRUPTED)
    d = tmp_path / "run"
    monkeypatch.setenv("NF_INTERRUPT_AT", "4")
    assert main(["run", str(f), "--dir", str(d), *flags]) == 130
    monkeypatch.delenv("NF_INTERRUPT_AT")
    with Store.open(d) as s:
        assert len(s.trials()) == 4 and s.state() == "interrupted"  # 3 done, 1 cut
    return d


def _done(d: Path) -> int:
    with Store.open(d) as s:
        return sum(t.status == "done" for t in s.trials())


def test_resume_keeps_the_trial_count_given_to_run(tmp_path, monkeypatch):
    """`nasforge run FILE --n-trials 16`, interrupted, then `nasforge resume DIR`: 16 trials,
    not the file's 30 (the resume read the file again and its value replaced the record's)."""
    d = _interrupted(tmp_path, monkeypatch, "--n-trials", "16")
    assert main(["resume", str(d)]) == 0
    assert _done(d) == 16
    with Store.open(d) as s:
        assert s.config()["multitrial"]["n_trials"] == 16


def test_resume_keeps_a_stopper_set_at_run(tmp_path, monkeypatch):
    """A run started with `--set stopper=...asha...` resumes with ASHA (it resumed with
    `stopper: null`, a steered search gone unsteered) and the record keeps it."""
    asha = '{"rule": "asha", "eta": 3, "min_resource": 1}'
    d = _interrupted(tmp_path, monkeypatch, "--n-trials", "6", "--set", f"stopper={asha}")
    with Store.open(d) as s:
        recorded = s.config()["multitrial"]["stopper"]
    assert recorded["rule"] == "asha"
    assert main(["resume", str(d)]) == 0
    with Store.open(d) as s:
        assert s.config()["multitrial"]["stopper"] == recorded
    assert _done(d) == 6


def test_resume_keeps_what_nasforge_set_recorded(tmp_path, monkeypatch):
    """`nasforge set DIR n_trials=8` while the run ran is written into its config; a resume
    keeps it (it went back to the file's 30)."""
    d = _interrupted(tmp_path, monkeypatch)
    with Store.open(d, readonly=False) as s:  # what the engine records for `nasforge set`
        config = s.config()
        s.set_config({**config, "multitrial": {**config["multitrial"], "n_trials": 8}})
    assert main(["resume", str(d)]) == 0
    assert _done(d) == 8


def test_a_resume_flag_overrides_the_record(tmp_path, monkeypatch):
    """Resume flags override what the record holds (`--n-trials`, `--set`), and the record
    then holds the new values."""
    d = _interrupted(tmp_path, monkeypatch, "--n-trials", "16")
    assert main(["resume", str(d), "--n-trials", "5", "--set", "max_duplicates=50"]) == 0
    assert _done(d) == 5
    with Store.open(d) as s:
        section = s.config()["multitrial"]
    assert (section["n_trials"], section["max_duplicates"]) == (5, 50)


@pytest.mark.slow
def test_a_killed_run_resumes_with_its_flags_and_what_set_changed(tmp_path):
    """The issue's case end to end: `nasforge run FILE --n-trials 16` in a process of its
    own, `nasforge set DIR n_trials=12` while it runs, `kill -9`, `nasforge resume DIR`:
    12 trials (it trained to the file's 30)."""
    import signal

    from tests.runwait import wait_for_run

    f = tmp_path / "exp.py"
    f.write_text(INTERRUPTED.replace("    calls.append", "    __import__('time').sleep(0.3)\n"
                                     "    calls.append"))  # fmt: skip
    d = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir", str(d)]
    proc = subprocess.Popen([*cmd, "--n-trials", "16"], env=env, stderr=subprocess.DEVNULL)
    try:
        done = lambda s: sum(t.status == "done" for t in s.trials()) >= 2  # noqa: E731
        assert wait_for_run(d, done, timeout=120)
        assert main(["set", str(d), "n_trials=12"]) == 0
        assert wait_for_run(d, lambda s: s.config()["multitrial"]["n_trials"] == 12)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    assert _done(d) < 12
    assert main(["resume", str(d)]) == 0
    assert _done(d) == 12


# -- --set is typed (issue 50, item 5) ------------------------------------------------------------
@pytest.mark.parametrize(
    "pair, words",
    [
        ("n_trials=true", ["n_trials", "True", "a positive int"]),
        ('time_budget="soon"', ["time_budget", "'soon'", "a number of seconds"]),
        ("n_trials=2.5", ["n_trials", "2.5", "a positive int"]),
    ],
)
def test_a_set_of_the_wrong_type_is_one_line_and_writes_nothing(tmp_path, caplog, pair, words):
    """`--set n_trials=true` (it ran one trial, exit 0) and `--set time_budget='"soon"'` (a
    Python comparison error naming no setting) are one line naming the setting, the value
    and what it takes; exit 2, no run directory."""
    f = tmp_path / "exp.py"
    f.write_text(INTERRUPTED)
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d), "--set", pair]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and len(errors[0].splitlines()) == 1, errors
    assert all(w in errors[0] for w in words), errors[0]
    assert not d.exists()
