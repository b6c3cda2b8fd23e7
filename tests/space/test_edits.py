"""Edit histories: replay, one id per network, strategies that grow them, and engine resume."""

from __future__ import annotations

import pytest
import torch

import nasforge as nf
from nasforge.engine import Experiment
from nasforge.errors import ArchitectureError, ConfigError
from nasforge.space.edits import EditSpace
from nasforge.spaces.wann import WannSpace
from nasforge.spaces.wann_edits import WannEdits
from nasforge.strategy import EditPolicy, RegularizedEvolution, get_strategy


def _space() -> EditSpace:
    return EditSpace(WannEdits(n_inputs=4, n_outputs=2, per_output=1, seed=0), max_edits=8)


def test_two_histories_that_build_one_network_share_one_id():
    """Adding two connections in either order is one network: one id, different JSON."""
    space = _space()
    a = {"op": "add_connection", "src": "i1", "dst": "o0"}
    b = {"op": "add_connection", "src": "i2", "dst": "o1"}
    first, second = space.validate({"edits": [a, b]}), space.validate({"edits": [b, a]})
    assert first != second
    assert space.id_of(first) == space.id_of(second) == space.arch_id({"edits": [b, a]})
    assert space.id_of(first) != space.id_of(space.validate({"edits": [a]}))


def test_replay_is_deterministic_and_rejects_an_edit_that_does_not_apply():
    """A history replays to the same state; a bad edit names its position."""
    space = _space()
    arch = space.sample(3)
    assert space.replay(arch) == space.replay(space.validate(arch))
    node = {"op": "add_node", "src": "i0", "dst": "o9", "act": "tanh"}
    with pytest.raises(ArchitectureError, match="edit 0"):
        space.validate({"edits": [node]})
    with pytest.raises(ArchitectureError, match="history"):
        space.validate({"width": 3})


def test_freeze_replays_the_history_on_the_base_model():
    """nf.freeze builds the grown network and records its edits."""
    space = WannSpace(n_inputs=4, n_outputs=2, per_output=1)
    arch = {"edits": [{"op": "add_connection", "src": "i1", "dst": "o0"}]}
    conns = space.search_space().replay(arch)["conns"]
    edit = {"op": "add_node", "src": conns[0][0], "dst": conns[0][1], "act": "tanh"}
    model = nf.freeze(space, {"edits": [*arch["edits"], edit]})
    assert [m.value["op"] for m in nf.mutation_history(model)] == ["add_connection", "add_node"]
    assert len(model.state["nodes"]) == 1
    assert model(torch.ones(3, 4)).shape == (3, 2)


def _metric(space: EditSpace, arch: dict) -> float:
    """A landscape that rewards connections into output o1 and hidden neurons."""
    state = space.replay(arch)
    return sum(d == "o1" for _, d in state["conns"]) + 0.5 * len(state["nodes"])


@pytest.mark.parametrize("strategy", [RegularizedEvolution(4, 2, seed=1), EditPolicy(seed=1)])
def test_strategies_over_histories_climb(strategy):
    """Evolution and the policy over edits grow histories one edit at a time and improve."""
    space = _space()
    strategy.setup(space)
    scores = []
    for _ in range(40):
        arch = strategy.ask()
        assert space.validate(arch) == arch
        scores.append(_metric(space, arch))
        strategy.tell(arch, scores[-1])
    assert max(scores[20:]) > max(scores[:4])


def test_listing_strategies_refuse_a_growing_space():
    """grid, tpe and rl cannot list a history's candidates: a ConfigError says what can."""
    for name in ("grid", "tpe", "rl"):
        with pytest.raises(ConfigError, match="edit_rl"):
            get_strategy(name).setup(_space())


def _evaluate(model, report):
    """The number of connections and neurons: no training, so the test stays fast."""
    return float(len(model.state["conns"]) + len(model.state["nodes"]))


@pytest.mark.parametrize("name", ["evolution", "edit_rl"])
def test_a_history_search_resumes_like_an_uninterrupted_one(tmp_path, name):
    """A run of 6 trials resumed to 12 records what one run of 12 does; ids are graphs'."""
    space = WannSpace(n_inputs=4, n_outputs=2, per_output=1, max_edits=10)

    def make(directory, n):
        strategy = get_strategy(name, seed=2)
        return Experiment(space, _evaluate, strategy, directory=directory, n_trials=n,
                          executor="inprocess", progress="off", save_weights=False)  # fmt: skip

    assert len(make(tmp_path / "a", 6).run().trials()) == 6
    resumed = make(tmp_path / "a", 12)
    resumed.resume()
    reference = make(tmp_path / "b", 12).run()
    summary = [(t.arch, t.arch_id, t.status, t.metrics) for t in resumed.trials()]
    assert summary == [(t.arch, t.arch_id, t.status, t.metrics) for t in reference.trials()]
    ss = space.search_space()
    assert all(t.arch_id == ss.id_of(t.arch) for t in resumed.trials())


def test_a_misspelt_edit_strategy_gets_a_did_you_mean():
    """The run-file registry lists edit_rl and suggests it for a near miss."""
    import nasforge.runners  # noqa: F401 - registers the kinds
    from nasforge.run.runner import runner_for_strategy

    assert runner_for_strategy("edit_rl").kind == "multitrial"
    with pytest.raises(ConfigError, match="did you mean 'edit_rl'"):
        runner_for_strategy("edit-rl2")
