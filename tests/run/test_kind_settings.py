"""Each kind's settings as one dataclass, and each kind's flags through the runner registry:
the settings round-trip through the record (what a resume reads), keywords of the old
signatures still work (with a DeprecationWarning where they are deprecated), and the flags of
``nasforge run``/``resume`` beyond the shared ones are the kinds' own."""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import pytest

from nasforge import runners
from nasforge.cli import build_parser
from nasforge.engine.experiment import Experiment
from nasforge.engine.settings import ExperimentSettings
from nasforge.errors import ConfigError
from nasforge.run.cli import add_run_commands
from nasforge.run.files import rebuild_runner
from nasforge.run.runner import BaseRunner, get_runner
from nasforge.run.settings import kind_settings
from nasforge.run.store import Store
from nasforge.space.search_space import SearchSpace

SPACE = SearchSpace.from_spec({"x": [1, 2, 3, 4]})


def score(arch: dict, report: object) -> float:
    """A module-level evaluator, so that the record can rebuild it."""
    return float(arch["x"])


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


# -- flags ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "resume"])
def test_multitrial_flags_come_from_its_runner(command: str) -> None:
    """`--n-trials`, `--time-budget`, `--executor` and `--concurrency` are the multitrial
    kind's (its `add_arguments`), in a group named after it; only `--threads` and `--set` are
    shared."""
    p = argparse.ArgumentParser()
    dests = add_run_commands(p, [])
    assert dests == [] and _options(p) == {"-h", "--help", "--threads", "--set"}
    mine = argparse.ArgumentParser(add_help=False)
    Experiment.add_arguments(mine)
    assert _options(mine) == {"--n-trials", "--time-budget", "--executor", "--concurrency"}
    parsed = _subparser(command)
    assert _options(mine) <= _options(parsed)
    group = next(g for g in parsed._action_groups if g.title == "multitrial runs")
    assert {s for a in group._group_actions for s in a.option_strings} == _options(mine)


@pytest.mark.parametrize("kind", ["oneshot", "dartsformer", "ofa", "ofa-deploy", "pipeline"])
def test_other_kinds_add_no_flag_of_their_own(kind: str) -> None:
    """The other built-in kinds add no flag: `BaseRunner.add_arguments` adds none, so every
    flag of `run` but the shared ones comes from a kind that registered it."""
    assert kind not in runners.WITH_FLAGS
    runners.load(kind)
    cls = get_runner(kind)
    assert cls.add_arguments.__func__ is BaseRunner.add_arguments.__func__  # type: ignore[attr-defined]
    p = argparse.ArgumentParser(add_help=False)
    assert add_run_commands(p, [cls]) == []


def test_a_kind_adds_its_flags_through_the_registry() -> None:
    """A registered kind's flag is parsed and handed to its runner as an override; one that
    takes another kind's flag is refused with a message naming it."""

    class Steps(BaseRunner):
        kind = "steps-test"

        @classmethod
        def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
            parser.add_argument("--steps", type=int, help="steps")

        @classmethod
        def from_section(cls, settings, *, base=None, **overrides):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def section(self) -> dict:
            return {}

        def _execute(self, store: Store, resume: bool) -> None:
            raise NotImplementedError

    p = argparse.ArgumentParser()
    assert add_run_commands(p, [Experiment, Steps]) == [
        "n_trials",
        "time_budget",
        "executor",
        "concurrency",
        "steps",
    ]
    from nasforge.run.cli import _overrides

    got = _overrides(p.parse_args(["--steps", "3", "--set", "steps=4", "--n-trials", "2"]))
    assert got["n_trials"] == 2 and got["steps"] == 4 and got["threads"] is None

    class Clash(Steps):
        kind = "clash-test"

    with pytest.raises(ConfigError, match="clash-test.*--steps"):
        add_run_commands(argparse.ArgumentParser(), [Steps, Clash])


def test_building_the_parser_imports_no_torch_family() -> None:
    """The built-in kinds that add flags import no torch, so `nasforge --help` stays quick
    (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = "import sys, nasforge.cli as c; c.build_parser(); print('torch' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": ""}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_the_reading_commands_import_no_runner() -> None:
    """`nasforge plot/status/export` build a parser without the kinds' flags, so they import
    no runner module nor the once-for-all package's modules (part of `plot_s_10k`); `run`
    and `resume` still take the kinds' flags (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, nasforge.cli as c\n"
        "c.main(['status', '/nonexistent/run'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('nasforge.engine') "
        "or m in ('nasforge.ofa.latency', 'nasforge.ofa.spaces')))\n"
        "print(c.build_parser().parse_args(['run', 'f.py', '--n-trials', '3']).n_trials)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": ""}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["[]", "3"]


# -- the multitrial kind: ExperimentSettings -----------------------------------------------------
def test_experiment_keywords_and_settings_build_the_same_experiment() -> None:
    """Keywords (the documented API, no warning) and an ExperimentSettings are one thing;
    keywords beside `settings` replace its fields; an unknown keyword is a ConfigError that
    suggests the closest field."""
    base = ExperimentSettings(n_trials=3, executor="inprocess", progress="off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = Experiment(SPACE, score, "random", n_trials=3, executor="inprocess", progress="off")
        b = Experiment(SPACE, score, "random", base)
        c = Experiment(SPACE, score, "random", base, n_trials=5)
    assert a.settings == b.settings and a.section() == b.section()
    assert c.n_trials == 5 and c.settings == dataclasses.replace(b.settings, n_trials=5)
    assert ExperimentSettings().keep_checkpoints == 5  # the one list of defaults
    with pytest.raises(ConfigError, match="n_trails.*did you mean 'n_trials'"):
        Experiment(SPACE, score, "random", n_trails=3)
    with pytest.raises(ConfigError, match="keep_checkpoints"):
        Experiment(SPACE, score, "random", n_trials=3, keep_checkpoints=0)


def test_experiment_settings_round_trip_through_the_record(tmp_path: Path) -> None:
    """What a resume rebuilds from the record has the settings the run was started with."""
    s = ExperimentSettings(
        n_trials=2, time_budget=100.0, mode="min", executor="inprocess", concurrency=1,
        trial_timeout=30.0, retrain_duplicates=True, save_weights=False, keep_checkpoints=2,
        max_duplicates=7, progress="off", threads=1, crossmodel=False,
    )  # fmt: skip
    exp = Experiment(SPACE, score, "random", s, directory=tmp_path / "run").run()
    with Store.open(tmp_path / "run") as store:
        config = store.config()
    # a plain SearchSpace object is not recorded by reference: give it, as a resume from
    # Python does; every setting comes from the record's section and objective
    back = Experiment.from_record({**config, "space": SPACE}, tmp_path / "run")
    assert isinstance(back, Experiment)
    recorded = {f.name for f in dataclasses.fields(s)} - {"progress", "callbacks"}
    for name in recorded:
        assert getattr(back.settings, name) == getattr(exp.settings, name), name
    assert back.settings.metric == "default"  # the evaluator's, resolved and recorded


# -- the pipeline kind: PipelineSettings ---------------------------------------------------------
def test_pipeline_settings_round_trip_and_old_keywords_warn(tmp_path: Path) -> None:
    """PipelineTraining takes a PipelineSettings; its record holds the same section as
    before, from which a resume builds equal settings; the old keywords still work and warn;
    an unknown setting is a ConfigError."""
    from nasforge.parallel.runner import PipelineSettings, PipelineTraining

    s = PipelineSettings(steps=3, lr=0.01, seed=2, n_eval=1, mirror=True, policy="csp")
    kw = {"n_blocks": 2, "n_candidates": 2, "hidden": 8}
    run = PipelineTraining(settings=s, space_kwargs=kw, directory=tmp_path / "p")
    assert list(run.section()) == ["steps", "pipeline", "policy", "batch_size", "lr",
                                   "momentum", "seed", "sampler", "cache_subnets", "timeout_s",
                                   "memory_budget", "mirror", "n_eval"]  # fmt: skip
    Store.create(tmp_path / "p", run.config()).close()  # the record a resume reads
    back = rebuild_runner(tmp_path / "p")
    assert isinstance(back, PipelineTraining) and back.settings == s
    with pytest.warns(DeprecationWarning, match=r"PipelineTraining\(steps=\.\.\., lr=\.\.\.\)"):
        old = PipelineTraining(space_kwargs=kw, steps=3, lr=0.01)
    assert old.settings == PipelineSettings(steps=3, lr=0.01)
    with pytest.raises(ConfigError, match="stpes"):
        PipelineTraining(space_kwargs=kw, stpes=3)
    with pytest.raises(ConfigError, match="n_eval"):
        PipelineTraining(settings=PipelineSettings(n_eval=-1), space_kwargs=kw)


def test_kind_settings_takes_an_instance_a_mapping_or_nothing() -> None:
    """The one helper every kind builds its settings with."""
    got = kind_settings(ExperimentSettings, {"n_trials": 4}, {}, "x")
    assert got == ExperimentSettings(n_trials=4)
    assert kind_settings(ExperimentSettings, None, {}, "x") == ExperimentSettings()
    with pytest.raises(ConfigError, match="must be a ExperimentSettings"):
        kind_settings(ExperimentSettings, 3, {}, "x")  # type: ignore[arg-type]
