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
#: a multi-trial run file that names no kind: two quick in-process trials
TINY_RUN_FILE = (
    "from nasforge.space.search_space import Decision, SearchSpace\n"
    "space = SearchSpace([Decision('x', 'value', (0, 1, 2))])\n"
    "strategy = 'random'\n"
    "config = {'n_trials': 2, 'executor': 'inprocess', 'progress': 'off'}\n"
    "def evaluate(arch, report):\n    return float(arch['x'])\n"
)


def score(arch: dict, report: object) -> float:
    """A module-level evaluator, so that the record can rebuild it."""
    return float(arch["x"])


def _subparser(name: str) -> argparse.ArgumentParser:
    """Returns the subparser of `nasforge NAME` with no run named (as `--help` shows it)."""
    parser = build_parser([name])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _options(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


# -- flags ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "resume"])
def test_multitrial_flags_come_from_its_runner(command: str) -> None:
    """`--n-trials`, `--time-budget`, `--executor` and `--concurrency` are the multitrial
    kind's (its `add_arguments`), in a group named after it; only `--threads`, `--nproc` and
    `--set` are shared."""
    p = argparse.ArgumentParser()
    dests = add_run_commands(p, [])
    assert dests == [] and _options(p) == {"-h", "--help", "--threads", "--nproc", "--set"}
    mine = argparse.ArgumentParser(add_help=False)
    Experiment.add_arguments(mine)
    assert _options(mine) == {"--n-trials", "--time-budget", "--executor", "--concurrency"}
    parsed = _subparser(command)
    assert _options(mine) <= _options(parsed)
    group = next(g for g in parsed._action_groups if g.title == "multitrial runs")
    assert {s for a in group._group_actions for s in a.option_strings} == _options(mine)


#: The flags each built-in kind adds through its runner's add_arguments.
KIND_FLAGS = {
    "multitrial": {"--n-trials", "--time-budget", "--executor", "--concurrency"},
    "oneshot": {"--model-parallel", "--replicas"},
    "dartsformer": {"--max-steps", "--time-budget-s"},
    "ofa": {"--full-epochs", "--shrink-epochs"},
    "ofa-deploy": {"--population", "--generations"},
    "pipeline": set(),
}


@pytest.mark.parametrize("kind", sorted(KIND_FLAGS))
def test_each_kind_adds_its_own_flags(kind: str) -> None:
    """Each built-in kind's runner adds its own flags (none for the pipeline: BaseRunner's
    hook adds none); `nasforge run` and `resume` list them in a group named after the kind."""
    cls = get_runner(kind)  # the registry loads the kind when it is read for it
    mine = argparse.ArgumentParser(add_help=False)
    cls.add_arguments(mine)
    assert _options(mine) == KIND_FLAGS[kind]
    if not KIND_FLAGS[kind]:
        assert cls.add_arguments.__func__ is BaseRunner.add_arguments.__func__  # type: ignore[attr-defined]
    for command in ("run", "resume"):
        parser = build_parser([command])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        group = [g for g in sub.choices[command]._action_groups if g.title == f"{kind} runs"]
        assert {s for g in group for a in g._group_actions for s in a.option_strings} == (
            KIND_FLAGS[kind]
        )


def test_a_kind_flag_overrides_its_setting(tmp_path: Path) -> None:
    """A kind's flag reaches its runner as an override of the run file's setting: `nasforge
    run ofa.yaml --full-epochs 1` builds the run with one full epoch."""
    from nasforge.run.cli import _overrides
    from nasforge.run.files import load_run_file

    f = tmp_path / "ofa.yaml"
    f.write_text("kind: ofa\nspace: compofa\nfull_epochs: 2\nshrink_epochs: 5\n")
    args = build_parser(["run"]).parse_args(["run", str(f), "--full-epochs", "1"])
    given = _overrides(args)
    assert given["full_epochs"] == 1 and given["max_steps"] is None
    run = load_run_file(f, directory=str(tmp_path / "r"), **given)
    assert run.settings.full_epochs == 1 and run.settings.shrink_epochs == 5  # type: ignore[attr-defined]


def test_run_takes_its_file_s_kind_flags_only(tmp_path: Path, capsys) -> None:
    """`nasforge run FILE --help` lists FILE's kind's flags and no other kind's; another
    kind's flag is argparse's usual error (status 2); a kind's flag may come before FILE."""
    from nasforge.cli import main

    f = tmp_path / "exp.py"
    f.write_text(TINY_RUN_FILE)
    with pytest.raises(SystemExit) as exc:
        main(["run", str(f), "--help"])
    assert exc.value.code == 0
    shown = capsys.readouterr().out
    assert "multitrial runs:" in shown and "--n-trials" in shown
    assert not any(f"{kind} runs:" in shown for kind in KIND_FLAGS if kind != "multitrial")
    with pytest.raises(SystemExit) as exc:
        main(["run", str(f), "--dir", str(tmp_path / "a"), "--max-steps", "3"])
    assert (
        exc.value.code == 2 and "unrecognized arguments: --max-steps 3" in capsys.readouterr().err
    )
    assert not (tmp_path / "a").exists()
    assert main(["run", "--n-trials", "1", str(f), "--dir", str(tmp_path / "b")]) == 0
    with Store.open(tmp_path / "b") as store:
        assert store.config()["multitrial"]["n_trials"] == 1
    with pytest.raises(SystemExit) as exc:  # resume: the recorded kind's flags only
        main(["resume", str(tmp_path / "b"), "--full-epochs", "1"])
    assert exc.value.code == 2


def test_the_registry_is_complete_once_nasforge_runners_is_imported() -> None:
    """In a fresh interpreter, importing nasforge.runners is all it takes: reading the
    registry loads a built-in kind that nothing imported yet (get_runner, and
    runner_for_strategy, which compares every kind's names)."""
    import subprocess
    import sys

    code = (
        "import nasforge.runners\n"
        "from nasforge.run.runner import get_runner, list_runners, runner_for_strategy\n"
        "assert list_runners() == [], list_runners()\n"
        "assert get_runner('ofa-deploy').kind == 'ofa-deploy'\n"
        "assert runner_for_strategy('evolution').kind == 'multitrial'\n"
        "assert set(list_runners()) >= set(nasforge.runners.BUILTIN), list_runners()\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": ""}, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]


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
    """`nasforge plot/status/export` parse with the first phase's parser, without the kinds'
    flags, so they import no runner module nor the once-for-all package's modules (part of
    `plot_s_10k`); `run` and `resume` still take the kinds' flags (checked in a fresh
    interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, nasforge.cli as c\n"
        "c.main(['status', '/nonexistent/run'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('nasforge.engine') "
        "or m in ('nasforge.ofa.latency', 'nasforge.ofa.spaces')))\n"
        "argv = ['run', 'f.py', '--n-trials', '3']\n"
        "print(c.build_parser(argv).parse_args(argv).n_trials)"
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
                                   "memory_budget", "mirror", "n_eval",
                                   "checkpoint_every"]  # fmt: skip
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


def _settings_class(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


@pytest.mark.parametrize(
    "cls, name, bad, words",
    [
        ("nasforge.engine.settings:ExperimentSettings", "n_trials", True, "a positive int"),
        ("nasforge.engine.settings:ExperimentSettings", "time_budget", "soon", "a number"),
        ("nasforge.engine.settings:ExperimentSettings", "concurrency", "2", "an int"),
        ("nasforge.parallel.runner:PipelineSettings", "n_eval", True, "an int"),
        ("nasforge.oneshot.dartsformer.runner:Seq2SeqSettings", "time_budget_s", "1", "a number"),
        ("nasforge.ofa.runner:OFARunSettings", "full_epochs", 1.5, "an int"),
        ("nasforge.ofa.deploy_runner:OFADeploySettings", "mutate_prob", None, "a number"),
        ("nasforge.oneshot.cmp:CMPSettings", "defer_arch_grads", 1, "true or false"),
    ],
)
def test_every_kind_s_settings_are_typed(cls: str, name: str, bad: object, words: str) -> None:
    """A field written int, float or bool takes only that (a bool is no int, a string no
    number, None only where the field allows it), whatever builds the settings: one line
    naming the setting, the value and what it takes (the class's own check speaks first)."""
    settings = _settings_class(cls)
    with pytest.raises(ConfigError) as exc:
        kind_settings(settings, {name: bad}, {}, "a run")
    assert f"{name} must be {words}" in str(exc.value)
    assert repr(bad) in str(exc.value) and len(str(exc.value).splitlines()) == 1


def test_typed_settings_take_numbers_of_any_numeric_type() -> None:
    """A float field takes an int, an int field a NumPy int, and None where it is allowed."""
    import numpy as np

    from nasforge.parallel.runner import PipelineSettings

    got = kind_settings(PipelineSettings, {"lr": 1, "steps": np.int64(3)}, {}, "x")
    assert got.lr == 1 and got.steps == 3
    assert kind_settings(ExperimentSettings, {"n_trials": None}, {}, "x").n_trials is None


# -- dartsformer, ofa, ofa-deploy: the record's section as before ------------------------------
def _record_and_rebuild(run: BaseRunner, directory: Path) -> BaseRunner:
    """Returns the runner a resume rebuilds from the record ``run`` starts in ``directory``."""
    Store.create(directory, run.config()).close()
    return rebuild_runner(directory)


#: A dartsformer section as nasforge wrote it before the kind took Seq2SeqSettings.
DARTSFORMER_SECTION = {
    "data": "toy-ende", "pairs": 60, "test": 12, "vocab": 300,
    "space_args": {"d": 24, "heads": 4}, "algorithm": "nasb", "max_steps": 12,
    "time_budget_s": None, "batch_tokens": 300, "search": {"warmup": 4}, "log_every": 3,
    "checkpoint_every": 4, "seed": 1, "retrain": None, "device": "cpu", "threads": 1,
    "progress": "off",
}  # fmt: skip


def test_dartsformer_settings_keep_the_section_and_old_keywords_warn(tmp_path: Path) -> None:
    """Seq2SeqSearch takes a Seq2SeqSettings; its record's section is the one written before
    (same keys, same order; `space` recorded as `space_args`), and a record written before
    rebuilds the same settings; the old keywords work and warn; an unknown one is refused."""
    from nasforge.oneshot.dartsformer.runner import Seq2SeqSearch, Seq2SeqSettings

    s = Seq2SeqSettings(pairs=60, test=12, vocab=300, space={"d": 24, "heads": 4},
                        algorithm="nasb", max_steps=12, batch_tokens=300,
                        search={"warmup": 4}, log_every=3, checkpoint_every=4, seed=1,
                        threads=1, progress="off")  # fmt: skip
    run = Seq2SeqSearch("toy-ende", s, directory=tmp_path / "new")
    assert run.section() == DARTSFORMER_SECTION
    assert list(run.section()) == list(DARTSFORMER_SECTION)
    config = {**run.config(), "dartsformer": DARTSFORMER_SECTION}  # a record written before
    Store.create(tmp_path / "old", config).close()
    back = rebuild_runner(tmp_path / "old")
    assert isinstance(back, Seq2SeqSearch) and back.settings == s
    with pytest.warns(DeprecationWarning, match=r"Seq2SeqSearch\(max_steps=\.\.\."):
        old = Seq2SeqSearch("toy-ende", max_steps=12, pairs=60, test=12)
    assert old.settings == Seq2SeqSettings(max_steps=12, pairs=60, test=12)
    with pytest.raises(ConfigError, match="max_stpes.*did you mean 'max_steps'"):
        Seq2SeqSearch("toy-ende", {"max_stpes": 3})


def test_ofa_settings_build_the_recorded_spec_as_before(tmp_path: Path) -> None:
    """OFARun takes an OFARunSettings (what a user sets) and records, as before, what they
    build (spec, training config, plan, run, search): a resume rebuilds the same section; the
    old keywords build the same run and warn."""
    from nasforge.ofa.runner import OFARun, OFARunSettings

    s = OFARunSettings(full_epochs=1, shrink_epochs=3, batch_size=16, lr=0.05, seed=2,
                       threads=1, probes=False, search={"targets": [2.0]})  # fmt: skip
    run = OFARun("compofa", s, directory=tmp_path / "new")
    section = run.section()
    assert list(section) == ["spec", "train", "plan", "run", "search"]
    assert section["run"] == {"data": "mnist", "seed": 2, "threads": 1, "probes": False}
    assert section["train"]["batch_size"] == 16 and section["search"]["targets"] == [2.0]
    back = _record_and_rebuild(run, tmp_path / "new")
    assert isinstance(back, OFARun) and back.section() == section
    assert back.settings is None  # the record keeps what the settings built
    with pytest.warns(DeprecationWarning, match=r"OFARun\(full_epochs=\.\.\."):
        old = OFARun("compofa", full_epochs=1, shrink_epochs=3, batch_size=16, lr=0.05,
                     seed=2, threads=1, probes=False, search={"targets": [2.0]})  # fmt: skip
    assert old.section() == section


def test_ofa_deploy_settings_keep_the_section_and_old_keywords_warn(tmp_path: Path) -> None:
    """OFADeploy takes an OFADeploySettings beside its tables, predictor and targets; the
    section keeps its keys and order, and a record rebuilds the same search; old keywords
    warn."""
    from nasforge.ofa.deploy_runner import OFADeploy, OFADeploySettings
    from tests.ofa._synthetic import write_ofa_predictor, write_ofa_tables

    write_ofa_tables(tmp_path / "tables", width=1.2, resolutions=(160,))
    write_ofa_predictor(tmp_path / "pred.pth")
    args = (str(tmp_path / "tables" / "160_lookup_table.yaml"), str(tmp_path / "pred.pth"), [20])
    s = OFADeploySettings(population=12, generations=2, seed=3, threads=1)
    run = OFADeploy(*args, s, directory=tmp_path / "run")
    assert list(run.section()) == [
        "latency_table", "predictor", "supernet", "targets", "population", "generations",
        "parent_ratio", "mutation_ratio", "mutate_prob", "seed", "threads",
    ]  # fmt: skip
    back = _record_and_rebuild(run, tmp_path / "run")
    assert isinstance(back, OFADeploy) and back.section() == run.section()
    assert back.settings == s
    with pytest.warns(DeprecationWarning, match=r"OFADeploy\(population=\.\.\."):
        old = OFADeploy(*args, population=12, generations=2, seed=3, threads=1)
    assert old.section() == {**run.section()}


def test_resume_loads_only_the_kind_that_wrote_the_run(tmp_path: Path) -> None:
    """`nasforge resume DIR` takes the flags of the run's own kind and imports no other
    family (a multi-trial run's resume imports no one-shot runner, hence no torch); a
    directory that holds no run falls back to every kind's flags."""
    import subprocess
    import sys

    run = tmp_path / "run"
    Experiment(SPACE, score, "random", n_trials=2, executor="inprocess", progress="off",
               directory=str(run)).run()  # fmt: skip
    code = (
        "import sys, nasforge.cli as c\n"
        f"p = c.build_parser(['resume', {str(run)!r}])\n"
        f"print(p.parse_args(['resume', {str(run)!r}, '--n-trials', '4']).n_trials)\n"
        "print('nasforge.oneshot.runner' in sys.modules, 'torch' in sys.modules)\n"
        f"p = c.build_parser(['resume', {str(tmp_path / 'none')!r}])\n"
        "print('nasforge.oneshot.runner' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": ""}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["4", "False False", "True"]


def test_resuming_a_run_file_loads_no_other_family(tmp_path: Path) -> None:
    """`nasforge resume` of a multi-trial run started from a run file that names no kind
    rebuilds it with the recorded kind first, so it imports no one-shot runner (nor torch);
    before, every family was loaded to match the strategy's name (3.4 s for a 10k-trial
    resume against 1.1 s)."""
    import subprocess
    import sys

    from nasforge.cli import main

    f = tmp_path / "exp.py"
    f.write_text(TINY_RUN_FILE)
    run = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(run)]) == 0
    code = (
        "import sys, nasforge.cli as c\n"
        f"code = c.main(['resume', {str(run)!r}, '--n-trials', '3'])\n"
        "print(code, 'nasforge.oneshot.runner' in sys.modules, 'torch' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "PATH": ""}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "0 False False"
    with Store.open(run) as store:
        assert len(store.trials()) == 5  # --n-trials on resume adds trials
