"""Hard budgets in every one-shot search: no proposal over the budget (sampling searches), a
resource penalty and a projected pick (gradient searches), and a pick always within it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

import nasforge as nf
from nasforge.cli import main
from nasforge.engine import Store
from nasforge.errors import ConfigError
from nasforge.oneshot import op_latency, proxyless, search
from nasforge.oneshot.budget import check_budget, excess, within
from nasforge.oneshot.budgeted import Budgeted
from nasforge.oneshot.search import ALGORITHMS
from nasforge.proxies.size import arch_size
from nasforge.run.files import load_run_file

from ._spaces import ToySpace

#: the settings that make each algorithm's search small (selection by loss: no reference)
FAST: dict[str, dict] = {
    "darts": {},
    "nasb": {"warmup_epochs": 0},
    "nasp": {"warmup_epochs": 0},
    "proxylessnas": {"latency_table": {"conv3": 1, "conv1": 0.4, "conv": 1, "id": 0.1, "pool": 0}},
    "spos": {"selection": "loss", "population": 4, "cycles": 6},
    "fairnas": {"selection": "loss", "population": 4, "cycles": 6},
    "fewshot": {"selection": "loss", "population": 4, "cycles": 6, "split_on": ["blk_op"]},
    "enas": {"selection": "loss", "warmup_epochs": 1, "controller_steps": 4, "final_samples": 6},
}
#: budgets the default-sized pick of the toy space does not meet by itself
BUDGETS = [{"params": 250.0}, {"flops": 12000.0}, {"params": 400.0, "flops": 20000.0}]


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(48, 1, 8, 8, generator=g), torch.randint(0, 3, (48,), generator=g)


def test_every_registered_algorithm_is_covered() -> None:
    """The per-algorithm tests below run every built-in one-shot algorithm."""
    assert {n for n, a in ALGORITHMS.items() if a.__module__.startswith("nasforge.")} == set(FAST)


@pytest.mark.parametrize("budget", BUDGETS, ids=["params", "flops", "both"])
@pytest.mark.parametrize("algo", sorted(FAST))
def test_the_pick_lies_within_the_budget(data: tuple, algo: str, budget: dict) -> None:
    """Every algorithm's pick satisfies each kind of budget, counted afresh by arch_size."""
    space = ToySpace()
    result = search(space, algo, data, epochs=2, batch_size=16, budget=budget, **FAST[algo])
    sizes = arch_size(space, result.arch, data[0][:1])
    assert within(sizes, budget), (result.arch, sizes)
    assert {k: result.metrics[k] for k in sizes} == sizes
    assert all(result.metrics[f"budget_{k}"] == v for k, v in budget.items())
    assert nf.freeze(space, result.arch)(data[0][:2]).shape == (2, 3)


@pytest.mark.parametrize("algo", ["spos", "fairnas", "fewshot", "enas"])
def test_sampling_searches_never_propose_an_architecture_over_the_budget(
    data: tuple, algo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every path a sampling search trains and every candidate it scores lies within budget
    (ENAS's controller phase may sample one over it: its reward is penalised, not trained)."""
    import sys

    import nasforge.oneshot.common as common
    import nasforge.oneshot.selection as selection

    space, budget = ToySpace(), {"params": 250.0}
    sizer = Budgeted(space, budget, data[0])
    trained: list[dict] = []
    real_activate = common.activate

    def spy(net, arch):  # noqa: ANN001 - the patched function's own signature
        if sys._getframe(1).f_code.co_name == "step":  # a weight step's path
            trained.append(dict(arch))
        real_activate(net, arch)

    for mod in ("spos", "fairnas", "fewshot", "enas"):
        monkeypatch.setattr(f"nasforge.oneshot.{mod}.activate", spy)
    result = search(space, algo, data, epochs=2, batch_size=16, budget=budget, **FAST[algo])
    # 2 epochs x 2 steps, each one path (FairNAS: as many as the most candidates of a decision)
    paths = max(len(d) for d in space.search_space().decisions) if algo == "fairnas" else 1
    assert len(trained) == 2 * 2 * paths and all(sizer.fits(a) for a in trained)
    assert result.evaluated and all(sizer.fits(a) for a, _ in result.evaluated)
    assert selection.REJECTED < 0  # evolution tells a rejection, never a score


def test_without_a_budget_the_toy_picks_go_over_it(data: tuple) -> None:
    """The budgets above bind: unconstrained DARTS on the toy space picks an architecture over
    each (so the tests above measure the budget, not the toy's default)."""
    space = ToySpace()
    result = search(space, "darts", data, epochs=2, batch_size=16)
    sizes = arch_size(space, result.arch, data[0][:1])
    assert all(not within(sizes, b) for b in BUDGETS), sizes
    assert table_latency(result.arch, data) > LATENCY_BUDGET


#: a latency table of the toy's candidates (ms, one figure per candidate name)
TABLE = FAST["proxylessnas"]["latency_table"]
LATENCY_BUDGET = 1.0


def table_latency(arch: dict, data: tuple) -> float:
    """Returns ``arch``'s latency by :data:`TABLE` (the layers its network keeps)."""
    net = nf.oneshot.supernet(ToySpace(), "darts", data[0][:2])
    op_latency.attach(net, op_latency.load_table(net, TABLE))
    return op_latency.arch_latency(net, arch)


@pytest.mark.parametrize("algo", sorted(FAST))
def test_the_pick_lies_within_a_latency_budget_by_the_table(data: tuple, algo: str) -> None:
    """Every algorithm's pick keeps to a latency budget read from a given table (ProxylessNAS:
    its own latency_table is the budget's), and the pick's metrics carry its latency."""
    own = {"latency_table": TABLE} if algo == "proxylessnas" else {"budget_latency_table": TABLE}
    settings = {**FAST[algo], **own}
    result = search(ToySpace(), algo, data, epochs=2, batch_size=16,
                    budget={"latency": LATENCY_BUDGET}, **settings)  # fmt: skip
    latency = table_latency(result.arch, data)
    assert latency <= LATENCY_BUDGET, (result.arch, latency)
    assert result.metrics["latency"] == pytest.approx(latency)
    assert result.metrics["budget_latency"] == LATENCY_BUDGET


def test_a_measured_latency_budget_holds_and_a_resume_keeps_the_table(data: tuple) -> None:
    """Without a table, each candidate is timed when the search starts; the pick keeps to the
    budget by that table, which the checkpoint carries: a search resumed from it reads the
    table it started with (not a new timing) and ends with the same pick."""
    saved: dict[int, dict] = {}

    def keep(row: dict, state: Any) -> None:
        saved[row["epoch"]] = copy.deepcopy(state.state_dict())

    x = data[0][:2]
    times = proxyless.latency_table(ToySpace(), x)
    budget = {"latency": sorted(times["e1"].values())[-1] + times["blocks.0.op"]["id"]}
    kw = dict(epochs=2, batch_size=16, budget=budget, threads=1, progress="off", **FAST["spos"])
    torch.manual_seed(0)
    whole = search(ToySpace(), "spos", data, checkpoint=keep, **kw)
    assert whole.metrics["latency"] <= budget["latency"]
    table = whole.supernet.latency.table()
    assert set(table) == set(times) and table != times  # timed again, by this search
    torch.manual_seed(0)
    resumed = search(ToySpace(), "spos", data, resume_from=saved[1], **kw)
    assert resumed.supernet.latency.table() == table
    assert resumed.arch == whole.arch and resumed.metrics["latency"] == whole.metrics["latency"]


def test_a_latency_budget_timed_on_onnxruntime(data: tuple) -> None:
    """``budget_latency_table: {measure: {runtime: onnxruntime, threads: 1}}``: each candidate
    exported and timed in a one-thread onnxruntime session; the pick keeps to that table."""
    pytest.importorskip("onnxruntime")
    recipe = {"measure": {"runtime": "onnxruntime", "threads": 1, "n_runs": 3}}
    result = search(ToySpace(), "darts", data, epochs=1, batch_size=16, budget={"latency": 5.0},
                    budget_latency_table=recipe, progress="off")  # fmt: skip
    table = result.supernet.latency.table()
    assert set(table) == {"e0", "e1", "blocks.0.op", "blocks.1.op", "blocks.2.op"}
    assert all(ms > 0 for row in table.values() for ms in row.values())
    assert result.metrics["latency"] <= 5.0


def test_latency_budget_errors_are_one_line_before_training(data: tuple) -> None:
    """A latency budget no architecture meets, a table without a latency budget, and a table
    given twice (ProxylessNAS keeps its own) are each one ConfigError."""
    with pytest.raises(ConfigError, match=r"meets the budget.*latency 0\.\d+ ms > 0\.010 ms"):
        search(ToySpace(), "spos", data, epochs=1, budget={"latency": 0.01},
               budget_latency_table=TABLE, **FAST["spos"])  # fmt: skip
    with pytest.raises(ConfigError, match="budget_latency_table is the table of a latency"):
        search(ToySpace(), "spos", data, epochs=1, budget={"params": 300},
               budget_latency_table=TABLE, **FAST["spos"])  # fmt: skip
    with pytest.raises(ConfigError, match=r"measure takes \['runtime'.*not \['clock'\]"):
        search(ToySpace(), "spos", data, epochs=1, budget={"latency": 2.0},
               budget_latency_table={"measure": {"clock": "cpu"}}, **FAST["spos"])  # fmt: skip
    with pytest.raises(ConfigError, match="give the table once"):
        search(ToySpace(), "proxylessnas", data, epochs=1, budget={"latency": 2.0},
               budget_latency_table=TABLE, **FAST["proxylessnas"])  # fmt: skip


def test_the_penalty_is_differentiable_and_drives_towards_the_budget(data: tuple) -> None:
    """DARTS's resource penalty lowers the expected parameter count: a search with a tight
    budget and a heavy weight ends with a smaller expected size than one without."""
    space = ToySpace()
    tight = {"params": 100.0}

    def expected(result: object) -> float:
        sizer = Budgeted(space, tight, data[0])
        net = result.supernet  # type: ignore[attr-defined]
        sizer.weight = 1.0
        return float(sizer.penalty(net).detach())

    free = search(space, "darts", data, epochs=2, batch_size=16, a_lr=0.05)
    held = search(space, "darts", data, epochs=2, batch_size=16, a_lr=0.05, budget=tight,
                  budget_weight=10.0)  # fmt: skip
    assert expected(held) < expected(free)
    net = held.supernet
    penalty = net.budget.penalty(net)
    penalty.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in net.arch_parameters())


def test_projection_replaces_the_costliest_choice_by_a_cheaper_one(data: tuple) -> None:
    """The projection of an over-budget pick fits the budget and changes as few decisions as
    a greedy descent needs (here the conv blocks go first: they cost the most)."""
    space = ToySpace()
    net = nf.oneshot.supernet(space, "darts")
    sizer = Budgeted(space, {"params": 250.0}, data[0])
    sizer.check()
    big = {"e0": "conv3", "e1": "conv3", "node": 0, "depth": 3, "blk_op": "conv"}
    out = sizer.project(net, big)
    assert sizer.fits(out)
    assert out["blk_op"] == "id" or out["depth"] < 3
    assert sizer.project(net, out) == out  # within the budget: unchanged


def _larger_and_within(sizer: Budgeted, arch: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns the single changes of ``arch`` that raise its load and still fit the budget
    (each measured in the space's canonical form where it has one)."""
    ss, here, out = sizer.space.search_space(), sizer._load(arch), []
    canonical = getattr(sizer.space, "canonical_arch", lambda a: a)
    for d in ss.decisions:
        for v in d.values:
            cand = dict(canonical({**arch, d.label: v}))
            if v != arch[d.label] and sizer._load(cand) > here and sizer.fits(cand):
                out.append(cand)
    return out


def test_a_projection_measures_the_function_not_dead_ops_and_fills_the_budget() -> None:
    """In a space that names its dead ops (``canonical_arch``: the benchmark cell), the
    projected pick holds no op whose input is always zero: the budget buys live weights. An
    all-convolution cell over the budget ends with live convolutions, not with the empty
    cell's function, and grown while it fits: no single change that makes it larger still
    fits the budget."""
    from nasforge.spaces.bench_cell import BenchCellSpace
    from nasforge.spaces.cell_canon import function_key

    space = BenchCellSpace(channels=4, dims=1)
    net = nf.oneshot.supernet(space, "darts")
    example = torch.randn(2, 1, 40)
    full = {d.label: "conv" for d in space.search_space().decisions}
    sizer = Budgeted(space, {"params": 0.5 * arch_size(space, full, example)["params"]}, example)
    sizer.check()
    out = sizer.project(net, full)
    assert sizer.fits(out) and out == space.canonical_arch(out)
    assert function_key(out) != "0" and "conv" in out.values()
    assert _larger_and_within(sizer, out) == []


@pytest.mark.parametrize(
    "budget, fragment",
    [
        ({"memory": 3.0}, "bounds 'memory'"),
        ({"params": -1}, "params must be a finite number > 0"),
        ({"flops": True}, "flops must be a finite number > 0"),
        ([20000], "must be a mapping"),
        ({}, "must be a mapping"),
    ],
)
def test_a_bad_budget_is_one_config_error(data: tuple, budget: object, fragment: str) -> None:
    """A malformed budget is one ConfigError naming it, before any supernet is built."""
    with pytest.raises(ConfigError, match=fragment):
        search(ToySpace(), "darts", data, epochs=1, budget=budget)


def test_a_budget_no_architecture_meets_is_refused_before_training(data: tuple) -> None:
    """A budget below the smallest architecture is one ConfigError naming its size."""
    with pytest.raises(ConfigError, match="no architecture of the space meets the budget.*83"):
        search(ToySpace(), "spos", data, epochs=1, budget={"params": 50}, **FAST["spos"])


def test_the_pure_helpers() -> None:
    """check_budget normalises limits to floats; within and excess agree."""
    assert check_budget({"params": 20000}) == {"params": 20000.0}
    assert check_budget(None) is None
    b = {"params": 10.0, "flops": 100.0}
    assert within({"params": 10, "flops": 100}, b) and excess({"params": 10, "flops": 100}, b) == 0
    assert not within({"params": 11, "flops": 1}, b)
    assert excess({"params": 15, "flops": 1}, b) == pytest.approx(0.5)


def test_the_run_record_states_the_budget_and_the_pick_s_size(tmp_path: Path) -> None:
    """A run file's budget reaches the search; the record holds it in the strategy section,
    and the pick's trial its params and flops beside the limit, within it."""
    from .test_runner import SPACE

    (tmp_path / "bmod.py").write_text(SPACE)
    f = tmp_path / "exp.yaml"
    f.write_text(
        "space: bmod:Net\ndata: bmod:load\nprogress: 'off'\n"
        "strategy: {name: darts, epochs: 1, batch_size: 32, budget: {params: 150}}\n"
    )
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    store = Store.open(d)
    cfg, (pick,) = store.config(), store.trials()
    store.close()
    assert cfg["oneshot"]["strategy"]["config"]["budget"] == {"params": 150}
    m = pick.metrics
    assert m["budget_params"] == 150 and m["params"] <= 150 and m["flops"] > 0
    assert pick.arch["op"] == "pool"  # the conv alone would take the net over 150 parameters


def test_a_run_file_s_latency_budget_and_table_reach_the_record(tmp_path: Path) -> None:
    """A run file's latency budget with its table: the record keeps both, and the pick's
    trial its latency beside the limit (the conv's 1 ms would take it over 0.5)."""
    from .test_runner import SPACE

    (tmp_path / "bmod3.py").write_text(SPACE)
    f = tmp_path / "exp.yaml"
    f.write_text(
        "space: bmod3:Net\ndata: bmod3:load\nprogress: 'off'\n"
        "strategy: {name: darts, epochs: 1, batch_size: 32, budget: {latency: 0.5},\n"
        "           budget_latency_table: {conv: 1.0, pool: 0.2}}\n"
    )
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    with Store.open(d) as store:
        cfg, (pick,) = store.config()["oneshot"]["strategy"]["config"], store.trials()
    assert cfg["budget"] == {"latency": 0.5}
    assert cfg["budget_latency_table"] == {"conv": 1.0, "pool": 0.2}
    assert pick.arch["op"] == "pool" and pick.metrics["latency"] == pytest.approx(0.2)
    assert pick.metrics["budget_latency"] == 0.5


def test_an_infeasible_budget_fails_before_the_record_exists(tmp_path: Path) -> None:
    """A run whose budget no architecture meets exits 2, naming the budget, and writes nothing."""
    from .test_runner import SPACE

    (tmp_path / "bmod2.py").write_text(SPACE)
    f = tmp_path / "exp.yaml"
    f.write_text(
        "space: bmod2:Net\ndata: bmod2:load\nprogress: 'off'\n"
        "strategy: {name: spos, epochs: 1, budget: {params: 10}}\n"
    )
    with pytest.raises(ConfigError, match="no architecture of the space meets the budget"):
        load_run_file(f, directory=tmp_path / "run")
    assert main(["run", str(f), "--dir", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_model_parallel_search_refuses_a_budget() -> None:
    """A budget with model-parallel search is refused in one line, not silently ignored."""
    from nasforge.oneshot import config_for
    from nasforge.oneshot.cmp import DEFAULT_WORKERS, check_parallel

    cfg = config_for("darts", budget={"params": 1000})
    with pytest.raises(ConfigError, match="model parallel search does not take a budget"):
        check_parallel(2, 1, "cmp", DEFAULT_WORKERS, cfg, "darts")
