"""Runs where people already look: TensorBoard and MLflow, live (a callback a run takes) or
afterwards (``nasforge export DIR --to tensorboard|mlflow PATH``).

Every kind of run takes callbacks (``callbacks=[...]`` in Python, ``callbacks:`` in a run
file; the record keeps them, so a resume tracks too). A callback hears four things, in order::

    on_run_start(info)     once per run or resume: directory, name, metric, mode, kind, strategy
    on_progress(step, row) each progress row as the run records it: a one-shot or once-for-all
                           run's epoch, a DARTSformer search's logged step, a pipeline's step
                           (losses, accuracies, the current architecture)
    on_trial_end(trial)    each trial as the run records it (a ``TrialRecord``: its reported
                           values in order, final metrics, architecture, status): a multi-trial
                           search's trials, a one-shot run's scored candidates and its pick
    on_run_end()           once, when the run stops (finished, failed, stopped or interrupted)

The run's store calls them as each row or trial is committed (:meth:`Store.listen
<nasforge.run.store.Store.listen>`), so what a tracker shows is what the record holds. A
trial's reported values reach the engine with its result (a trial in a worker process sends
them when it ends), so a tracker writes them as each trial's result arrives, in trial order of
arrival. A tracker that fails (a full disk, a name its backend refuses) is reported once in the
log and as a run note, and the run goes on without it.

    TensorBoard   ``LOGDIR/run/``: one scalar series per numeric value of the progress rows
                  (step = the row's step); ``LOGDIR/trial_0001/``: one scalar series per
                  reported value (step = the report's position), the final metrics as
                  ``final/<name>``, the architecture as text and as hyperparameters of the
                  ``hparams`` plugin (lists as JSON)
    MLflow        one parent run per nasforge run (found again by its directory on a resume
                  or an export, which skip the trials it holds) with the progress rows' numbers
                  as its metrics (by step), one child run per trial:
                  params = the architecture, metrics = the reported values by step then the
                  final metrics, ``arch.json`` as an artifact. PATH is a tracking URI, or a
                  folder that gets ``mlflow.db`` (SQLite: a local file, no server) and
                  ``artifacts/``; ``mlflow ui --backend-store-uri sqlite:///PATH/mlflow.db``
                  shows it

Both packages are optional extras (``nasforge[tensorboard]``, ``nasforge[mlflow]``); a missing
one is a one-line ConfigError naming the extra, raised before anything runs.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError
from nasforge.run.preflight import require
from nasforge.run.records import TrialRecord

__all__ = [
    "BaseCallback",
    "Trackers",
    "TensorBoardCallback",
    "MLflowCallback",
    "get_callback",
    "get_callbacks",
    "export_run",
    "mlflow_name",
    "TRACKERS",
]

log = logging.getLogger(__name__)


class BaseCallback:
    """Returns nothing; hears a run's start, each recorded trial and the run's end.

    Subclasses override the hooks they need and :meth:`spec` (the plain data that rebuilds
    them, kept in the run's record so that a resume tracks too).
    """

    def check(self) -> None:  # noqa: B027 - optional hook
        """Raises ConfigError when the callback cannot work here (a missing package)."""

    def on_run_start(self, info: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Hears the run start (or resume): ``directory``, ``name``, ``metric``, ``mode``,
        ``kind``, ``strategy``."""

    def on_progress(self, step: int, row: Mapping[str, Any]) -> None:  # noqa: B027 - hook
        """Hears one progress row recorded (an epoch, a logged step) with its ``step``."""

    def on_trial_end(self, trial: TrialRecord) -> None:  # noqa: B027 - optional hook
        """Hears one trial recorded, finished, failed, stopped or cached."""

    def on_run_end(self) -> None:  # noqa: B027 - optional hook
        """Hears the run stop."""

    def spec(self) -> dict[str, Any] | None:
        """Returns the plain data :func:`get_callback` rebuilds this callback from, or None
        when it cannot be rebuilt (it is then not kept in the record)."""
        return None


def _hparam(value: Any) -> Any:
    """Returns an architecture value as a tracker stores it: numbers, strings and bools as
    they are, anything else (lists of inputs, None) as its JSON."""
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value)


#: the characters MLflow accepts in a metric or parameter name (its own rule); any other
#: character becomes ``_`` (``top-1 (%)`` is logged as ``top-1 ___``)
_MLFLOW_NAME = re.compile(r"[^A-Za-z0-9_\-. /]")


def mlflow_name(name: str) -> str:
    """Returns ``name`` as MLflow accepts it: characters other than letters, digits, ``_``,
    ``-``, ``.``, space and ``/`` replaced by ``_``, at most 250 characters."""
    return _MLFLOW_NAME.sub("_", str(name))[:250] or "_"


def _quoted(text: str) -> str | None:
    """Returns ``text`` as a string literal of MLflow's filter language, or None when it holds
    both kinds of quote (the caller then filters in Python)."""
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    return None


def _finite(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    out = {}
    for k, v in (metrics or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[str(k)] = float(v)
    return out


class TensorBoardCallback(BaseCallback):
    """Returns nothing; writes each trial under ``logdir/trial_NNNN`` for TensorBoard (scalars,
    final metrics, the architecture as text and as ``hparams`` plugin hyperparameters).

    Raises:
        ConfigError: (``check``) the ``tensorboard`` package is missing.
    """

    def __init__(self, logdir: str | Path) -> None:
        self.logdir = Path(logdir)
        self._run: Any = None  # the progress rows' writer, opened with the first row
        self._last_step = 0  # the last step written under logdir/run before this session

    def check(self) -> None:
        """Raises ConfigError when ``tensorboard`` is not installed (the extra named)."""
        require("tensorboard", "tensorboard", "the TensorBoard callback")

    def spec(self) -> dict[str, Any]:
        """Returns ``{type: tensorboard, logdir}``."""
        return {"type": "tensorboard", "logdir": str(self.logdir)}

    def on_progress(self, step: int, row: Mapping[str, Any]) -> None:
        """Writes the row's numbers under ``logdir/run`` at ``step``, flushed at once (a step
        at or before the last one written there, by an earlier session or export, is left)."""
        if self._run is None:
            from torch.utils.tensorboard import SummaryWriter

            self._last_step = _last_step(self.logdir / "run")
            self._run = SummaryWriter(str(self.logdir / "run"))
        if step <= self._last_step:
            return
        for name, value in _finite(row).items():
            if name != "step":
                self._run.add_scalar(name, value, step)
        self._run.flush()

    def on_run_end(self) -> None:
        """Closes the run's writer."""
        if self._run is not None:
            self._run.close()
            self._run = None

    def on_trial_end(self, trial: TrialRecord) -> None:
        """Writes the trial's reported values, final metrics and architecture (once: a trial
        whose folder holds events already, from a live run or an earlier export, is left)."""
        from torch.utils.tensorboard import SummaryWriter

        folder = self.logdir / f"trial_{trial.id:04d}"
        if any(folder.glob("events.out.tfevents.*")):
            return
        writer = SummaryWriter(str(folder))
        try:
            for step, row in enumerate(trial.intermediates, start=1):
                for name, value in _finite(row).items():
                    writer.add_scalar(name, value, step)
            arch = {str(k): _hparam(v) for k, v in trial.arch.items()}
            text = json.dumps(trial.arch, sort_keys=True)
            writer.add_text("arch", f"status {trial.status}, arch_id {trial.arch_id}: {text}")
            final = {f"final/{k}": v for k, v in _finite(trial.metrics).items()}
            if final:
                writer.add_hparams(arch, final, run_name=".")
        finally:
            writer.close()


def _last_step(folder: Path) -> int:
    """Returns the last step of the scalars already written in ``folder`` (0: none)."""
    if not any(folder.glob("events.out.tfevents.*")):
        return 0
    from tensorboard.backend.event_processing.event_accumulator import (  # type: ignore[import-untyped]
        EventAccumulator,
    )

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [e.step for tag in acc.Tags().get("scalars", []) for e in acc.Scalars(tag)]
    return max(steps, default=0)


#: the MLflow tag that ties a parent run to the nasforge run directory it records
_RUN_TAG = "nasforge.run_dir"


def _tracking_uri(target: str | Path) -> tuple[str, str | None]:
    """Returns (tracking URI, artifact location or None) for a URI or a local folder."""
    text = str(target)
    if "://" in text or text.startswith("file:"):
        return text, None
    folder = Path(text).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


class MLflowCallback(BaseCallback):
    """Returns nothing; logs a parent MLflow run for the nasforge run and a child run per
    trial (params: the architecture; metrics: reported values by step, then the final ones).

    ``tracking_uri`` is an MLflow tracking URI or a local folder (``mlflow.db`` and
    ``artifacts/`` are made in it); ``experiment`` the MLflow experiment's name.

    Raises:
        ConfigError: (``check``) the ``mlflow`` package is missing.
    """

    def __init__(self, tracking_uri: str | Path, experiment: str = "nasforge") -> None:
        self.tracking_uri, self.experiment = str(tracking_uri), experiment
        self._client: Any = None
        self._experiment_id: str | None = None
        self._parent: str | None = None
        self._logged: set[str | None] = set()

    def check(self) -> None:
        """Raises ConfigError when ``mlflow`` is not installed (the extra named)."""
        require("mlflow", "mlflow", "the MLflow callback")

    def spec(self) -> dict[str, Any]:
        """Returns ``{type: mlflow, tracking_uri, experiment}``."""
        return {"type": "mlflow", "tracking_uri": self.tracking_uri, "experiment": self.experiment}

    def on_run_start(self, info: Mapping[str, Any]) -> None:
        """Opens (or, on a resume, finds again) the parent run of this nasforge run."""
        from mlflow.tracking import MlflowClient

        uri, artifacts = _tracking_uri(self.tracking_uri)
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            experiment_id = found.experiment_id
        else:
            experiment_id = client.create_experiment(self.experiment, artifact_location=artifacts)
        directory = str(Path(str(info.get("directory", ""))).resolve())
        literal = _quoted(directory)
        runs: list[Any]
        if literal is not None:
            runs = client.search_runs(
                [experiment_id], filter_string=f"tags.`{_RUN_TAG}` = {literal}", max_results=1
            )
        else:  # a folder name with both quotes: MLflow's filter cannot say it; compare here
            tagged = client.search_runs([experiment_id], filter_string=f"tags.`{_RUN_TAG}` != ''")
            runs = [r for r in tagged if r.data.tags.get(_RUN_TAG) == directory][:1]
        runs = list(runs)
        if runs:
            parent = runs[0].info.run_id
        else:
            parent = client.create_run(
                experiment_id,
                run_name=str(info.get("name") or Path(directory).name),
                tags={_RUN_TAG: directory, "nasforge.kind": str(info.get("kind", ""))},
            ).info.run_id
            for key in ("metric", "mode", "strategy", "kind"):
                if info.get(key) is not None:
                    client.log_param(parent, key, str(info[key])[:6000])
        self._client, self._experiment_id, self._parent = client, experiment_id, parent
        # trials this parent already holds (a resume, an export after live tracking): skipped
        children = client.search_runs(
            [experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'"
        )
        self._logged = {r.data.tags.get("nasforge.trial") for r in children}

    def on_progress(self, step: int, row: Mapping[str, Any]) -> None:
        """Logs the row's numbers as metrics of the parent run at ``step``."""
        from mlflow.entities import Metric

        if self._client is None or self._parent is None:
            return
        stamp = int(1000 * time.time())
        metrics = [
            Metric(mlflow_name(k), v, stamp, step) for k, v in _finite(row).items() if k != "step"
        ]
        if metrics:
            self._client.log_batch(self._parent, metrics=metrics)

    def on_trial_end(self, trial: TrialRecord) -> None:
        """Logs one child run: params, reported values by step, final metrics, arch.json."""
        from mlflow.entities import Metric, Param

        client = self._client
        assert client is not None and self._parent is not None, "on_run_start comes first"
        if str(trial.id) in self._logged:
            return
        self._logged.add(str(trial.id))
        run = client.create_run(
            self._experiment_id,
            run_name=f"trial {trial.id}",
            tags={
                "mlflow.parentRunId": self._parent,
                "nasforge.trial": str(trial.id),
                "nasforge.arch_id": trial.arch_id,
                "nasforge.status": trial.status,
            },
        )
        rid = run.info.run_id
        stamp = int(1000 * (trial.finished or 0))
        metrics = [
            Metric(mlflow_name(name), value, stamp, step)
            for step, row in enumerate(trial.intermediates, start=1)
            for name, value in _finite(row).items()
        ]
        last = len(trial.intermediates)
        reported = _finite(trial.intermediates[-1]) if trial.intermediates else {}
        # a final metric that is the last report's value is already logged at that step
        metrics += [Metric(mlflow_name(k), v, stamp + 1, last)
                    for k, v in _finite(trial.metrics).items() if reported.get(k) != v]  # fmt: skip
        params = [Param(mlflow_name(k), str(_hparam(v))[:6000]) for k, v in trial.arch.items()]
        client.log_batch(rid, metrics=metrics, params=params)
        client.log_text(rid, json.dumps(trial.arch, indent=1, sort_keys=True), "arch.json")
        status = "FAILED" if trial.status == "failed" else "FINISHED"
        client.set_terminated(rid, status)

    def on_run_end(self) -> None:
        """Closes the parent run."""
        if self._client is not None and self._parent is not None:
            self._client.set_terminated(self._parent, "FINISHED")


class Trackers:
    """Returns nothing; the callbacks of one run, called so that a failing one neither fails
    the run nor keeps the others from hearing it: its first error is logged and recorded as a
    run note (source ``tracking``), and it hears nothing more of this run.

    It is what a run's store calls as each row and trial is committed
    (:meth:`nasforge.run.store.Store.listen`).
    """

    def __init__(self, callbacks: Sequence[BaseCallback], store: Any = None) -> None:
        self.callbacks = list(callbacks)
        self.store = store
        self._failed: set[int] = set()
        if store is not None and self.callbacks:
            store.listen(self)

    def _each(self, hook: str, *args: Any) -> None:
        for i, callback in enumerate(self.callbacks):
            if i in self._failed:
                continue
            try:
                getattr(callback, hook)(*args)
            except Exception as exc:  # noqa: BLE001 - a tracker never fails the run
                self._failed.add(i)
                detail = (f"{type(callback).__name__}.{hook} failed ({type(exc).__name__}: "
                          f"{str(exc)[:300]}); the run goes on without it")  # fmt: skip
                log.warning("%s", detail)
                if self.store is not None:
                    self.store.add_note("tracking", "failed", detail)

    def start(self, info: Mapping[str, Any]) -> None:
        """Tells every callback the run starts (``on_run_start``)."""
        self._each("on_run_start", info)

    def on_progress(self, step: int, row: Mapping[str, Any]) -> None:
        """Tells every callback of a progress row."""
        self._each("on_progress", step, row)

    def on_trial_end(self, trial: TrialRecord) -> None:
        """Tells every callback of a finished trial."""
        self._each("on_trial_end", trial)

    def end(self) -> None:
        """Tells every callback the run ended (``on_run_end``)."""
        self._each("on_run_end")


#: tracker name -> (class, the argument its PATH fills)
TRACKERS: dict[str, tuple[type[BaseCallback], str]] = {
    "tensorboard": (TensorBoardCallback, "logdir"),
    "mlflow": (MLflowCallback, "tracking_uri"),
}


def get_callback(spec: BaseCallback | Mapping[str, Any]) -> BaseCallback:
    """Returns a callback: an object passes through; ``{type: tensorboard, logdir: ...}`` or
    ``{type: mlflow, tracking_uri: ..., experiment: ...}`` builds one.

    Raises:
        ConfigError: an unknown type or bad arguments (the message lists the types).
    """
    if isinstance(spec, BaseCallback):
        return spec
    if not isinstance(spec, Mapping) or spec.get("type") not in TRACKERS:
        raise ConfigError(
            f"a callback is a nasforge BaseCallback or a mapping with type one of "
            f"{sorted(TRACKERS)} (e.g. {{type: tensorboard, logdir: tb}}), got {spec!r}"
        )
    args = {k: v for k, v in spec.items() if k != "type"}
    cls = TRACKERS[str(spec["type"])][0]
    try:
        return cls(**args)
    except TypeError as exc:
        raise ConfigError(f"callback {spec['type']!r}: bad arguments {args}: {exc}") from exc


def get_callbacks(specs: Sequence[Any] | None) -> list[BaseCallback]:
    """Returns the callbacks of a ``callbacks`` setting (None: none), each checked.

    Raises:
        ConfigError: a setting that is not a list, a bad callback, or a missing package.
    """
    if specs is None:
        return []
    if isinstance(specs, (str, Mapping)) or not isinstance(specs, Sequence):
        raise ConfigError(f"callbacks must be a list of callbacks, got {specs!r}")
    out = [get_callback(s) for s in specs]
    for c in out:
        c.check()
    return out


def _strategy_name(strategy: Any) -> str | None:
    """Returns a recorded strategy's name (recorded as a name or as ``{name, config}``)."""
    if isinstance(strategy, Mapping):
        return str(strategy.get("name"))
    return None if strategy is None else str(strategy)


def export_run(directory: str | Path, to: str, path: str | Path) -> int:
    """Returns the number of trials written after replaying a run's record (its progress rows,
    then its trials) into a tracker (``tensorboard`` or ``mlflow``) at ``path``, as its
    callback would have written them live.

    Raises:
        ConfigError: an unknown tracker, or its package is missing.
        StoreError: no readable run in ``directory``.
    """
    from nasforge.errors import StoreError
    from nasforge.run.preflight import check_folder
    from nasforge.run.store import Store

    if to not in TRACKERS:
        raise ConfigError(f"--to {to!r}: expected one of {sorted(TRACKERS)}")
    cls, arg = TRACKERS[to]
    if "://" not in str(path) and not str(path).startswith("file:"):
        check_folder(path, f"the {to} folder")  # a file there: one line, nothing written
    callback = cls(**{arg: path})
    callback.check()
    with Store.open(directory) as store:
        config = store.config()
        trials = [t for t in store.trials() if t.status not in ("running", "interrupted")]
        rows = store.progress()
    if not trials and not rows:
        raise StoreError(
            f"{directory} has no finished trial and no progress row to export yet; `nasforge "
            f"status {directory}` shows how far it got"
        )
    kind = config.get("kind")
    section = config.get(kind) if isinstance(kind, str) else None
    objective = config.get("objective") or {}
    info = {
        "directory": str(Path(directory).resolve()),
        "name": Path(directory).resolve().name,
        "metric": objective.get("metric"),
        "mode": objective.get("mode"),
        "kind": kind,
        "strategy": _strategy_name(section.get("strategy") if section else None),
    }
    callback.on_run_start(info)
    try:
        for row in rows:
            callback.on_progress(int(row["step"]), row)
        for trial in trials:
            callback.on_trial_end(trial)
    finally:
        callback.on_run_end()
    log.info("wrote %d trials of %s to %s %s", len(trials), directory, to, path)
    return len(trials)
