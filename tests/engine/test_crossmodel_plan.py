"""The engine decides: a weight-sharing search runs on the super-graph by itself, measures it,
reverts or falls back, records what it did, and computes the same trials as without it."""

from __future__ import annotations

import time

import pytest

from nasforge.engine import Experiment
from nasforge.engine.crossmodel.plan import CrossModelPlan, events
from nasforge.engine.crossmodel.policy import Introspection, detect, options
from nasforge.engine.crossmodel.supergraph import SharedWeightsEvaluator
from nasforge.errors import ConfigError
from nasforge.run.store import Store
from tests.engine.test_crossmodel_supergraph import TinySpos, _data


def _search(tmp_path, name: str, crossmodel, evaluator=None, executor="inprocess"):
    train, val = _data()
    ev = evaluator or SharedWeightsEvaluator(
        train, val, batches_per_trial=2, sharing="file", path=tmp_path / f"{name}.pt"
    )
    exp = Experiment(
        TinySpos(), ev, "random",
        n_trials=6, directory=tmp_path / name, executor=executor, concurrency=1,
        crossmodel=crossmodel, progress="off", save_weights=False,
    )  # fmt: skip
    exp.run()
    with Store.open(tmp_path / name) as store:
        return [(t.arch, t.metrics) for t in store.trials()], events(store)


def test_on_and_off_give_the_same_trials(tmp_path) -> None:
    """The super-graph search records the same architectures and metrics as the file one."""
    off, ev_off = _search(tmp_path, "off", False)
    on, ev_on = _search(tmp_path, "on", True)
    assert [a for a, _ in on] == [a for a, _ in off]
    for (_, m1), (_, m2) in zip(on, off):
        assert m1["accuracy"] == m2["accuracy"]
        assert m1["loss"] == pytest.approx(m2["loss"], rel=1e-6, abs=1e-7)
    assert [e["event"] for e in ev_off] == ["off"]
    kinds = [e["event"] for e in ev_on]
    assert kinds[0] == "applied" and kinds.count("measured") == 6
    assert kinds[-1] in ("kept", "reverted")


def test_same_trials_with_the_process_pool_off(tmp_path) -> None:
    """Off, with one forked process per trial sharing a checkpoint file, the trials agree."""
    off, _ = _search(tmp_path, "pool", False, executor="pool")
    on, _ = _search(tmp_path, "on", True)
    assert [m["accuracy"] for _, m in on] == [m["accuracy"] for _, m in off]


class _SlowSupergraph(SharedWeightsEvaluator):
    """A super-graph made slower than the checkpoint, so that the policy must revert."""

    def evaluate(self, space, arch, report):  # noqa: ANN001, ANN201 - test helper
        if self.sharing == "supergraph":
            time.sleep(0.3)
        return super().evaluate(space, arch, report)


class _Unmergeable(SharedWeightsEvaluator):
    """An evaluator whose super-graph cannot be built."""

    def switch(self, space, sharing):  # noqa: ANN001, ANN201 - test helper
        if sharing == "supergraph":
            raise RuntimeError("no supernet for this space")
        super().switch(space, sharing)


def test_slower_merged_execution_is_reverted(tmp_path) -> None:
    """When the super-graph measures slower, the engine goes back to the checkpoint."""
    train, val = _data()
    ev = _SlowSupergraph(train, val, sharing="dict")
    trials, evs = _search(tmp_path, "slow", True, ev)
    assert evs[-1]["event"] == "reverted" and evs[-1]["speedup"] < 1
    assert ev.sharing == "dict" and all(m is not None for _, m in trials)


def test_a_failed_merge_falls_back(tmp_path) -> None:
    """A super-graph that cannot be built leaves the trials as configured, recorded."""
    train, val = _data()
    ev = _Unmergeable(train, val, sharing="dict")
    trials, evs = _search(tmp_path, "fail", True, ev)
    assert [e["event"] for e in evs] == ["fell_back"] and "no supernet" in evs[0]["detail"]
    assert all(m is not None for _, m in trials)


def test_options_and_policy() -> None:
    """Options name the optimizations; the policy applies none that is off."""
    assert options({"opbatch": False})["opbatch"] is False
    with pytest.raises(ConfigError, match="expected some of"):
        CrossModelPlan({"speed": True})
    on = options(True)
    assert [a.name for a in detect({"shares_weights": True}, on, 2)] == ["supergraph"]
    assert detect({"shares_weights": True}, options(False), 2) == []
    assert [a.name for a in detect({"data_spec": "s"}, on, 2)] == ["shareddata"]
    assert detect({"data_spec": "s"}, on, 1) == []
    intro = Introspection()
    assert intro.choice() == "independent"
    intro.add("independent", 2.0)
    assert intro.choice() == "merged"
    intro.add("merged", 1.0)
    assert intro.choice() == "merged" and intro.speedup() == 2.0


def test_nothing_to_merge_is_recorded(tmp_path) -> None:
    """A search whose trials share nothing runs as configured and records why."""
    from nasforge.space.search_space import Decision, SearchSpace

    space = SearchSpace([Decision("w", "value", (1, 2, 3))])
    exp = Experiment(
        space, lambda arch, report: float(arch["w"]), "grid", directory=tmp_path / "n",
        executor="inprocess", progress="off",
    )  # fmt: skip
    exp.run()
    with Store.open(tmp_path / "n") as store:
        evs = events(store)
    assert [e["event"] for e in evs] == ["none"] and "nothing to merge" in evs[0]["detail"]


def test_the_policy_imports_no_torch() -> None:
    """The deciding logic is pure: importing it loads no torch."""
    import subprocess
    import sys

    code = "import sys, nasforge.engine.crossmodel.policy; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
