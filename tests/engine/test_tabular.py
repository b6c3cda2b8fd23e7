"""Tests of the NAS-Bench-Macro tabular evaluator."""

from pathlib import Path

import pytest

from nasforge.engine import Experiment
from nasforge.engine.tabular import NasBenchMacro
from nasforge.errors import ConfigError

PATH = Path("/work/shared/data/nas-bench-macro_cifar10.json")
needs_data = pytest.mark.skipif(not PATH.exists(), reason=f"{PATH} not present")


@needs_data
def test_space_and_lookup_match_the_table():
    """The space has 3**8 archs and the evaluator returns the table's mean accuracy."""
    bench = NasBenchMacro(PATH)
    space = bench.search_space()
    assert space.size == 6561 == len(bench.table)
    key, acc = bench.best()
    assert key == "22212220" and abs(acc - 93.13) < 0.01
    arch = {f"layer_{i}": int(c) for i, c in enumerate(key)}
    assert bench.evaluator().evaluate(space, arch, lambda *a: None)["accuracy"] == acc


@needs_data
def test_runs_through_an_experiment(tmp_path):
    """The tabular evaluator plugs into a normal experiment with metric 'accuracy'."""
    bench = NasBenchMacro(PATH)
    exp = Experiment(
        bench.search_space(),
        bench.evaluator(),
        "evolution",
        directory=tmp_path / "x",
        n_trials=30,
        executor="inprocess",
        progress="off",
    ).run()
    assert exp.metric == "accuracy"
    assert 80 < exp.best(1)[0].metrics["accuracy"] <= 93.14


def test_missing_or_wrong_file(tmp_path):
    """A missing path or a non-benchmark JSON is a ConfigError naming the file (and, when
    missing, where to download it: nasforge does not ship it)."""
    with pytest.raises(ConfigError, match="not found.*github.com/xiusu/NAS-Bench-Macro"):
        NasBenchMacro(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(ConfigError, match="x.json"):
        NasBenchMacro(tmp_path / "x.json")
