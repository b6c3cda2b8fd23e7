"""Tests of ``nasforge ofa train | search | export`` end to end on a tiny data file."""

from __future__ import annotations

import pytest
import torch

from nasforge.cli import main
from nasforge.ofa import train as train_module
from nasforge.ofa.deploy import load_supernet
from nasforge.ofa.mobilenet import extract
from nasforge.ofa.record import open_ofa_store
from nasforge.run.export import load_model


@pytest.mark.slow
def test_train_search_export(tmp_path):
    """Train writes a supernet; search writes fronts and one PNG for two runs; export writes
    frozen models whose outputs equal the supernet's."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 1, 28, 28, generator=g)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    data = tmp_path / "data.pt"
    torch.save({"x": x, "y": y}, data)
    runs = []
    for space in ("compofa", "ofa"):
        run = tmp_path / space
        argv = ["ofa", "train", "--space", space, "--out", str(run), "--data", str(data),
                "--full-epochs", "1", "--shrink-epochs", "5" if space == "ofa" else "1",
                "--width-mult", "0.25", "--n-subnets", "1", "--batch-size", "40"]  # fmt: skip
        assert main(argv) == 0
        assert (run / "artifacts" / "supernet.pt").exists() and (run / "run.db").exists()
        runs.append(str(run))
    png = tmp_path / "front.png"
    argv = ["ofa", "search", *runs, "--targets", "0.7", "2", "--latency", "flops",
            "--accuracy", "predictor", "--n-pairs", "8", "--population", "6",
            "--generations", "2", "--data", str(data), "--png", str(png)]  # fmt: skip
    assert main(argv) == 0
    assert png.stat().st_size > 1000
    with open_ofa_store(tmp_path / "compofa") as store:
        front = store.trials()
    assert [t.metrics["target"] for t in front] == [0.7, 2.0]
    assert all(t.metrics["cost"] <= t.metrics["target"] for t in front)
    assert {t.evaluation for t in front} == {"predicted"}
    assert main(["ofa", "export", runs[0], "--out", str(tmp_path / "exp")]) == 0
    (folder,) = (tmp_path / "exp").glob(f"rank*_trial{front[1].id}")
    model = load_model(folder)  # the space is rebuilt from the reference the export carries
    net = load_supernet(runs[0]).eval()
    expected = extract(net, front[1].arch).eval()(x[:4])
    assert torch.equal(model(x[:4]), expected)


def test_missing_run_is_a_clear_error(tmp_path):
    """Searching a folder with no supernet exits with code 2."""
    assert main(["ofa", "search", str(tmp_path), "--targets", "1"]) == 2


def _tiny_data(tmp_path, n=120):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 1, 28, 28, generator=g)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    torch.save({"x": x, "y": y}, tmp_path / "data.pt")
    return str(tmp_path / "data.pt")


def test_search_leaves_the_trained_run_finished(tmp_path, capsys):
    """`ofa search` on a finished run records its trials and leaves the run `finished`, as
    `nasforge status` and the dashboard read it (it was shown as interrupted)."""
    from nasforge.dashboard.data import TrialCache
    from nasforge.dashboard.overview import summarize
    from nasforge.run.store import Store

    data, run = _tiny_data(tmp_path), tmp_path / "run"
    argv = ["ofa", "train", "--space", "compofa", "--out", str(run), "--data", data,
            "--full-epochs", "1", "--shrink-epochs", "1", "--width-mult", "0.25",
            "--n-subnets", "1", "--batch-size", "60", "--no-probes"]  # fmt: skip
    assert main(argv) == 0
    argv = ["ofa", "search", str(run), "--targets", "2", "--latency", "flops", "--accuracy",
            "predictor", "--n-pairs", "6", "--population", "4", "--generations", "1",
            "--data", data, "--png", str(tmp_path / "front.png")]  # fmt: skip
    assert main(argv) == 0
    with Store.open(run) as store:
        assert store.state() == "finished" and len(store.trials()) == 1
    capsys.readouterr()
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "interrupted" not in out and "resume" not in out and "finished" in out
    assert summarize("r", "run", run, TrialCache()).state == "finished"


def test_killed_training_resumes_to_the_same_supernet(tmp_path, monkeypatch, capsys):
    """`ofa train` interrupted in its second stage and continued with `nasforge resume DIR`
    ends with the same weights as an unbroken run; `nasforge status DIR` shows the run."""
    data = _tiny_data(tmp_path)
    argv = ["--space", "compofa", "--data", data, "--full-epochs", "1", "--shrink-epochs", "2",
            "--width-mult", "0.25", "--n-subnets", "1", "--batch-size", "50"]  # fmt: skip
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main(["ofa", "train", "--out", str(whole), *argv]) == 0
    real_epoch, calls = train_module._epoch, []

    def killed_in_third_epoch(*args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_epoch(*args, **kw)

    monkeypatch.setattr(train_module, "_epoch", killed_in_third_epoch)
    assert main(["ofa", "train", "--out", str(broken), *argv]) == 130
    monkeypatch.setattr(train_module, "_epoch", real_epoch)
    assert main(["status", str(broken)]) == 0
    out = capsys.readouterr().out
    assert "interrupted: 2 of 3 epochs done" in out and f"nasforge resume {broken}" in out
    assert main(["ofa", "train", "--out", str(broken), *argv]) == 2  # never overwritten
    assert main(["resume", str(broken)]) == 0
    a, b = load_supernet(whole).state_dict(), load_supernet(broken).state_dict()
    for k, v in a.items():
        assert torch.equal(v, b[k]), k
    capsys.readouterr()
    assert main(["ofa", "status", str(broken)]) == 0
    out = capsys.readouterr().out
    assert "finished: 3 of 3 epochs done" in out and "acc_largest" in out


def test_foreign_and_corrupted_directories_are_clear_errors(tmp_path):
    """Resuming or exporting a multi-trial experiment or a corrupted store exits with code 2."""
    from nasforge.run.store import DB_NAME, Store

    Store.create(tmp_path / "trials", {"kind": "multitrial"}).close()
    assert main(["ofa", "train", "--resume", str(tmp_path / "trials")]) == 2
    assert main(["ofa", "export", str(tmp_path / "trials")]) == 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / DB_NAME).write_bytes(b"garbage" * 300)
    assert main(["ofa", "status", str(tmp_path / "bad")]) == 2
    assert main(["ofa", "train", "--resume", str(tmp_path / "bad")]) == 2
