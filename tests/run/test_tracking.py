"""TensorBoard and MLflow trackers: live callbacks of a search, ``nasforge export --to``, and
the one-line error for a missing extra. The written event files and MLflow store are read back
with each package's own reader (the tests skip, with the reason, where a package is missing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nasforge.cli import main
from nasforge.engine import Experiment
from nasforge.errors import ConfigError
from nasforge.run import preflight
from nasforge.run.store import Store
from nasforge.run.tracking import BaseCallback, TensorBoardCallback, get_callbacks
from nasforge.space.search_space import SearchSpace


def _space() -> SearchSpace:
    return SearchSpace.from_spec(
        {"op": ["a", "b"], "lr": {"uniform": [1e-4, 1e-1], "log": True}, "skip": [[0], [0, 1]]}
    )


def _evaluate(arch: dict, report) -> dict:
    for epoch in range(3):
        report({"accuracy": 0.1 * epoch + arch["lr"]})
    return {"accuracy": 0.3 + arch["lr"], "params": 7.0}


def _run(directory: Path, n: int, callbacks: list) -> Experiment:
    exp = Experiment(
        _space(),
        _evaluate,
        "random",
        directory=directory,
        n_trials=n,
        metric="accuracy",
        executor="inprocess",
        progress="off",
        callbacks=callbacks,
    )
    return exp.run() if not (directory / "run.db").exists() else exp.resume()


def _trials(directory: Path) -> list:
    with Store.open(directory) as store:
        return store.trials()


def test_tensorboard_callback_writes_scalars_text_and_hparams(tmp_path: Path) -> None:
    """Each trial's reported values, final metrics and architecture (hparams plugin) are in
    its event files, as TensorBoard's own reader sees them."""
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    _run(tmp_path / "run", 3, [TensorBoardCallback(tmp_path / "tb")])
    trials = _trials(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == [
        f"trial_{t.id:04d}" for t in trials
    ]
    t = trials[0]
    ea = EventAccumulator(str(tmp_path / "tb" / f"trial_{t.id:04d}")).Reload()
    curve = [(e.step, e.value) for e in ea.Scalars("accuracy")]
    assert curve == [
        (i + 1, pytest.approx(row["accuracy"])) for i, row in enumerate(t.intermediates)
    ]
    assert ea.Scalars("final/accuracy")[-1].value == pytest.approx(t.metrics["accuracy"])
    content = ea.PluginTagToContent("hparams")
    start = next(
        plugin_data_pb2.HParamsPluginData.FromString(v).session_start_info
        for v in content.values()
        if plugin_data_pb2.HParamsPluginData.FromString(v).HasField("session_start_info")
    )
    assert start.hparams["lr"].number_value == pytest.approx(t.arch["lr"])
    assert start.hparams["op"].string_value == t.arch["op"]
    assert json.loads(start.hparams["skip"].string_value) == t.arch["skip"]


@pytest.mark.slow  # MLflow creates its SQLite schema by ~30 migrations per new store
def test_mlflow_callback_logs_children_under_a_parent_and_resumes(tmp_path: Path) -> None:
    """A run file's callbacks setting logs one parent run, one child per trial (params, the
    reported curve by step, final metrics, arch.json); a resume adds to the same parent, and an
    export of the finished run into the same store adds nothing twice."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    spec = [{"type": "mlflow", "tracking_uri": str(store)}]
    _run(tmp_path / "run", 2, spec)
    _run(tmp_path / "run", 3, spec)  # a resume: one more trial, same parent
    assert main(["export", str(tmp_path / "run"), "--to", "mlflow", str(store)]) == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{store.resolve() / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("nasforge").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    assert parents[0].data.params["strategy"] == "random"
    trials = {str(t.id): t for t in _trials(tmp_path / "run")}
    for child in children:
        t = trials[child.data.tags["nasforge.trial"]]
        assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert child.data.params["lr"] == str(t.arch["lr"])
        history = client.get_metric_history(child.info.run_id, "accuracy")
        steps = sorted((m.step, m.timestamp, m.value) for m in history)
        assert [v for _, _, v in steps] == pytest.approx(
            [row["accuracy"] for row in t.intermediates] + [t.metrics["accuracy"]]
        )
        assert child.data.metrics["params"] == 7.0
        local = client.download_artifacts(child.info.run_id, "arch.json", str(tmp_path))
        assert json.loads(Path(local).read_text()) == t.arch


def test_export_to_tensorboard_writes_every_trial(tmp_path: Path, capsys) -> None:
    """``nasforge export DIR --to tensorboard PATH`` writes a finished run's trials."""
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    _run(tmp_path / "run", 2, [])
    assert main(["export", str(tmp_path / "run"), "--to", "tensorboard", str(tmp_path / "tb")]) == 0
    assert "2 trials written to tensorboard" in capsys.readouterr().out
    assert len(list((tmp_path / "tb").glob("trial_*/events.out.tfevents.*"))) >= 2


def test_a_missing_tracker_package_is_one_line_naming_the_extra(monkeypatch) -> None:
    """Without the package, the callback is refused before anything runs, in one line."""
    real = preflight.importlib.util.find_spec
    monkeypatch.setattr(
        preflight.importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("mlflow", "tensorboard") else real(name, *a),
    )
    for spec, extra in (
        ({"type": "mlflow", "tracking_uri": "x"}, "mlflow"),
        ({"type": "tensorboard", "logdir": "x"}, "tensorboard"),
    ):
        with pytest.raises(ConfigError, match=rf"nasforge\[{extra}\]") as info:
            get_callbacks([spec])
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="type one of"):
        get_callbacks([{"type": "wandb"}])


class _ReadsTensorBoard(BaseCallback):
    """Reads the TensorBoard events of ``logdir/run`` when the run records its first row."""

    def __init__(self, logdir: Path, store_dir: Path) -> None:
        self.logdir, self.store_dir = logdir, store_dir
        self.seen: dict[str, list[tuple[int, float]]] = {}
        self.rows_then = -1

    def on_progress(self, step: int, row) -> None:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        if step != 1:
            return
        acc = EventAccumulator(str(self.logdir / "run"))
        acc.Reload()
        self.seen = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
        with Store.open(self.store_dir) as store:
            self.rows_then = store.n_progress()


def test_a_one_shot_run_writes_tensorboard_events_while_it_trains(tmp_path: Path) -> None:
    """A one-shot search's TensorBoard callback writes each epoch's losses and accuracy as it
    is recorded: read back at epoch 1 of 3, before the run ends, the events hold epoch 1; the
    run's pick reaches the tracker as a trial too."""
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    import torch

    from nasforge.oneshot.runner import OneShotSearch
    from tests.oneshot.test_runner import SPACE

    scope: dict = {}
    exec(compile(SPACE, "space", "exec"), scope)  # the tests' tiny one-shot space and data
    torch.manual_seed(0)
    tb, directory = tmp_path / "tb", tmp_path / "run"
    reader = _ReadsTensorBoard(tb, directory)
    search = OneShotSearch(scope["Net"](), "darts", scope["load"](), directory=directory,
                           progress="off", epochs=3, batch_size=16,
                           callbacks=[TensorBoardCallback(tb), reader])  # fmt: skip
    search.run()
    assert reader.rows_then == 1  # read while the run was at epoch 1 of 3
    assert {"train_loss", "val_loss", "val_acc"} <= set(reader.seen)
    assert [step for step, _ in reader.seen["train_loss"]] == [1]
    with Store.open(directory) as store:
        first = store.progress()[0]
        assert store.config()["callbacks"] == [{"type": "tensorboard", "logdir": str(tb)}]
    assert reader.seen["train_loss"][0][1] == pytest.approx(first["train_loss"], rel=1e-6)
    assert list(tb.glob("trial_*")), "the pick reached TensorBoard as a trial"


def _odd_names(arch: dict, report) -> dict:
    for epoch in range(2):
        report({"top-1 (%)": 10.0 * epoch + arch["lr"]})
    return {"top-1 (%)": 10.0 + arch["lr"]}


def test_mlflow_takes_names_it_would_refuse_and_folders_with_quotes(tmp_path: Path) -> None:
    """A metric named ``top-1 (%)`` (refused by MLflow as it is) is logged as ``top-1 ___``
    under live tracking and by an export, from a run folder whose name holds a quote; a final
    value equal to the last report is logged once; ``mlflow.search_runs`` reads it all."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    import mlflow

    store = tmp_path / "mlruns"
    directory = tmp_path / "it's a run"
    exp = Experiment(_space(), _odd_names, "random", directory=directory, n_trials=2,
                     metric="top-1 (%)", executor="inprocess", progress="off",
                     callbacks=[{"type": "mlflow", "tracking_uri": str(store)}])  # fmt: skip
    exp.run()
    with Store.open(directory) as s:
        assert s.state() == "finished" and not s.notes("tracking")
    assert main(["export", str(directory), "--to", "mlflow", str(tmp_path / "again")]) == 0
    for where in (store, tmp_path / "again"):
        mlflow.set_tracking_uri(f"sqlite:///{where.resolve() / 'mlflow.db'}")
        frame = mlflow.search_runs(experiment_names=["nasforge"])
        children = frame[frame["tags.mlflow.parentRunId"].notna()]
        assert len(frame) == 3 and len(children) == 2
        client = mlflow.tracking.MlflowClient()
        for run_id in children["run_id"]:
            history = client.get_metric_history(run_id, "top-1 ___")
            assert len(history) == 2, history  # two reports; the final value is the last one


def test_exports_to_trackers_refuse_a_file_and_an_empty_run_and_never_duplicate(
    tmp_path: Path, capsys
) -> None:
    """``export --to`` into a path that is a file, or of a run with nothing finished, is one
    line and exit 2; a second TensorBoard export into the same folder writes nothing again."""
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    _run(tmp_path / "run", 2, [])
    (tmp_path / "file").write_text("x")
    assert (
        main(["export", str(tmp_path / "run"), "--to", "tensorboard", str(tmp_path / "file")]) == 2
    )
    with Store.create(
        tmp_path / "empty", {"kind": "x", "objective": {"metric": "a", "mode": "max"}}
    ):
        pass
    assert (
        main(["export", str(tmp_path / "empty"), "--to", "tensorboard", str(tmp_path / "tb0")]) == 2
    )
    tb = tmp_path / "tb"
    counts = []
    for _ in range(2):
        assert main(["export", str(tmp_path / "run"), "--to", "tensorboard", str(tb)]) == 0
        counts.append(len(list(tb.rglob("events.out.tfevents.*"))))
    assert counts[0] >= 2 and counts[1] == counts[0]
