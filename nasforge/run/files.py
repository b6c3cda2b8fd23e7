"""Run files: how ``nasforge run FILE`` turns a file into a runner of the right kind.

A run file is Python (``.py``), YAML (``.yaml``/``.yml``) or TOML (``.toml``). It names the
kind of run with ``kind`` or, when it has none, with ``strategy``: every registered runner says
which strategy or algorithm names it accepts (``evolution`` is a multi-trial strategy, ``nasb``
a one-shot algorithm), so the kind is never guessed. The rest of the file is the kind's
settings; see each kind's documentation (docs/engine.md, docs/oneshot.md, docs/ofa.md,
docs/naspipe.md).

A Python file is imported, not run as ``__main__`` (guard your own ``.run()`` with ``if
__name__ == "__main__"``); its module-level names are the settings (``space``, ``evaluator`` or
a function ``evaluate``, ``strategy``, ``data``, ``kind``), and a dict ``config`` adds more. In
YAML and TOML, objects are ``module:attribute`` references::

    space: mypkg.spaces:Net                          # a class is instantiated
    evaluator: {type: classification, epochs: 3}     # or mypkg.train:evaluate
    strategy: {name: evolution, population_size: 20}
    n_trials: 50
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError, StoreError
from nasforge.run.refs import load_script
from nasforge.run.runner import BaseRunner, get_runner, runner_for_strategy
from nasforge.runtime.devices import check_device

__all__ = [
    "read_run_file",
    "load_run_file",
    "rebuild_runner",
    "read_recorded",
    "RecordedRun",
    "PY_NAMES",
    "NULL",
]

#: Module-level names a Python run file may define (besides ``config``).
PY_NAMES = ("kind", "space", "evaluator", "evaluate", "strategy", "data", "benchmark")


def _read_mapping(path: Path) -> dict[str, Any]:
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10
                import tomli as tomllib

            data = tomllib.loads(text)
    except Exception as exc:  # noqa: BLE001 - a parse error of either format
        raise ConfigError(f"{path} does not parse: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping at top level, got {type(data).__name__}")
    return data


def read_run_file(path: str | Path) -> dict[str, Any]:
    """Returns the settings a run file holds, as one mapping (objects for a Python file).

    Raises:
        ConfigError: no such file, an unknown suffix, or a file that does not parse or import.
    """
    path = Path(path).resolve()
    if path.suffix not in (".py", ".yaml", ".yml", ".toml"):
        raise ConfigError(f"{path}: a run file ends in .py, .yaml, .yml or .toml")
    if not path.exists():
        raise ConfigError(f"run file {path} not found")
    if path.suffix != ".py":
        return _read_mapping(path)
    module = load_script(path)
    settings = {name: getattr(module, name) for name in PY_NAMES if hasattr(module, name)}
    extra = getattr(module, "config", None) or {}
    if not isinstance(extra, dict):
        raise ConfigError(f"{path}: `config` must be a dict, got {type(extra).__name__}")
    clash = sorted(set(extra) & set(settings))
    if clash:
        raise ConfigError(f"{path}: {clash} are given both at module level and in `config`")
    settings.update(extra)
    return settings


class _Null:
    """The type of :data:`NULL`."""

    def __repr__(self) -> str:
        return "NULL"


#: An override that sets a setting to None (``--set stopper=null``), where a plain None
#: means "not given" and is ignored.
NULL = _Null()


def _given(overrides: dict[str, Any]) -> dict[str, Any]:
    """Returns the overrides that were given: None dropped, :data:`NULL` as None."""
    return {k: None if v is NULL else v for k, v in overrides.items() if v is not None}


def load_run_file(
    path: str | Path, *, recorded_kind: str | None = None, **overrides: Any
) -> BaseRunner:
    """Returns the runner a run file describes, its settings replaced by ``overrides`` (None
    values ignored; :data:`NULL` sets None). Its directory defaults to ``runs/<file stem>``.
    ``recorded_kind`` (a resume: the kind the record says wrote the run) is tried first for a
    file that names no kind, so that resuming loads no other family when that kind still
    claims the file's strategy.

    Raises:
        ConfigError: see :func:`read_run_file`; no ``kind`` and a ``strategy`` no runner
            accepts (the message suggests the closest names); a ``device`` this machine does
            not have (whatever the kind); a bad setting of the kind.
    """
    path = Path(path).resolve()
    settings = read_run_file(path)
    check_device(settings.get("device"), f"{path.name}: device")  # before any kind's checks
    kind = settings.pop("kind", None)
    if kind is not None:
        runner = get_runner(kind)
    elif "strategy" in settings:
        recorded = get_runner(recorded_kind) if recorded_kind is not None else None
        if recorded is not None and recorded.claims(settings["strategy"]):
            runner = recorded
        else:
            runner = runner_for_strategy(settings["strategy"])
    else:
        runner = get_runner("multitrial")  # a file with a space and an evaluator
    settings.setdefault("directory", str(Path("runs") / path.stem))
    overrides = _given(overrides)
    try:
        return runner.from_section(
            settings, base=path.parent, source={"file": str(path)}, **overrides
        )
    except TypeError as exc:
        raise ConfigError(f"{path}: bad setting for a {runner.kind!r} run: {exc}") from exc


@dataclass(frozen=True)
class RecordedRun:
    """Returns nothing; what resuming needs from a run's record, read in one visit
    (:func:`read_recorded`): the command line reads it to load the run's kind, then rebuilds
    the runner from it (:func:`rebuild_runner`) without opening the record again."""

    #: the run directory as it was given
    directory: str | Path
    #: the stored run configuration (``{"kind", "objective", <kind>: section, ...}``)
    config: dict[str, Any]
    #: the meta value a ``nasforge migrate`` copy carries (None: not a migrated copy)
    migrated: str | None

    @property
    def kind(self) -> str:
        """Returns the kind of run (the runner that wrote it; "" when the config lacks it)."""
        return str(self.config.get("kind", ""))


def read_recorded(directory: str | Path) -> RecordedRun:
    """Returns what resuming needs from the record in ``directory``, read with one opening.

    Raises:
        StoreError: no readable run there (missing, foreign, corrupted, another format).
    """
    from nasforge.run.migrate import MIGRATED_KEY
    from nasforge.run.store import Store

    with Store.open(directory) as store:
        return RecordedRun(directory, store.config(), store.get_meta(MIGRATED_KEY))


def rebuild_runner(directory: str | Path | RecordedRun, **overrides: Any) -> BaseRunner:
    """Returns the runner that wrote the run in ``directory``, rebuilt to resume it: from its
    run file when it was started from one, else from the references its record holds.
    ``directory`` may be what :func:`read_recorded` read, so the record is not opened again.

    Raises:
        StoreError: no readable run there, or a copy of a nasforge 0.1 run (``nasforge
            migrate``), whose evaluator cannot be rebuilt.
        ConfigError: the run cannot be rebuilt (the message says what is missing).
    """
    from nasforge.run.migrate import resume_problem

    recorded = directory if isinstance(directory, RecordedRun) else read_recorded(directory)
    directory, config = recorded.directory, recorded.config
    problem = resume_problem(Path(directory), recorded.migrated)
    if problem:
        raise StoreError(problem)
    source = config.get("source") or {}
    if set(source) == {"file"}:
        return load_run_file(
            source["file"], directory=str(directory), recorded_kind=config.get("kind"), **overrides
        )
    runner = get_runner(config["kind"])
    overrides = _given(overrides)
    return runner.from_record(config, Path(directory), **overrides)
