"""The ``dartsformer`` kind: reversible seq2seq search on real translation pairs as a run
(`nasforge run/status/export/resume`), with tiny settings that take seconds on one thread."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nasforge.cli import main
from nasforge.data.translation import load_pairs, split_pairs
from nasforge.errors import ConfigError, DivergenceError, SpaceError, StoreError
from nasforge.oneshot.darts import Darts
from nasforge.oneshot.dartsformer.runner import Seq2SeqSearch, find_data, load_tokenizer
from nasforge.oneshot.dartsformer.space import Seq2SeqSpace
from nasforge.oneshot.dartsformer.train import translate_bleu
from nasforge.oneshot.supernet import Supernet, inherit_weights
from nasforge.run.export import export_top, load_model
from nasforge.run.files import load_run_file
from nasforge.run.store import Store
from tests.runwait import wait_for_run

ROOT = Path(__file__).resolve().parents[3]
try:  # ../shared/data from the repository root, one level further up from a worktree
    DATA = find_data("shared/data/opennmt_toy_ende", ROOT)
except ConfigError:
    DATA = None
pytestmark = pytest.mark.skipif(
    DATA is None, reason="the toy OpenNMT en-de data (shared/data/opennmt_toy_ende) is absent"
)

#: Tiny: 200 pairs, d = 24 (4 heads), one searched layer; seconds per run on one thread.
TINY = {
    "kind": "dartsformer",
    "data": str(DATA),
    "pairs": 200,
    "test": 12,
    "vocab": 300,
    "space": {"d": 24, "e": 8, "n_splits": 2, "s": 1, "repeats": 1, "heads": 4},
    "algorithm": "darts",
    "max_steps": 12,
    "batch_tokens": 300,
    "search": {"warmup": 4, "w_lr": 0.002, "a_lr": 0.003},
    "log_every": 3,
    "checkpoint_every": 4,
    "seed": 0,
    "threads": 1,
    "progress": "off",
}


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)


def _file(tmp_path: Path, name: str = "run.yaml", **changes: object) -> Path:
    f = tmp_path / name
    f.write_text(json.dumps({**TINY, **changes}))  # JSON is YAML
    return f


def _state(d: Path) -> dict:
    with Store.open(d) as s:
        return torch.load(s.artifact("search_state"), weights_only=True)


@pytest.mark.slow
def test_run_records_progress_tokenizer_and_a_trained_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`nasforge run` on a dartsformer file records progress rows with each decision's
    candidate strengths, the tokenizer, and the found architecture retrained and scored by
    BLEU; `status` shows it and `export` + `load_model` reproduce the recorded BLEU."""
    f = _file(tmp_path, retrain={"steps": 6, "warmup": 3, "beam": 2, "n_beam": 4})
    d = tmp_path / "run"
    assert main(["run", str(f), "--dir", str(d)]) == 0
    space_labels = Seq2SeqSpace(300, **TINY["space"]).search_space()  # type: ignore[arg-type]
    with Store.open(d) as s:
        assert s.kind == "dartsformer" and s.state() == "finished"
        rows = s.progress()
        (trial,) = s.trials()
        tokenizer = s.artifact("tokenizer")
        assert s.events() == [("ask", 1), ("tell", 1)]
        assert s.objective()["metric"] == "bleu"
    assert [r["step"] for r in rows] == [3, 6, 9, 12]
    for r in rows:
        w = r["arch_weights"]
        assert set(w) == set(r["arch"]) == set(space_labels)
        for label, strengths in w.items():  # DARTS: the softmax of alpha, one per candidate
            assert len(strengths) == len(space_labels[label])
            assert abs(sum(strengths) - 1) < 1e-4
    assert rows[0]["arch_weights"] != rows[-1]["arch_weights"]  # alpha moved
    assert trial.evaluation == "trained" and trial.arch == rows[-1]["arch"]
    assert {"bleu", "bleu_beam2", "params", "supernet_val_loss"} <= set(trial.metrics or {})
    assert [r["step"] for r in trial.intermediates] == [3, 6]  # the retrain's loss
    bpe = load_tokenizer(d)
    assert json.loads(tokenizer.read_text())["model"]["type"] == "BPE"  # type: ignore[union-attr]
    assert bpe.decode(bpe.encode(["Ein Haus ."])) == ["Ein Haus ."]
    capsys.readouterr()
    assert main(["status", str(d)]) == 0
    assert "dartsformer run, finished: 4 of 4 logs of 3 steps done" in capsys.readouterr().out
    assert main(["export", str(d)]) == 0
    (folder,) = capsys.readouterr().out.split()
    model = load_model(folder)  # nothing but the export folder ...
    assert load_tokenizer(folder).to_str() == bpe.to_str()  # ... which holds the tokenizer too
    test = split_pairs(load_pairs(DATA, limit=200), {"test": 12, "train": -1}, seed=0)["test"]
    score, _ = translate_bleu(model, bpe, test.src, test.tgt)
    assert score == trial.metrics["bleu"]  # type: ignore[index]


@pytest.mark.slow
def test_export_without_retrain_is_the_supernet_s_frozen_architecture(tmp_path: Path) -> None:
    """Without a retrain the trial is `inherited`, ranked by validation loss; the exported
    model computes exactly what the frozen architecture with the supernet artifact's weights
    computes."""
    d = tmp_path / "run"
    runner = load_run_file(_file(tmp_path), directory=str(d))
    assert isinstance(runner, Seq2SeqSearch)
    runner.run()
    (trial,) = runner.trials()
    assert trial.evaluation == "inherited" and runner.objective.mode == "min"
    assert trial.metrics["val_loss"] > 0  # type: ignore[index]
    (folder,) = export_top(d)
    exported = load_model(folder)
    space = Seq2SeqSpace(load_tokenizer(d).vocab_size, **TINY["space"])  # type: ignore[arg-type]
    net = Supernet(space, Darts)
    net.load_state_dict(torch.load(d / "artifacts" / "supernet.pt", weights_only=True))
    frozen = inherit_weights(net, trial.arch).eval()
    src = torch.randint(4, 300, (3, 7), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(4, 300, (3, 5), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(exported(src, tgt), frozen(src, tgt))


class _StopAfterCheckpoint(Seq2SeqSearch):
    """The runner, interrupted (as by Ctrl-C) right after the checkpoint of step 4."""

    def _checkpoint(self, store, state):  # type: ignore[no-untyped-def]
        super()._checkpoint(store, state)
        if state["step"] == 4:
            raise KeyboardInterrupt


def _stopped_after_step4(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """Returns the run file and the directory of a TINY run interrupted after its step-4
    checkpoint."""
    f, d = _file(tmp_path), tmp_path / name
    stopper = _StopAfterCheckpoint.from_section(
        {k: v for k, v in TINY.items() if k != "kind"}, directory=str(d), source={"file": str(f)}
    )
    with pytest.raises(KeyboardInterrupt):
        stopper.run()
    return f, d


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["darts", "nasb"])
def test_interrupted_then_resumed_equals_uninterrupted_bitwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    """A search stopped after its step-4 checkpoint and continued with `nasforge resume` ends
    with the same supernet, alpha, progress rows and trial as an uninterrupted run (one
    thread; run directories given relative to the working directory); resuming the finished
    run changes nothing."""
    monkeypatch.chdir(tmp_path)
    f = _file(tmp_path, algorithm=algorithm)
    whole, broken = Path("whole"), Path("broken")
    load_run_file(f, directory=str(whole)).run()
    stopper = _StopAfterCheckpoint.from_section(
        {**{k: v for k, v in TINY.items() if k != "kind"}, "algorithm": algorithm},
        directory=str(broken),
        source={"file": str(f)},
    )
    with pytest.raises(KeyboardInterrupt):
        stopper.run()
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and not s.trials()
        assert [r["step"] for r in s.progress()] == [3]
    assert _state(broken)["step"] == 4
    assert main(["resume", str(broken)]) == 0
    a, b = (torch.load(x / "artifacts" / "supernet.pt", weights_only=True) for x in (whole, broken))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any("alpha" in k or "arch" in k for k in a)  # the architecture parameters too
    sa, sb = _state(whole), _state(broken)
    assert sa["step"] == sb["step"] == 12 and torch.equal(sa["rng"], sb["rng"])
    with Store.open(whole) as s1, Store.open(broken) as s2:
        drop = ("elapsed_s",)
        p1 = [{k: v for k, v in r.items() if k not in drop} for r in s1.progress()]
        p2 = [{k: v for k, v in r.items() if k not in drop} for r in s2.progress()]
        assert p1 == p2
        (t1,), (t2,) = s1.trials(), s2.trials()
        assert (t1.arch, t1.metrics) == (t2.arch, t2.metrics)
        assert s2.state() == "finished"
    assert main(["resume", str(broken)]) == 0
    with Store.open(broken) as s:
        assert [t.id for t in s.trials()] == [1] and s.events() == [("ask", 1), ("tell", 1)]
    (folder,) = export_top(broken)  # the resumed record still names its space
    assert isinstance(load_model(folder), Seq2SeqSpace)


def test_a_missing_checkpoint_is_reported_not_silently_restarted(tmp_path: Path) -> None:
    """Resuming a stopped run whose recorded checkpoint file is gone fails with a StoreError
    naming the file (exit status 2), instead of starting the search over."""
    f, d = _stopped_after_step4(tmp_path, "broken")
    (d / "checkpoints" / "search_step4.pt").unlink()
    with pytest.raises(StoreError, match="search_step4.pt"):
        load_run_file(f, directory=str(d)).resume()
    assert main(["resume", str(d)]) == 2


class _StopInRetrain(Seq2SeqSearch):
    """The runner, interrupted during its first retrain (after the search finished)."""

    stopped = False

    def _retrain(self, arch, src, tgt):  # type: ignore[no-untyped-def]
        if not _StopInRetrain.stopped:
            _StopInRetrain.stopped = True
            raise KeyboardInterrupt
        return super()._retrain(arch, src, tgt)


@pytest.mark.slow
def test_a_run_stopped_in_its_retrain_retrains_on_resume(tmp_path: Path) -> None:
    """A run stopped during the retrain keeps its finished search: a resume retrains the same
    trial (no second one) and records what an uninterrupted run records."""
    retrain = {"steps": 6, "warmup": 3}
    f = _file(tmp_path, retrain=retrain)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    load_run_file(f, directory=str(whole)).run()
    settings = {k: v for k, v in TINY.items() if k != "kind"}
    stopper = _StopInRetrain.from_section(
        {**settings, "retrain": retrain}, directory=str(broken), source={"file": str(f)}
    )
    with pytest.raises(KeyboardInterrupt):
        stopper.run()
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and [t.status for t in s.trials()] == ["interrupted"]
    assert main(["resume", str(broken)]) == 0
    with Store.open(whole) as s1, Store.open(broken) as s2:
        (t1,), (t2,) = s1.trials(), s2.trials()
        assert (t2.id, t2.status, t2.evaluation) == (1, "done", "trained")
        assert (t1.arch, t1.metrics) == (t2.arch, t2.metrics)
        losses = [[(r["step"], r["loss"]) for r in t.intermediates] for t in (t1, t2)]
        assert losses[0] == losses[1]
        assert s2.events() == [("ask", 1), ("tell", 1)]


@pytest.mark.slow
def test_sigkill_mid_search_then_resume_is_bitwise_uninterrupted(tmp_path: Path) -> None:
    """A dartsformer run killed with SIGKILL after a checkpoint, in the middle of its search,
    and resumed ends with the same supernet, bitwise, as an uninterrupted run."""
    f = _file(tmp_path, max_steps=60, checkpoint_every=8, log_every=4)
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NASFORGE_THREADS="1")
    cmd = [sys.executable, "-m", "nasforge.cli", "run", str(f), "--dir"]
    subprocess.run([*cmd, str(whole)], env=env, check=True, capture_output=True)
    proc = subprocess.Popen([*cmd, str(broken)], env=env, stderr=subprocess.DEVNULL)
    try:
        checkpointed = lambda s: s.artifact("search_state") is not None  # noqa: E731
        wait_for_run(broken, lambda s: checkpointed(s) and s.n_progress() >= 5)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    with Store.open(broken) as s:
        assert s.state() == "interrupted" and not s.trials(), "the run ended before the kill"
    assert 8 <= _state(broken)["step"] < 60
    assert main(["resume", str(broken)]) == 0
    a, b = (torch.load(x / "artifacts" / "supernet.pt", weights_only=True) for x in (whole, broken))
    assert all(torch.equal(a[k], b[k]) for k in a)
    with Store.open(whole) as s1, Store.open(broken) as s2:
        assert [r["arch_weights"] for r in s1.progress()] == [
            r["arch_weights"] for r in s2.progress()
        ]
        assert s1.trials()[0].metrics == s2.trials()[0].metrics


def test_bad_settings_are_refused_before_the_record(tmp_path: Path) -> None:
    """A missing data folder, an unknown algorithm, space or retrain setting, no budget, and
    a hidden size the splits do not divide are refused before a run directory exists."""
    d = tmp_path / "run"
    cases = [
        ({"data": str(tmp_path / "nowhere")}, ConfigError, "nowhere"),
        ({"algorithm": "dartz"}, ConfigError, "dartz"),
        ({"space": {**TINY["space"], "width": 3}}, ConfigError, "width"),  # type: ignore[dict-item]
        ({"retrain": {"stpes": 3}}, ConfigError, "stpes"),
        ({"max_steps": None}, ConfigError, "budget"),
        ({"max_steps": 0}, ConfigError, "max_steps"),
        ({"pairs": 13}, ConfigError, "pairs=13"),
        ({"pairs": "all"}, ConfigError, "pairs"),
        ({"lr": 0.1}, ConfigError, "lr"),
        ({"space": {**TINY["space"], "d": 25}}, SpaceError, "d=25"),  # type: ignore[dict-item]
    ]
    for changes, error, match in cases:
        with pytest.raises(error, match=match):
            load_run_file(_file(tmp_path, **changes), directory=str(d))
    assert main(["run", str(_file(tmp_path, data="nowhere")), "--dir", str(d)]) == 2
    assert not d.exists()


def test_a_diverging_search_stops_failed(tmp_path: Path) -> None:
    """A weight learning rate that makes the loss NaN stops the search with a DivergenceError
    naming the step; the run is recorded failed, with no trial."""
    f = _file(tmp_path, search={"warmup": 1, "w_lr": 1e12, "grad_clip": 1e30})
    d = tmp_path / "run"
    with pytest.raises(DivergenceError, match="search step"):
        load_run_file(f, directory=str(d)).run()
    with Store.open(d) as s:
        assert s.state() == "failed" and not s.trials()


def _as_before_the_move(d: Path) -> None:
    """Rewrites the record in ``d`` as nasforge 0.2 wrote it: the space named by its old path."""
    new, old = "nasforge.oneshot.dartsformer.space:", "nasforge.spaces.seq2seq:"
    with sqlite3.connect(d / "run.db") as con:
        (config,) = con.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        assert new in config
        con.execute("UPDATE meta SET value = ? WHERE key = 'config'", (config.replace(new, old),))
    con.close()
    with Store.open(d) as s:
        assert s.config()["space"]["object"].startswith(old)


@pytest.mark.slow
def test_a_record_written_before_the_move_resumes_and_exports(tmp_path: Path) -> None:
    """A record from before the DARTSformer kind moved out of ``nasforge.spaces`` (its config
    names the space ``nasforge.spaces.seq2seq:Seq2SeqSpace``) resumes to the end, and a
    finished one exports, rebuilding the space through the old path (which warns)."""
    _, d = _stopped_after_step4(tmp_path, "old")
    _as_before_the_move(d)
    assert main(["resume", str(d)]) == 0
    with Store.open(d) as s:
        assert s.state() == "finished" and len(s.trials()) == 1
    _as_before_the_move(d)
    (folder,) = export_top(d)
    with pytest.warns(DeprecationWarning, match="nasforge.oneshot.dartsformer.space"):
        sys.modules.pop("nasforge.spaces.seq2seq", None)
        model = load_model(folder)
    assert isinstance(model, Seq2SeqSpace)
