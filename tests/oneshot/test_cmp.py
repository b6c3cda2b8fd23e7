"""Model-parallel (MP, CMP) and data-parallel search against one-device consecutive search."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from nasforge.errors import ConfigError, SpaceError, WorkerError
from nasforge.oneshot import darts
from nasforge.oneshot.cmp import CMPSettings, cmp_search
from nasforge.oneshot.cmp_partition import partition, unit_costs, units
from nasforge.oneshot.common import apply_arch, apply_weights, arch_grads, weight_grads
from nasforge.oneshot.search import search, supernet

from ._cmp_spaces import Chain, DyingChain, RaisingChain
from ._spaces import ToySpace, tiny_cell_space


class DartsConsecutive(darts.Darts):
    """DARTS with Algorithm 1's order: both gradients at (A_t, w_t), then both updates."""

    @classmethod
    def step(cls, net, state, train, val, cfg):  # noqa: ANN001, ANN206
        val_loss, grads = arch_grads(net, val)
        train_loss = weight_grads(net, train)
        apply_arch(net, state.opt_a, grads)
        apply_weights(net, state.opt_w, cfg)
        return train_loss, val_loss


def _data(n: int = 48, classes: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, classes, (n,), generator=g)


def _same(a, b) -> list[str]:  # noqa: ANN001
    sa, sb = a.supernet.state_dict(), b.supernet.state_dict()
    assert sa.keys() == sb.keys()
    return [k for k in sa if not torch.equal(sa[k], sb[k])]


KW = {"epochs": 2, "batch_size": 12, "seed": 3}


@pytest.mark.parametrize(
    ("schedule", "defer"),
    [
        ("cmp", True),  # the default: the fast set keeps it
        pytest.param("cmp", False, marks=pytest.mark.slow),
        pytest.param("mp", False, marks=pytest.mark.slow),
    ],
)
def test_processes_bitwise_equal_one_device_nasb(schedule: str, defer: bool) -> None:
    """CMP (with and without deferred Eq. 6 recomputation) and MP on 2 processes end with A
    and w bitwise equal to one-device NASB (Algorithm 1)."""
    ref = search(tiny_cell_space(), "nasb", _data(), **KW)
    got = cmp_search(
        tiny_cell_space(), "nasb", _data(),
        CMPSettings(model_parallel=2, schedule=schedule, workers="process",
                    defer_arch_grads=defer), **KW,
    )  # fmt: skip
    assert _same(ref, got) == []
    assert [r["arch"] for r in ref.history] == [r["arch"] for r in got.history]
    assert ref.history[-1]["train_loss"] == got.history[-1]["train_loss"]
    assert ref.arch == got.arch


def test_threads_bitwise_equal_on_chain_space_and_darts() -> None:
    """Thread workers: NASB on a chain space and consecutive DARTS on cells are bitwise equal."""
    ref = search(Chain(), "nasb", _data(), **KW)
    got = cmp_search(Chain(), "nasb", _data(), CMPSettings(3, workers="thread"), **KW)
    assert _same(ref, got) == []
    ref = search(tiny_cell_space(), DartsConsecutive, _data(), **KW)
    got = cmp_search(tiny_cell_space(), "darts", _data(), CMPSettings(2), **KW)
    assert _same(ref, got) == []


def test_data_parallel_matches_within_tolerance() -> None:
    """M=1 x R=2 and M=2 x R=2 match one device within float tolerance (no batch norm)."""
    ref = search(Chain(bn=False), "nasb", _data(), **KW)
    for m in (1, 2):
        got = cmp_search(Chain(bn=False), "nasb", _data(), CMPSettings(m, replicas=2), **KW)
        assert ref.arch == got.arch
        for k, v in ref.supernet.state_dict().items():
            assert torch.allclose(v, got.supernet.state_dict()[k], atol=1e-5, rtol=1e-5), k


def test_process_dp_runs() -> None:
    """M=1 x R=2 on 2 processes gives the same result as on 2 threads (same sums)."""
    a = cmp_search(Chain(), "nasb", _data(), CMPSettings(1, replicas=2, workers="process"),
                   epochs=1, batch_size=12)  # fmt: skip
    b = cmp_search(Chain(), "nasb", _data(), CMPSettings(1, replicas=2, workers="thread"),
                   epochs=1, batch_size=12)  # fmt: skip
    for k, v in a.supernet.state_dict().items():
        assert torch.allclose(v, b.supernet.state_dict()[k], atol=1e-6), k


def test_dead_process_gives_worker_error_and_leaves_nothing() -> None:
    """A worker process that dies mid-search raises WorkerError and no process survives."""
    with pytest.raises(WorkerError, match="exited with code 7"):
        cmp_search(DyingChain(), "nasb", _data(),
                   CMPSettings(2, workers="process", bounds=[(0, 3), (3, 6)]),
                   epochs=2, batch_size=12)  # fmt: skip
    assert multiprocessing.active_children() == []


def test_raising_thread_gives_worker_error_with_traceback() -> None:
    """A worker thread that raises stops the search with its traceback in a WorkerError."""
    with pytest.raises(WorkerError, match="boom in partition"):
        cmp_search(RaisingChain(), "nasb", _data(),
                   CMPSettings(2, workers="thread", bounds=[(0, 3), (3, 6)]),
                   epochs=1, batch_size=12)  # fmt: skip


def test_the_old_keywords_still_work_and_warn() -> None:
    """CMPSettings' fields given as keywords (the old signature) run the same search and warn
    that they go; a misspelled one is refused with the closest name."""
    new = cmp_search(Chain(), "nasb", _data(), CMPSettings(2, workers="thread"), **KW)
    with pytest.warns(DeprecationWarning, match=r"cmp_search\(model_parallel=\.\.\., workers"):
        old = cmp_search(Chain(), "nasb", _data(), model_parallel=2, workers="thread", **KW)
    assert _same(new, old) == [] and new.arch == old.arch
    with pytest.raises(ConfigError, match="model_paralel.*did you mean 'model_parallel'"):
        cmp_search(Chain(), "nasb", _data(), {"model_paralel": 2}, **KW)


def test_partition_is_balanced_and_errors_are_clear() -> None:
    """Partitions are contiguous min-max splits; bad settings and spaces are refused."""
    assert partition([1.0, 1.0, 4.0, 1.0, 3.0], 2) == (range(0, 3), range(3, 5))
    x, y = _data()
    net = supernet(tiny_cell_space(), "nasb", example=x[:2])
    costs = unit_costs(net, (x[:8], y[:8]), repeats=1)
    assert len(costs) == len(units(net)) == 5 and all(c > 0 for c in costs)
    with pytest.raises(ConfigError, match="model_parallel=9"):
        partition(costs, 9)
    with pytest.raises(SpaceError, match="chain"):
        units(supernet(ToySpace(), "nasb", example=torch.randn(2, 1, 8, 8)))
    with pytest.raises(ConfigError, match="consecutive"):
        cmp_search(Chain(), "nasb", _data(), order="alternate", epochs=1)
    with pytest.raises(ConfigError, match="schedule"):
        cmp_search(Chain(), "nasb", _data(), CMPSettings(schedule="gpipe"), epochs=1)


def test_profile_runs_variants_in_turn() -> None:
    """profile_steps times each (schedule, deferral) variant in one launch, with idle shares."""
    from nasforge.oneshot.cmp import profile_steps

    r = profile_steps(Chain(), "nasb", _data(), model_parallel=2, batch_size=12, epochs=1,
                      warmup=1, steps=2, variants=[("mp", False), ("cmp", True)])  # fmt: skip
    assert len(r["step_s"]) == len(r["paired"]) == 2 and r["paired"][0] == 1.0
    assert all(len(i) == 2 and all(0.0 <= f <= 1.0 for f in i) for i in r["idle_fraction"])


@pytest.mark.slow
def test_gpipe_baseline_profiles_on_two_processes_and_leaves_nothing() -> None:
    """The GPipe baseline (``profile_pipelining``) runs its two stages as a local process group
    and returns each stage's step times."""
    from nasforge.oneshot.cmp_pipelining import profile_pipelining

    out = profile_pipelining(Chain(), "nasb", _data(), model_parallel=2, bounds=[(0, 3), (3, 6)],
                             n_microbatches=2, warmup=1, steps=2, batch_size=12)  # fmt: skip
    assert len(out["times"]) == 2 and all(len(t) == 2 for t in out["times"])
    assert out["step_s"] > 0
    assert multiprocessing.active_children() == []
