"""Data-parallel DARTSformer search on 2 gloo ranks over loopback: every rank takes the same steps
whatever its global generators, 2 ranks x batch B/2 train what one process x batch B does (the
loss scaled by each rank's share of the batch's target tokens), a time budget stops both ranks
at the same step, ``nasforge run FILE --nproc 2`` picks what one process picks, and a stop
reaches both ranks at one step. No process is left behind (each group is ended on exit)."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from nasforge.cli import main
from nasforge.data.translation import token_batches
from nasforge.oneshot.dartsformer.search import RevSearchConfig, rev_search, token_share
from nasforge.oneshot.dartsformer.space import Seq2SeqSpace
from nasforge.run.store import Store
from nasforge.runtime.distributed import ONE, Ranks
from nasforge.runtime.procgroup import LocalGroup, file_rendezvous, join_group
from tests.oneshot.dartsformer.test_runner import DATA, TINY
from tests.runwait import wait_for_run

#: the float tolerance of the equivalence: summing each rank's share of a batch's gradient
#: rounds differently from one process's mean over the whole batch. The comparison runs in
#: float64: attention's key bias has a true gradient of exactly 0 (softmax ignores it), so in
#: float32 its gradient is rounding noise that Adam (eps 1e-9) turns into steps of +-lr, which
#: differ between any two orders of summation (~1e-3 after a few steps here; ~1e-11 in float64)
TOLERANCE = 1e-4
VOCAB = 16


def _pairs() -> tuple[list[list[int]], list[list[int]]]:
    """Returns 48 token-id pairs of 1 to 8 tokens each (lengths that differ within a batch, so
    that a rank's share of the tokens is not its share of the sentences)."""
    g = random.Random(0)
    src = [[g.randrange(4, VOCAB) for _ in range(g.randint(1, 8))] for _ in range(48)]
    tgt = [[g.randrange(4, VOCAB) for _ in range(g.randint(1, 8))] for _ in range(48)]
    return src, tgt


def _stream(src: list, tgt: list) -> Any:
    return lambda epoch: token_batches(src, tgt, 60, seed=epoch)


def _digest(state: dict[str, Any]) -> str:
    """Returns a hash of what decides the next step: weights, optimizers' moments, the draws."""
    h = hashlib.sha256()
    tensors = [*state["supernet"].values(), state["rng"]]
    for opt in ("opt_w", "opt_a"):
        for s in state[opt]["state"].values():
            tensors += [v for v in s.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def search(ranks: Ranks = ONE, dropout: float = 0.0, dtype: Any = None, **cfg: Any) -> dict:
    """Returns what a tiny search (in ``dtype``, by default float32) ends with: the pick, the
    supernet's state, each logged row's architecture and a digest of every step."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype or before)
    try:
        return _search(ranks, dropout, **cfg)
    finally:
        torch.set_default_dtype(before)


def _search(ranks: Ranks, dropout: float, should_stop: Any = None, **cfg: Any) -> dict:
    torch.set_num_threads(1)
    src, tgt = _pairs()
    torch.manual_seed(0)
    space = Seq2SeqSpace(VOCAB, d=12, e=8, n_splits=2, s=1, heads=2, dropout=dropout,
                         enc_ops=["conv3", "self_attn", "ffn", "identity"],
                         dec_ops=["conv3", "self_attn", "cross_attn", "ffn"])  # fmt: skip
    steps: list[str] = []
    settings = {"max_steps": 5, "log_every": 2, "checkpoint_every": 1, "warmup": 2,
                "w_lr": 0.003, "a_lr": 0.01, "time_budget_s": float("inf"), **cfg}  # fmt: skip
    found = rev_search(space, _stream(src[:24], tgt[:24]), _stream(src[24:], tgt[24:]),
                       RevSearchConfig(**settings), checkpoint=lambda s: steps.append(_digest(s)),
                       should_stop=should_stop, ranks=ranks)  # fmt: skip
    return {
        "arch": found.arch,
        "state": {k: v.detach().clone() for k, v in found.supernet.state_dict().items()},
        "archs": [row["arch"] for row in found.history],
        "steps": steps,
        "n": found.steps,
    }


def _rank(rank: int, folder: str, world: int, algorithm: str) -> dict[str, Any]:
    """Returns this rank's searches, its global generators first set apart from every other
    rank's: with dropout (draws to make), without (to compare with one process), and with a
    time budget only rank 1 runs out of."""
    ranks = join_group(rank, world, file_rendezvous(folder), timeout_s=120)
    torch.manual_seed(1000 + rank)
    random.seed(1000 + rank)
    budget = 0.3 if rank == 1 else 1e9
    return {
        "dropout": search(ranks, dropout=0.1, algorithm=algorithm),
        "plain": search(ranks, dtype=torch.float64, algorithm=algorithm),
        "budget": search(
            ranks, max_steps=10**6, time_budget_s=budget, checkpoint_every=0, algorithm=algorithm
        ),  # fmt: skip
    }


def _worst(a: dict, b: dict) -> float:
    return max(float((a["state"][k] - b["state"][k]).abs().max()) for k in b["state"])


def test_token_share_weighs_tokens_not_sentences() -> None:
    """A rank's share of a batch is its rows' target tokens (not padding) over the batch's:
    the shares of every rank sum to 1 and differ from the rows' shares when lengths differ."""
    tgt = torch.tensor([[5, 2, 0, 0], [5, 6, 7, 2], [2, 0, 0, 0]])  # 2 + 4 + 1 tokens
    shares = [token_share(Ranks(r, 2), tgt) for r in range(2)]
    assert shares == [6 / 7, 1 / 7]
    assert token_share(ONE, tgt) == 1.0 and token_share(Ranks(1, 4), tgt) == 1 / 4


def test_the_search_draws_from_its_own_generator_not_the_global_one() -> None:
    """With dropout, a search whose callback draws from torch's global generator between its
    steps (a different amount each run) takes bitwise the same steps: the masks come from the
    search's own generator, seeded alike on every rank and saved in its checkpoints."""

    def drawing(n: int) -> Any:
        return lambda: bool(torch.rand(n).sum() < 0)  # never stops; moves the global state

    a = search(dropout=0.1, max_steps=3, should_stop=drawing(1))
    b = search(dropout=0.1, max_steps=3, should_stop=drawing(7))
    assert a["steps"] == b["steps"] and len(a["steps"]) == 3


def _check(algorithm: str, tmp_path: Path) -> None:
    torch.manual_seed(7)  # one process: its global generator does not matter either
    one = search(dtype=torch.float64, algorithm=algorithm)  # first: the forks inherit imports
    with LocalGroup(2, _rank, (str(tmp_path), 2, algorithm), folder=tmp_path, what="rank",
                    timeout_s=120, start_method="fork") as group:  # fmt: skip
        a, b = group.results(weights_only=False)
    for run in ("dropout", "plain"):
        assert a[run]["steps"] == b[run]["steps"] and len(a[run]["steps"]) == 5
        assert a[run]["archs"] == b[run]["archs"] and _worst(a[run], b[run]) == 0.0
    assert a["plain"]["arch"] == one["arch"] and a["plain"]["archs"] == one["archs"]
    assert _worst(a["plain"], one) < TOLERANCE
    assert a["budget"]["n"] == b["budget"]["n"] and 1 <= a["budget"]["n"] < 10**6
    assert _worst(a["budget"], b["budget"]) == 0.0


def test_two_ranks_agree_step_by_step_and_match_one_process(tmp_path: Path) -> None:
    """DARTS on 2 ranks (global generators set apart) takes bitwise the same steps on both,
    with dropout too; without dropout (float64) it ends within the tolerance of one process
    with the whole batch, with the same architecture at every logged step; a time budget one
    rank runs out of stops both at the same step."""
    _check("darts", tmp_path)


@pytest.mark.slow
def test_nasb_on_two_ranks_agrees_and_matches_one_process(tmp_path: Path) -> None:
    """NASB (binary gates from A) on 2 ranks: the same steps on both, and one process's
    supernet and architectures within the tolerance."""
    _check("nasb", tmp_path)


def _record(d: Path) -> tuple[list[dict], list[dict]]:
    """Returns (the run's picked architectures, its progress rows) once it finished."""
    with Store.open(d) as store:
        assert store.state() == "finished"
        return [t.arch for t in store.trials() if t.id in store.picks()], store.progress()


@pytest.mark.slow
@pytest.mark.skipif(DATA is None, reason="the toy OpenNMT en-de data is absent")
def test_nproc_2_run_picks_what_one_process_picks(tmp_path: Path) -> None:
    """`nasforge run FILE --nproc 2` of a dartsformer file (no dropout) writes one record
    whose pick and logged architectures are one process's, its logged losses within the
    tolerance (float32: the weights may differ in attention's key bias, see TOLERANCE), and
    the same files."""
    space = {**TINY["space"], "dropout": 0.0}  # type: ignore[dict-item]
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps({**TINY, "space": space}))
    two, one = tmp_path / "two", tmp_path / "one"
    assert main(["run", str(f), "--nproc", "2", "--dir", str(two)]) == 0
    assert main(["run", str(f), "--dir", str(one)]) == 0
    (pick2, rows2), (pick1, rows1) = _record(two), _record(one)
    assert pick2 == pick1 and len(pick1) == 1
    assert [r["arch"] for r in rows2] == [r["arch"] for r in rows1] and len(rows1) == 4
    for r2, r1 in zip(rows2, rows1):
        for key in ("train_loss", "val_loss"):
            assert abs(r2[key] - r1[key]) < TOLERANCE * max(1.0, abs(r1[key])), (key, r2, r1)
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(DATA is None, reason="the toy OpenNMT en-de data is absent")
def test_a_stop_reaches_both_ranks_and_resume_ends_as_an_unbroken_run(tmp_path: Path) -> None:
    """`nasforge stop` of a `--nproc 2` dartsformer run stops both ranks after the same step
    (recorded stopped, its checkpoint there); `resume --nproc 2` ends with the supernet of an
    unbroken `--nproc 2` run, bitwise."""
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps({**TINY, "max_steps": 60, "checkpoint_every": 8, "log_every": 4}))
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    proc = subprocess.Popen([sys.executable, "-m", "nasforge", "run", str(f), "--nproc", "2",
                             "--dir", str(broken)], stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert wait_for_run(broken, lambda s: s.n_progress() >= 2, timeout=180)
        assert main(["stop", str(broken)]) == 0
        assert proc.wait(180) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store.open(broken) as store:
        assert store.state() == "stopped" and not store.trials(), "it ended before the stop"
        step = torch.load(store.artifact("search_state"), weights_only=True)["step"]
    assert 8 <= step < 60
    assert main(["resume", str(broken), "--nproc", "2"]) == 0
    assert main(["run", str(f), "--nproc", "2", "--dir", str(whole)]) == 0
    a, b = (torch.load(d / "artifacts" / "supernet.pt", weights_only=True) for d in (whole, broken))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    (pick, rows), (pick0, rows0) = _record(broken), _record(whole)
    timeless = [
        [{k: v for k, v in r.items() if k != "elapsed_s"} for r in x] for x in (rows, rows0)
    ]
    assert pick == pick0 and timeless[0] == timeless[1] and len(rows) == 15
