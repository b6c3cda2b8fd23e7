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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nasforge.errors import ConfigError, StoreError
from nasforge.run.refs import load_script
from nasforge.run.runner import BaseRunner, Objective, get_runner, runner_for_strategy
from nasforge.runtime.devices import check_device

__all__ = [
    "read_run_file",
    "open_run_file",
    "load_run_file",
    "RunFile",
    "resumed_settings",
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


@dataclass(frozen=True)
class RunFile:
    """Returns nothing; a run file read once (:func:`open_run_file`): its settings and the
    runner of its kind, which ``nasforge run FILE`` reads to add the kind's flags and then
    builds the run from (:meth:`build`) without reading the file again."""

    #: the file, resolved
    path: Path
    #: what it holds (:func:`read_run_file`), its ``kind`` taken out
    settings: Mapping[str, Any]
    #: the runner class of its kind
    runner: type[BaseRunner]

    def build(self, **overrides: Any) -> BaseRunner:
        """Returns the runner the file describes, its settings replaced by ``overrides`` (None
        values ignored; :data:`NULL` sets None). Its directory defaults to ``runs/<file
        stem>``.

        Raises:
            ConfigError: a bad setting of the kind.
        """
        settings = dict(self.settings)
        settings.setdefault("directory", str(Path("runs") / self.path.stem))
        return _from_section(self.runner, self.path, settings, _given(overrides))


def _from_section(
    runner: type[BaseRunner], path: Path, settings: dict[str, Any], overrides: dict[str, Any]
) -> BaseRunner:
    """Returns ``runner.from_section`` of a run file's ``settings`` (relative paths start at
    the file's folder).

    Raises:
        ConfigError: a bad setting of the kind (a TypeError of its constructor included).
    """
    try:
        return runner.from_section(
            settings, base=path.parent, source={"file": str(path)}, **overrides
        )
    except TypeError as exc:
        raise ConfigError(f"{path}: bad setting for a {runner.kind!r} run: {exc}") from exc


def open_run_file(path: str | Path) -> RunFile:
    """Returns the run file ``path`` read once, with the runner of its kind: its ``kind``, or
    the kind that claims its ``strategy``, or ``multitrial`` (a space and an evaluator).

    Raises:
        ConfigError: see :func:`read_run_file`; no ``kind`` and a ``strategy`` no runner
            accepts (the message suggests the closest names); a ``device`` this machine does
            not have (whatever the kind).
    """
    path = Path(path).resolve()
    settings = read_run_file(path)
    check_device(settings.get("device"), f"{path.name}: device")  # before any kind's checks
    kind = settings.pop("kind", None)
    if kind is not None:
        runner = get_runner(kind)
    elif "strategy" in settings:
        runner = runner_for_strategy(settings["strategy"])
    else:
        runner = get_runner("multitrial")  # a file with a space and an evaluator
    return RunFile(path, settings, runner)


def load_run_file(path: str | Path, **overrides: Any) -> BaseRunner:
    """Returns the runner a run file describes, its settings replaced by ``overrides`` (None
    values ignored; :data:`NULL` sets None). Its directory defaults to ``runs/<file stem>``.

    Raises:
        ConfigError: see :func:`open_run_file` and :meth:`RunFile.build`.
    """
    return open_run_file(path).build(**overrides)


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


def _is_data(value: Any) -> bool:
    """Returns whether ``value`` is plain data (what YAML, TOML or JSON hold), not an object
    of a Python run file."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_data(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_data(v) for k, v in value.items())
    return False


def _names_object(value: Any) -> bool:
    """Returns whether a recorded value stands for an object: a reference that rebuilds it,
    or the description of one that could not be recorded (``{"unrebuildable": ...}``)."""
    return isinstance(value, Mapping) and ("object" in value or "unrebuildable" in value)


def resumed_settings(
    file: Mapping[str, Any], config: Mapping[str, Any], directory: str | Path
) -> dict[str, Any]:
    """Returns what a run started from a run file is rebuilt from to resume: the record's
    section (every setting the run ran with: its file's, those its ``nasforge run`` flags
    and ``--set`` gave, those ``nasforge set`` changed while it ran) and objective, with the
    objects from the file read again (``file``, :func:`read_run_file`'s mapping).

    The file gives what the record does not hold as data: what the record keeps as a
    reference or could not keep (``evaluator``, ``data``), keys the record has not (the
    ``space``, a Python file's functions, settings it never records), and a Python file's
    objects (instances, functions). A setting the record holds as data is the record's: the
    file's own value of it never replaces it. A key the record keeps in another form (a
    one-shot search's settings inside its ``strategy``, the multi-trial objective) is the
    kind's to reconcile: its ``from_section`` lets the record's form win.

    Raises:
        StoreError: the config has no section of its kind or no objective.
    """
    kind = str(config.get("kind"))
    section = config.get(kind)
    if not isinstance(section, Mapping) or not isinstance(config.get("objective"), Mapping):
        raise StoreError(
            f"{directory}: the record's config has no {kind!r} section and objective; it was "
            "not written by a runner of this nasforge, or it is damaged"
        )
    settings = {k: v for k, v in section.items() if not _names_object(v)}
    for key, value in file.items():
        if key != "kind" and (key not in settings or not _is_data(value)):
            settings[key] = value
    settings["objective"] = Objective.from_dict(config["objective"])
    return settings


def rebuild_runner(directory: str | Path | RecordedRun, **overrides: Any) -> BaseRunner:
    """Returns the runner that wrote the run in ``directory``, rebuilt to resume it with the
    settings it ran with (the record's), ``overrides`` replacing them (None values ignored;
    :data:`NULL` sets None). A run started from a run file takes its objects from the file,
    read again (:func:`resumed_settings`); any other from the references its record holds.
    ``directory`` may be what :func:`read_recorded` read, so the record is not opened again.

    Raises:
        StoreError: no readable run there, or a copy of a nasforge 0.1 run (``nasforge
            migrate``), whose evaluator cannot be rebuilt.
        ConfigError: the run cannot be rebuilt (the message says what is missing), its run
            file is gone, or a setting is bad.
    """
    from nasforge.run.migrate import resume_problem

    recorded = directory if isinstance(directory, RecordedRun) else read_recorded(directory)
    directory, config = recorded.directory, recorded.config
    problem = resume_problem(Path(directory), recorded.migrated)
    if problem:
        raise StoreError(problem)
    runner = get_runner(config["kind"])
    overrides = _given(overrides)
    source = config.get("source") or {}
    if set(source) == {"file"}:
        path = Path(source["file"])
        settings = resumed_settings(read_run_file(path), config, directory)
        check_device(settings.get("device"), f"{path.name}: device")
        return _from_section(runner, path, settings, {"directory": str(directory), **overrides})
    return runner.from_record(config, Path(directory), **overrides)
