"""ProxylessNAS: two computed paths per mixed op, Eq. 4 on the sampled pair only, rescaling,
the latency term, and `nasforge run` / kill -9 / resume / export of a proxylessnas run file."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import nasforge as nf
from nasforge.cli import main
from nasforge.engine import Store
from nasforge.errors import ConfigError
from nasforge.oneshot import OneShot, config_for, search, supernet
from nasforge.oneshot.cmp import check_parallel
from nasforge.oneshot.common import SearchConfig, arch_optimizer
from nasforge.oneshot.op_latency import arch_latency, attach, load_table, measure_table
from nasforge.oneshot.proxyless import (
    ProxylessLayer,
    _arch_step,
    sample_paths,
    trace_shapes,
)
from nasforge.oneshot.search import get_algorithm
from nasforge.run.runner import runner_for_strategy
from tests.runwait import wait_until

from ._spaces import ToySpace, tiny_cell_space

#: a per-operation latency predictor of the cell space's candidates (ms)
OPS_MS = {
    "skip_connect": 0.01, "conv_1x1": 1.0, "conv_3x1_1x3": 2.0, "dil_conv_3x3": 3.0,
    "conv_3x3": 3.0, "sep_conv_3x3": 4.0, "sep_conv_5x5": 6.0, "sep_conv_7x7": 8.0,
    "avg_pool_3x3": 0.5, "max_pool_3x3": 0.5, "max_pool_5x5": 1.0, "max_pool_7x7": 1.5,
}  # fmt: skip


def _data(n: int = 64, shape: tuple[int, ...] = (1, 8, 8)) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *shape, generator=g)
    return x, (x.mean(tuple(range(1, x.dim()))) > 0).long() + (x.flatten(1)[:, 0] > 1).long()


def _count_calls(net: nn.Module) -> dict[int, dict[int, int]]:
    """Returns id(layer) -> candidate position -> calls, filled by forward hooks."""
    calls: dict[int, dict[int, int]] = {}
    for m in net.modules():
        if isinstance(m, ProxylessLayer):
            calls[id(m)] = {}
            for k, cand in enumerate(m.candidates()):

                def hook(*_: object, key: int = id(m), k: int = k) -> None:
                    calls[key][k] = calls[key].get(k, 0) + 1

                cand.register_forward_hook(hook)
    return calls


@pytest.mark.parametrize("make", [tiny_cell_space, ToySpace], ids=["cell", "toy"])
def test_architecture_step_computes_two_paths_and_grads_only_them(make: object) -> None:
    """In an architecture pass (forward and backward) each mixed op in the graph runs exactly
    its two sampled candidates once; a node's unsampled edges run nothing; only the sampled
    entries of alpha receive a gradient, and they do receive one."""
    x, y = _data(8)
    net = supernet(make(), "proxylessnas", example=x[:2])  # type: ignore[operator]
    with torch.no_grad():
        for p in net.arch_parameters():
            p.copy_(torch.randn_like(p))
    plan = sample_paths(net, random.Random(1), two=True)
    calls = _count_calls(net)
    loss = nn.functional.cross_entropy(net(x), y)
    params = net.arch_parameters()
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    n_layers = n_skipped = 0
    for m in net.modules():
        if not isinstance(m, ProxylessLayer):
            continue
        got = calls[id(m)]
        if m.role == "skip":
            n_skipped += 1
            assert got == {}
        elif m.role == "alt":  # its output only feeds the node's gate gradient
            assert got == {m.active[0]: 1}
        else:
            n_layers += 1
            assert got == {k: 1 for k in (*m.active, *m.alt)} and len(got) == 2
    assert n_layers > 0
    if make is tiny_cell_space:
        assert n_skipped > 0  # nodes keep 2 of 3 edges: the third is not computed
    n_nonzero = 0
    for label, (active, alt) in plan.items():
        g = grads[net.key_of[label]]
        if g is None:  # every op of this decision was outside the graph (unsampled edges)
            continue
        outside = [i for i in range(len(g)) if i not in (*active, *alt)]
        assert all(float(g[i]) == 0.0 for i in outside), (label, g, active, alt)
        n_nonzero += int(any(float(g[i]) != 0.0 for i in (*active, *alt)))
    assert n_nonzero >= len(plan) // 2


class _One(nf.ModelSpace):
    def __init__(self) -> None:
        super().__init__()
        self.op = nf.LayerChoice({f"l{i}": lambda: nn.Linear(4, 4) for i in range(4)}, label="op")
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.tanh(self.op(x)))


def test_gradient_is_eq4_over_the_sampled_pair() -> None:
    """The binary-gate gradient equals autograd through sum_j g_j o_j over the two sampled
    candidates with g = one-hot + q - q.detach(), q = softmax(alpha[pair]) (Eq. 4)."""
    x, y = _data(6, (4,))
    x, y = x.double(), y
    net = supernet(_One(), "proxylessnas", example=x[:2].float()).double()
    with torch.no_grad():
        net.arch_parameters()[0].copy_(torch.tensor([0.3, -0.2, 0.9, 0.1]))
    plan = sample_paths(net, random.Random(0), two=True)
    (active, alt), alpha = plan["op"], net.arch_parameters()[0]
    (grad,) = torch.autograd.grad(nn.functional.cross_entropy(net(x), y), [alpha])
    pair = [*active, *alt]
    q = torch.softmax(alpha[pair], 0)
    gate = torch.zeros(2, dtype=torch.float64)
    gate[0] = 1.0
    gate = gate + q - q.detach()
    cands = net.model.op.candidates()
    m = sum(gate[i] * cands[k](x) for i, k in enumerate(pair))
    (ref,) = torch.autograd.grad(
        nn.functional.cross_entropy(net.model.fc(torch.tanh(m)), y), [alpha]
    )
    torch.testing.assert_close(grad, ref, rtol=1e-10, atol=1e-12)
    assert float(grad.abs().sum()) > 0


def test_update_keeps_unsampled_entries_and_their_probabilities() -> None:
    """After an architecture step the unsampled entries are unchanged and so is every
    unsampled path's probability (the paper's rescaling), though Adam decays weights."""
    x, y = _data(16)
    net = supernet(tiny_cell_space(), "proxylessnas", example=x[:2])
    with torch.no_grad():
        for p in net.arch_parameters():
            p.copy_(torch.randn_like(p))
    cfg = config_for("proxylessnas", a_lr=0.1)
    opt = arch_optimizer(net.arch_parameters(), cfg)
    before = [p.detach().clone() for p in net.arch_parameters()]
    plan = sample_paths(net, random.Random(3), two=True)
    _arch_step(net, opt, (x, y), cfg, plan)
    moved = 0
    for label, (active, alt) in plan.items():
        i = net.key_of[label]
        old, new = before[i], net.arch_parameters()[i].detach()
        rest = [k for k in range(len(old)) if k not in (*active, *alt)]
        assert torch.equal(old[rest], new[rest])
        torch.testing.assert_close(torch.softmax(old, 0)[rest], torch.softmax(new, 0)[rest])
        moved += int(not torch.equal(old, new))
    assert moved > 0


def test_a_tight_latency_target_moves_the_pick_to_faster_ops() -> None:
    """With the same seed and data, a tight latency target gives a pick within the target,
    where the unconstrained search's pick is well above it."""
    x, y = _data(96)
    settings = dict(epochs=3, batch_size=16, progress="off", a_lr=0.2, latency_table=OPS_MS)
    target = 4.0  # ms; the all-skip pick is 0.12, the slowest about 90
    free = search(tiny_cell_space(), "proxylessnas", (x, y), **settings)
    tight = search(tiny_cell_space(), "proxylessnas", (x, y), latency_target=target,
                   latency_weight=2.0, **settings)  # fmt: skip
    assert free.metrics["latency_ms"] > 2 * target
    assert tight.metrics["latency_ms"] <= target, (tight.arch, tight.metrics, target)
    assert tight.history[-1]["expected_latency_ms"] < free.history[-1]["expected_latency_ms"]


def test_latency_tables_measured_loaded_and_refused() -> None:
    """A measured table covers every candidate with positive times; a table mapping is read
    per layer or per op; a candidate with no entry is a ConfigError naming it."""
    x, _ = _data(4)
    net = supernet(ToySpace(), "proxylessnas", example=x[:2])
    trace_shapes(net, x[:2])
    measured = measure_table(net, n_runs=1, n_warmup=0)
    assert set(measured) == {"e0", "e1", "blocks.0.op", "blocks.1.op", "blocks.2.op"}
    assert all(ms > 0 for row in measured.values() for ms in row.values())
    table = load_table(net, {"layers": {"e0": {"conv3": 5.0}}, "ops": {"conv3": 2.0, "id": 0.0,
                                        "pool": 1.0, "conv1": 1.0, "conv": 3.0}})  # fmt: skip
    assert table["e0"]["conv3"] == 5.0 and table["e1"]["conv3"] == 2.0
    attach(net, table)
    arch = {"e0": "conv3", "e1": "conv1", "node": 0, "depth": 2, "blk_op": "conv"}
    assert arch_latency(net, arch) == 5.0 + 3.0 + 3.0  # e1 is not kept; two blocks
    with pytest.raises(ConfigError, match="'pool' of layer 'e0'"):
        load_table(net, {"conv3": 1.0, "id": 1.0, "conv1": 1.0, "conv": 1.0})
    with pytest.raises(ConfigError, match="latency_target"):
        OneShot("proxylessnas", latency_target=-1)


def test_registry_lists_proxylessnas_with_a_suggestion() -> None:
    """The algorithm and runner registries know the name and suggest it; model-parallel
    search refuses it."""
    assert get_algorithm("proxylessnas").name == "proxylessnas"
    with pytest.raises(ConfigError, match="did you mean 'proxylessnas'"):
        runner_for_strategy("proxylesnas")
    with pytest.raises(ConfigError, match="model_parallel=1"):  # its step is its own
        check_parallel(2, 1, "cmp", "thread", SearchConfig(), "proxylessnas")


SPACE = """
import torch
from torch import nn
import nasforge as nf


class Net(nf.ModelSpace):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.op = nf.LayerChoice(
            {"conv": lambda: nn.Conv2d(4, 4, 3, padding=1), "pool": lambda: nn.AvgPool2d(3, 1, 1)},
            label="op",
        )
        self.bn = nn.BatchNorm2d(4)
        self.blocks = nf.Repeat(lambda i: nn.Conv2d(4, 4, 1), (1, 2), label="depth")
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        import os, time
        if os.environ.get("NF_HOLD_AT"):  # the N-th pass marks NF_MARK and waits to be killed
            type(self).calls = getattr(type(self), "calls", 0) + 1
            if type(self).calls == int(os.environ["NF_HOLD_AT"]):
                open(os.environ["NF_MARK"], "w").close()
                time.sleep(600)
        return self.fc(self.blocks(torch.relu(self.bn(self.op(self.stem(x))))).mean((2, 3)))


def load():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 1, 8, 8, generator=g)
    y = (x.mean((1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 1).long()
    return x, y
"""

RUN = """
progress: log
space: pxlmod:Net
data: pxlmod:load
threads: 1
strategy:
  name: proxylessnas
  epochs: EPOCHS
  batch_size: 16
  a_lr: 0.05
  bn_batches: 2
  latency_target: 2.5
  latency_table: {ops: {conv: 2.0, pool: 0.5}}
"""


def _run_file(tmp_path: Path, epochs: int) -> Path:
    (tmp_path / "pxlmod.py").write_text(SPACE)
    f = tmp_path / "run.yaml"
    f.write_text(RUN.replace("EPOCHS", str(epochs)))
    return f


def test_cli_run_records_latency_and_exports(tmp_path: Path, capsys) -> None:
    """`nasforge run` of a `strategy: proxylessnas` file records the pick with its latency
    and E[lat] per epoch; `nasforge export` writes the pick."""
    d = tmp_path / "run"
    assert main(["run", str(_run_file(tmp_path, 2)), "--dir", str(d)]) == 0
    with Store.open(d) as s:
        (trial,) = s.trials()
        rows = s.progress()
    assert trial.status == "done" and trial.metrics["latency_ms"] in (2.0, 0.5)
    assert [r["epoch"] for r in rows] == [1, 2] and all("expected_latency_ms" in r for r in rows)
    capsys.readouterr()
    assert main(["export", str(d), "--top", "1"]) == 0
    path = capsys.readouterr().out.split()[0]
    assert json.loads((Path(path) / "arch.json").read_text())["arch"] == trial.arch


@pytest.mark.slow
def test_sigkill_then_resume_is_bitwise_uninterrupted(tmp_path: Path) -> None:
    """A proxylessnas run killed with SIGKILL mid-search and resumed with `nasforge resume`
    ends with the uninterrupted run's supernet (alphas, weights, table) bitwise."""
    root = Path(__file__).resolve().parents[2]
    f = _run_file(tmp_path, 5)
    whole, broken, mark = tmp_path / "whole", tmp_path / "broken", tmp_path / "mark"
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir"]
    subprocess.run([*cmd, str(whole)], env=dict(os.environ, PYTHONPATH=str(root)), check=True)
    env = dict(os.environ, PYTHONPATH=str(root), NF_HOLD_AT="24", NF_MARK=str(mark))
    proc = subprocess.Popen([*cmd, str(broken)], env=env)
    try:  # killed inside a step, a few epochs in
        assert wait_until(mark.exists, timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and 2 <= s.n_progress() < 5 and not s.trials()
    assert main(["resume", str(broken)]) == 0
    a = torch.load(whole / "artifacts" / "supernet.pt", weights_only=True)
    b = torch.load(broken / "artifacts" / "supernet.pt", weights_only=True)
    assert any(k.startswith("latency.") for k in a) and any(k.startswith("arch_params") for k in a)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with Store.open(whole) as s1, Store.open(broken) as s2:
        assert [t.arch for t in s1.trials()] == [t.arch for t in s2.trials()]
        assert [r["arch"] for r in s1.progress()] == [r["arch"] for r in s2.progress()]


@pytest.mark.slow
def test_a_latency_table_measured_on_onnxruntime() -> None:
    """measure_table(runtime="onnxruntime", threads=1) times every candidate of every layer
    as an ONNX model, and the table attaches and prices an architecture."""
    x, _ = _data(4)
    net = supernet(ToySpace(), "proxylessnas", example=x[:2])
    trace_shapes(net, x[:2])
    measured = measure_table(net, n_runs=1, n_warmup=0, runtime="onnxruntime", threads=1)
    assert set(measured) == {"e0", "e1", "blocks.0.op", "blocks.1.op", "blocks.2.op"}
    assert all(ms > 0 for row in measured.values() for ms in row.values())
    attach(net, measured)
    arch = {"e0": "conv3", "e1": "conv1", "node": 0, "depth": 2, "blk_op": "conv"}
    assert arch_latency(net, arch) == pytest.approx(
        measured["e0"]["conv3"] + measured["blocks.0.op"]["conv"] + measured["blocks.1.op"]["conv"]
    )
