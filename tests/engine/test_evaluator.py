"""Tests of the evaluators' up-front checks, metric normalisation and metric-name checks."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.engine import Experiment, Store
from nasforge.engine.classification import ClassificationEvaluator
from nasforge.engine.crossmodel.supergraph import SharedWeightsEvaluator
from nasforge.engine.evaluator import FunctionEvaluator, as_metrics, get_evaluator
from nasforge.engine.tabular import TabularEvaluator
from nasforge.errors import ConfigError
from nasforge.space.search_space import Decision, SearchSpace

ROOT = Path(__file__).resolve().parents[2]


def _returns(model, report):
    for _ in range(2):
        report(0.5)
    return 0.9


def _returns_only_in_nested(model, report):
    def inner():
        return 1.0

    report(inner())


def _bare_return(model, report):
    if model is None:
        return
    report(1.0)


def test_a_returning_function_passes_the_check():
    """A function with `return <value>` passes."""
    FunctionEvaluator(_returns).check()


@pytest.mark.parametrize("fn", [_returns_only_in_nested, _bare_return])
def test_functions_returning_nothing_are_refused(fn):
    """Nested returns and bare `return` do not count as returning the metric."""
    with pytest.raises(ConfigError, match="never returns a value"):
        FunctionEvaluator(fn).check()


def test_wrong_signature_is_refused():
    """A function that cannot take (model, report) is refused with its signature."""
    with pytest.raises(ConfigError, match=r"\(model\).*two arguments"):
        FunctionEvaluator(lambda model: 1.0).check()


def test_get_evaluator():
    """Callables are wrapped, other objects refused."""
    assert isinstance(get_evaluator(_returns), FunctionEvaluator)
    with pytest.raises(ConfigError, match="evaluator must be"):
        get_evaluator(42)


def test_as_metrics():
    """Floats take the metric's name; dicts must carry it; None and strings are refused."""
    assert as_metrics(0.5, "acc") == {"acc": 0.5}
    assert as_metrics({"acc": 1, "params": 3}, "acc") == {"acc": 1.0, "params": 3.0}
    assert as_metrics({"loss": 1}, "acc", require=False) == {"loss": 1.0}
    with pytest.raises(ValueError, match="returned None"):
        as_metrics(None, "acc")
    with pytest.raises(ValueError, match="optimises 'acc'"):
        as_metrics({"loss": 1.0}, "acc")
    with pytest.raises(TypeError, match="expected a float"):
        as_metrics("high", "acc")


class _Net(nf.ModelSpace):
    """Eight widths of one linear layer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, nf.choice([2, 3, 4, 5, 6, 7, 8, 9], label="w"))


def _table_space():
    space = SearchSpace([Decision("x", "value", (0, 1))])
    table = {"0": {"acc": 0.5, "flops": 1.0}, "1": {"acc": 0.7, "flops": 2.0, "extra": 1.0}}
    return space, TabularEvaluator(table, lambda a: str(a["x"]))


def _shared_weights():
    data = (torch.randn(8, 3), torch.randint(2, (8,)))
    return _Net(), SharedWeightsEvaluator(data)


@pytest.mark.parametrize(
    ("make", "kwargs", "match"),
    [
        (lambda: (_Net(), ClassificationEvaluator()), {"metric": "acuracy"},
         r"^ClassificationEvaluator returns no metric 'acuracy' \(named by metric\); it returns "
         r"accuracy, test_accuracy, params, train_seconds; did you mean 'accuracy'"),
        (lambda: (_Net(), ClassificationEvaluator()), {"constraints": ["parms <= 1e5"]},
         r"^ClassificationEvaluator returns no metric 'parms' \(named by constraints\).*did "
         r"you mean 'params'\? fix constraints \(nothing was run\)$"),
        (lambda: (_Net(), ClassificationEvaluator()), {"second_objective": ("param", "min")},
         r"no metric 'param' \(named by second_objective\).*did you mean 'params'"),
        (_table_space, {"metric": "accu"},
         r"TabularEvaluator returns no metric 'accu' .* it returns acc, flops; did you mean"),
        (_shared_weights, {"metric": "los", "mode": "min"},
         r"returns accuracy, loss; did you mean"),
    ],
)  # fmt: skip
def test_a_metric_the_evaluator_does_not_declare_is_one_config_error_first(
    tmp_path, make, kwargs, match
):
    """A misspelt metric, constraint or second objective of an evaluator that declares its
    metrics is one line of ConfigError with the closest name, before any record exists."""
    space, evaluator = make()
    with pytest.raises(ConfigError, match=match) as info:
        Experiment(space, evaluator, "random", n_trials=3, directory=tmp_path / "x", **kwargs)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "x").exists()


def test_a_declared_metric_passes_and_an_undeclaring_evaluator_is_not_checked_up_front():
    """Declared names pass; a function evaluator declares nothing, so any name passes."""
    declared = Experiment(
        _Net(), ClassificationEvaluator(), "random", n_trials=1, metric="test_accuracy",
        constraints=["params <= 1e5"], second_objective=("train_seconds", "min"),
    )  # fmt: skip
    names = declared.evaluator.metric_names
    assert names is not None and {"test_accuracy", "params", "train_seconds"} <= set(names)
    assert declared.settings.metric == "test_accuracy"
    assert declared.settings.constraints == {"params": ["<=", 1e5]}
    assert declared.second_objective == ("train_seconds", "min")
    undeclared = Experiment(_Net(), _misnamed, "random", n_trials=1, metric="anything")
    assert undeclared.evaluator.metric_names is None  # nothing to check the name against
    assert undeclared.settings.metric == "anything"


def _misnamed(model, report):
    """Returns accuracy and params; the first trial to start returns at once, any other one
    only after 30 s (unless the engine kills it first)."""
    n = sum(p.numel() for p in model.parameters())
    try:
        os.close(os.open(os.environ["NF_TEST_MARKER"], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        time.sleep(30)
    return {"accuracy": n / 100, "params": float(n)}


@pytest.mark.parametrize("executor", ["inprocess", "pool"])
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": "acuracy"},
         r"^trial 1 returned metrics \['accuracy', 'params'\] but no 'acuracy' \(named by "
         r"metric\); did you mean 'accuracy'\? the run stopped at this first such trial"),
        ({"constraints": ["parms <= 1e5"]}, r"no 'parms' \(named by constraints\); did you mean"),
    ],
)  # fmt: skip
def test_the_first_trial_without_a_named_metric_stops_the_whole_run(
    tmp_path, monkeypatch, executor, kwargs, match
):
    """An evaluator that declares nothing and lacks a named metric stops a new run at its
    first finished trial: nothing more is launched, the trial in flight is killed, and with
    no trial finished the record is not kept, so the fixed script runs again in the folder."""
    monkeypatch.setenv("NF_TEST_MARKER", str(tmp_path / "first"))
    kwargs.setdefault("metric", "accuracy")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("the user's own file")
    exp = Experiment(_Net(), _misnamed, "random", n_trials=6, directory=tmp_path / "x",
                     executor=executor, concurrency=2, progress="off", **kwargs)  # fmt: skip
    with pytest.raises(ConfigError, match=match) as info:
        exp.run()
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith(
        f"no trial had finished, so the run was not kept: {tmp_path / 'x'} is as it was, and "
        "the same command runs again there once fixed"
    )
    assert mp.active_children() == []  # the pool's second trial was killed, not waited for
    assert sorted(os.listdir(tmp_path / "x")) == ["notes.txt"]  # the user's file is kept
    fixed = Experiment(_Net(), _named, "random", n_trials=2, directory=tmp_path / "x",
                       executor="inprocess", progress="off", metric="accuracy")  # fmt: skip
    assert fixed.run().best()[0].metrics == {"accuracy": 0.5, "params": 1.0}


def _named(model, report):
    """Returns accuracy and params at once."""
    return {"accuracy": 0.5, "params": 1.0}


def test_a_resume_that_names_a_missing_metric_keeps_the_record(tmp_path, monkeypatch):
    """A resume whose metric no trial reports stops at its first trial, but the record it
    continued (with its finished trials) is kept, failed with the one-line message."""
    d = tmp_path / "x"
    Experiment(_Net(), _named, "random", n_trials=1, directory=d, executor="inprocess",
               progress="off", metric="accuracy").run()  # fmt: skip
    monkeypatch.setenv("NF_TEST_MARKER", str(tmp_path / "first"))
    again = Experiment(_Net(), _misnamed, "random", n_trials=3, directory=d,
                       executor="inprocess", progress="off", metric="acuracy")  # fmt: skip
    with pytest.raises(ConfigError, match="but no 'acuracy'") as info:
        again.resume()
    assert "was not kept" not in str(info.value)
    with Store.open(d) as store:
        assert store.state() == "failed" and store.get_meta("error") == str(info.value)
        statuses = [t.status for t in store.trials()]
    assert statuses[0] == "done" and statuses[-1] == "failed"  # (cached duplicates between)


RUN_FILE = """
import torch.nn as nn
import nasforge as nf

class Net(nf.ModelSpace):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, nf.choice([2, 4, 8], label="w"))

def evaluate(model, report):
    return {"accuracy": 0.5, "params": 3.0}

space = Net()
strategy = "random"
config = {"metric": "acuracy", "executor": "inprocess", "progress": "off", "n_trials": 3}
"""

RUN_YAML = """
space: nasforge.spaces:DigitsCNN
evaluator: {type: classification, epochs: 1}
strategy: random
n_trials: 4
metric: acuracy
"""


@pytest.mark.parametrize(("name", "text"), [("exp.py", RUN_FILE), ("exp.yaml", RUN_YAML)])
def test_the_command_line_exits_non_zero_with_the_one_line_message(tmp_path, name, text):
    """`nasforge run` with a misspelt metric exits 2 with one error line and leaves no record:
    before any is made for a declaring evaluator, removed after the first trial for a
    function."""
    f = tmp_path / name
    f.write_text(text)
    d = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir", str(d)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=tmp_path, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "did you mean 'accuracy'" in errors[0], proc.stderr
    assert not d.exists()  # nothing blocks `nasforge run` there once the metric is fixed


def test_an_evaluator_declaring_metric_types_fails_on_a_text_metric_before_training():
    """`metric_names` may map each name to its type; a run that optimises (or constrains) a
    metric declared as text fails at check time, before any training, with one line."""
    from nasforge.engine.evaluator import BaseEvaluator, check_metric_names
    from nasforge.errors import ConfigError

    class Typed(BaseEvaluator):
        metric_names = {"accuracy": float, "label": str}

        def evaluate(self, space, arch, report):  # never reached
            raise AssertionError("trained")

    check_metric_names(Typed(), {"accuracy": "metric"})
    with pytest.raises(ConfigError, match="'label' is declared str") as info:
        check_metric_names(Typed(), {"label": "metric"})
    assert "\n" not in str(info.value)


def _too_many(arch, report):
    """Returns what the case asks: too many metrics, a too long name, or a report over the
    cap; the last case is within both caps."""
    if arch["case"] == "many":
        return {"accuracy": 0.5, **{f"m{i}": 0.0 for i in range(200_000)}}
    if arch["case"] == "long":
        return {"accuracy": 0.5, "x" * 201: 1.0}
    if arch["case"] == "report":
        report({f"m{i}": 0.0 for i in range(1001)})
    return {"accuracy": 0.5, **{f"m{i}": 0.0 for i in range(999)}}


def test_a_trial_over_the_metric_caps_fails_naming_the_cap(tmp_path):
    """A result of 200,001 metrics, a metric name of 201 characters and a report of 1,001
    metrics each fail their trial with an error naming the cap; 1,000 metrics are kept."""
    from nasforge.engine.evaluator import MAX_METRIC_NAME, MAX_METRICS

    assert (MAX_METRICS, MAX_METRIC_NAME) == (1000, 200)  # as docs/engine.md states
    space = SearchSpace([Decision("case", "value", ("many", "long", "report", "fine"))])
    exp = Experiment(space, _too_many, "grid", directory=tmp_path / "x", executor="inprocess",
                     progress="off", metric="accuracy")  # fmt: skip
    exp.run()
    with Store.open(tmp_path / "x") as store:
        trials = {t.arch["case"]: t for t in store.trials()}
    for case, cap in (("many", "MAX_METRICS"), ("long", "MAX_METRIC_NAME"),
                      ("report", "MAX_METRICS")):  # fmt: skip
        assert trials[case].status == "failed", case
        assert cap in trials[case].error.strip().splitlines()[-1], trials[case].error[-300:]
    assert trials["fine"].status == "done" and len(trials["fine"].metrics) == 1000
