"""Runners: every kind of search behind one small interface, registered by name.

A runner is one kind of run (multi-trial search, one-shot search, once-for-all training,
pipeline training, ...). It is built from plain settings (a run file's mapping, or a stored
config section when resumed), and it runs into a run record (:mod:`nasforge.run.store`). The
lifecycle is the same for every kind and lives here, once::

    runner = SomeRunner(...)          # validates everything, touches nothing on disk
    runner.run()                      # check() what the run needs, create the record (taking
                                      # the writer lock), write the config,
                                      # _execute(store, resume=False), mark finished
    runner.resume()                   # open the record as writer, check it was made by the same
                                      # settings, _execute(store, resume=True), mark finished
    runner.best(k), runner.trials()   # read the record (read-only; the lock is released)

A kind adds behaviour by implementing :meth:`BaseRunner.section` and
:meth:`BaseRunner._execute` (and :meth:`BaseRunner.from_section` so that a run file or a stored
record can build it), and its own command-line flags by :meth:`BaseRunner.add_arguments`,
never by a branch on its name elsewhere. The command line, export,
loaders and the dashboard read the record and do not ask which runner wrote it.

The registry maps a kind to its runner class; each runner also says which strategy or
algorithm names it accepts (:meth:`BaseRunner.names`), so that a run file naming only
``strategy: nasb`` finds the one-shot runner without guessing.
"""

from __future__ import annotations

import abc
import argparse
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from nasforge.errors import ConfigError, StopRequested, StoreError, did_you_mean
from nasforge.run.progress import Progress
from nasforge.run.refs import find_ref, keep_rebuildable
from nasforge.run.requests import Request, check_controls, take_requests
from nasforge.run.results import Objective, rank_trials
from nasforge.run.session import Session
from nasforge.run.store import Store, TrialRecord, check_compatible
from nasforge.run.tracking import BaseCallback, Trackers, get_callbacks
from nasforge.run.trial_logs import RunLog
from nasforge.runtime.distributed import ONE, Ranks, from_env, join, leave

# Objective (nasforge.run.results), find_ref and keep_rebuildable (nasforge.run.refs) and
# did_you_mean (nasforge.errors) are named here too, where the kinds' runners have always
# imported them
__all__ = [
    "BaseRunner",
    "Objective",
    "register_runner",
    "add_runner_loader",
    "get_runner",
    "list_runners",
    "runner_for_strategy",
    "find_ref",
    "keep_rebuildable",
    "did_you_mean",
]

log = logging.getLogger("nasforge.run")

R = TypeVar("R", bound="type[BaseRunner]")

#: kind -> runner class, filled by :func:`register_runner` when a family's runner module loads.
_RUNNERS: dict[str, type[BaseRunner]] = {}

#: Functions that register kinds on demand (``load(kind)``; None: every kind they know), called
#: before the registry is read for what it lacks; :mod:`nasforge.runners` adds the built-in
#: kinds' loader when it is imported, so reading the registry never depends on which family
#: happened to be imported first.
_LOADERS: list[Callable[[str | None], None]] = []


class BaseRunner(abc.ABC):
    """Returns the results of one run of its kind; see the module docstring for the lifecycle.

    Subclasses set ``kind``, call ``super().__init__`` with the objective, directory and
    source, and implement :meth:`section` and :meth:`_execute`.

    Invariants: configuration errors are raised by the constructor, before the record is
    created; only :meth:`run`/:meth:`resume` write, holding the run's writer lock, which is
    released when they return or raise; they leave the run ``finished``, or ``failed`` with
    the error when ``_execute`` raises (a diverged loss, every trial failed, a crash), and
    ``running`` (read as interrupted, resumable) only after Ctrl-C or a kill.
    """

    kind: ClassVar[str] = ""
    #: what a run of this kind can be asked while it runs (keys of
    #: :data:`nasforge.run.requests.CONTROLS`): recorded in the run's meta when it starts,
    #: where ``nasforge stop``/``set`` and the dashboard read it and refuse the rest
    controls: ClassVar[frozenset[str]] = frozenset()
    #: where a stop takes effect, as the run's notes and messages say it (``epoch``, ``step``)
    boundary: ClassVar[str] = "epoch"

    def __init__(
        self,
        objective: Objective,
        directory: str | Path | None,
        source: Mapping[str, Any] | None = None,
        space: Any = None,
        callbacks: Sequence[BaseCallback | Mapping[str, Any]] | None = None,
    ) -> None:
        self.objective = objective
        if directory is None:
            directory = Path("nasforge-runs") / time.strftime(f"{self.kind}-%Y%m%d-%H%M%S")
        self.directory = Path(directory)
        self.source = dict(source) if source else None
        self.space = space
        #: trackers that hear the run live (TensorBoard, MLflow); a missing package is a
        #: ConfigError here, before anything runs
        self.callbacks: list[BaseCallback] = get_callbacks(callbacks)
        check_controls(self.controls, type(self).__name__)
        self.store: Store | None = None  # the writer's store, while run() or resume() runs
        #: ``finish`` or ``cancel`` once a stop was asked of the running run (None: not asked)
        self.stopping: str | None = None
        self._run_log: RunLog | None = None
        #: set by a kind while :meth:`run` runs when the run it started produced nothing worth
        #: keeping and must not block its folder (a misnamed metric found by the first trial):
        #: the record is removed as the run ends, not left failed
        self.discard_record = False
        #: this process's place in a data-parallel job (one process unless started as a rank)
        self.ranks: Ranks = ONE

    # -- what a kind implements ------------------------------------------------------------------
    @classmethod
    def names(cls) -> list[str]:
        """Returns the strategy or algorithm names a run file may give to mean this kind."""
        return []

    @classmethod
    def claims(cls, strategy: object) -> bool:
        """Returns whether a run file's ``strategy`` value (a name, a mapping with ``name``, or
        an object) belongs to this kind."""
        name = strategy.get("name") if isinstance(strategy, Mapping) else strategy
        return isinstance(name, str) and name in cls.names()

    @classmethod
    @abc.abstractmethod
    def from_section(
        cls, settings: Mapping[str, Any], *, base: Path | None = None, **overrides: Any
    ) -> BaseRunner:
        """Returns a runner built from a run file's mapping or a stored config section
        (values may be objects, ``module:attr`` references or stored references); ``base``
        is the folder relative paths and references start from; ``overrides`` (None values
        ignored) replace settings.

        Raises:
            ConfigError: a missing or bad setting.
        """

    @classmethod
    def evaluation_data(cls, section: Mapping[str, Any], limit: int) -> tuple[Any, str] | None:
        """Returns ``((inputs, labels), where they come from)``: at most ``limit`` samples of
        the data a recorded run of this kind scores its models on, rebuilt from its config
        ``section`` (``nasforge export --quantize`` reports the accuracy change on it), or
        None when the record cannot rebuild it (the default)."""
        return None

    @classmethod
    def from_record(
        cls, config: Mapping[str, Any], directory: Path, **overrides: Any
    ) -> BaseRunner:
        """Returns the runner rebuilt from a stored config (its section and references) to
        resume the run in ``directory``.

        Raises:
            ConfigError: something the run needs cannot be rebuilt from the record.
        """
        section = config.get(cls.kind)
        if not isinstance(section, Mapping) or not isinstance(config.get("objective"), Mapping):
            raise StoreError(
                f"{directory}: the record's config has no {cls.kind!r} section and objective; "
                "it was not written by a runner of this nasforge, or it is damaged"
            )
        settings = dict(section)
        if config.get("space") is not None:
            settings["space"] = config["space"]
        settings["objective"] = Objective.from_dict(config["objective"])
        if config.get("callbacks"):  # the trackers, kept beside the section for every kind
            settings["callbacks"] = config["callbacks"]
        return cls.from_section(
            settings, base=None, directory=str(directory), source=config.get("source"), **overrides
        )

    @abc.abstractmethod
    def section(self) -> dict[str, Any]:
        """Returns this kind's config section as JSON-able data (stored under its kind)."""

    @abc.abstractmethod
    def _execute(self, store: Store, resume: bool) -> None:
        """Runs (or, with ``resume``, continues) the search, writing through ``store``."""

    def compatible_keys(self) -> tuple[str, ...]:
        """Returns the keys of the config section that a resume must not change."""
        return ()

    @classmethod  # noqa: B027 - a hook: most kinds add no flags
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """Returns None after adding this kind's own flags of ``nasforge run`` and ``resume`` to
        ``parser`` (the kind's group of options; ``nasforge run --help`` lists them under its
        name). Each flag's ``dest`` is the setting it overrides; a flag not given (None) leaves
        the setting as the run file or the record has it. By default a kind adds none.
        """

    def check(self) -> None:  # noqa: B027 - a hook: most kinds check all in the constructor
        """Returns None when what the settings imply beyond themselves is there: optional
        packages (:func:`nasforge.run.preflight.require`), data files and folders. Called by
        :meth:`run` and :meth:`resume` before the record is created or opened, so a missing
        one leaves nothing behind.

        Raises:
            ConfigError: something the run will need is missing (the message names it and
                the fix).
        """

    # -- steering a running run (nasforge stop / set, the dashboard) ---------------------------
    def apply_request(self, request: Request) -> None:
        """Returns None after applying ``request``, one that this kind's :attr:`controls`
        take (:meth:`poll_requests` refuses the others). The base applies ``stop``: the run
        starts nothing new and stops at its next :attr:`boundary` (:meth:`check_stop`); a
        kind with more controls overrides this and calls it for what it leaves to the base.
        """
        if request.action == "stop":
            self.stopping = request.mode
            self.note(
                "stop",
                f"stop requested: the run stops at the end of this {self.boundary}, keeping "
                f"what is done; `nasforge resume {self.directory}` continues it",
                mode=request.mode,
                via=request.via,
            )

    def poll_requests(self) -> None:
        """Returns None after taking the requests left for this run (oldest first) and
        applying each that its kind declared it takes; any other (a request of a control the
        kind lacks, a file that does not decode) is recorded as ignored and changes nothing."""
        for request in take_requests(self.directory):
            missing = [c for c in request.needs() if c not in self.controls]
            if request.action == "bad" or missing:
                why = request.error or f"a {self.kind} run cannot take {missing}"
                self.note("ignored", f"a request was ignored: {why}", via=request.via)
                continue
            self.apply_request(request)

    def stop_asked(self) -> bool:
        """Returns whether a stop was asked, after applying the requests left for this run:
        what a training loop asks at each :attr:`boundary` (``should_stop=``). In a
        data-parallel job, rank 0 takes the requests and every rank gets its answer, so all
        stop at the same step (every rank must ask at the same boundaries)."""
        if self.ranks.writer:
            self.poll_requests()
        return self.ranks.agree(self.stopping is not None)

    def check_stop(self) -> None:
        """Returns None at a boundary where everything the run did is saved, unless a stop
        was asked (:meth:`stop_asked`).

        Raises:
            StopRequested: a stop was asked; :meth:`run` records the run ``stopped``.
        """
        if self.stop_asked():
            raise StopRequested(f"{self.directory}: stopped on request at a {self.boundary} end")

    def note(self, event: str, detail: str, **data: Any) -> None:
        """Returns None after logging ``detail`` and recording it as a run note (source
        ``control``) that ``nasforge status`` shows."""
        log.warning("%s", detail)
        if self.store is not None:
            self.store.add_note("control", event, detail, **data)

    def progress(self, total: int | None, time_budget: float | None = None,
                 mode: str = "auto") -> Progress:  # fmt: skip
        """Returns a progress display of ``total`` units whose lines also go to the run's own
        log (``nasforge logs DIR``) while :meth:`run` runs."""
        shown = Progress(total, time_budget, mode)
        if self._run_log is not None:
            shown.sink = self._run_log.line
        return shown

    # -- the shared lifecycle --------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Returns the whole run config: kind, objective, the kind's section, references, and
        the trackers that can be rebuilt (so that a resume tracks too)."""
        config: dict[str, Any] = {
            "kind": self.kind,
            "objective": self.objective.to_dict(),
            self.kind: self.section(),
            "space": None if self.space is None else find_ref(self.space),
            "source": self.source,
        }
        specs = [spec for c in self.callbacks if (spec := c.spec()) is not None]
        if specs:
            config["callbacks"] = specs
        return config

    def tracking_info(self) -> dict[str, Any]:
        """Returns what the trackers hear when the run starts: directory, name, metric, mode,
        kind, strategy (a kind that has one overrides :meth:`strategy_name`)."""
        return {"directory": str(self.directory.resolve()), "name": self.directory.resolve().name,
                "metric": self.objective.metric, "mode": self.objective.mode, "kind": self.kind,
                "strategy": self.strategy_name()}  # fmt: skip

    def strategy_name(self) -> str | None:
        """Returns the name of the strategy or algorithm the run uses, if it has one."""
        strategy = getattr(self, "strategy", None)
        return None if strategy is None else str(getattr(strategy, "name", strategy))

    def run(self, resume: bool = False) -> BaseRunner:
        """Returns self after running the search into ``directory`` (with ``resume``: after
        continuing the run recorded there).

        Raises:
            ConfigError: (before anything is written) the directory is a file or lies under
                one, or :meth:`check` finds something the run needs missing.
            StoreError: ``run`` on a directory that already holds a run, or ``resume`` on one
                that is missing, foreign, corrupted, or was made with other settings.
            LockError: another process is writing the directory.
            DivergenceError: a loss became NaN or infinite (the run is recorded failed).
            TrialError: every trial failed (the run is recorded failed).
            ConfigError: the kind found a setting wrong once running (a metric no trial
                reports); when nothing was worth keeping (:attr:`discard_record`) the new
                record is removed, and the folder is as it was.
        """
        ranks = self._join()
        if ranks.distributed and not ranks.writer:
            self._follow_run(ranks, resume)
            return self
        try:
            store = self._open_store(resume)
        except BaseException as exc:  # the other ranks must not wait for a run that never comes
            ranks.broadcast(f"{type(exc).__name__}: {exc}")
            raise
        ranks.broadcast(None)
        self.store, self.stopping, self.discard_record = store, None, False
        self._start(store)
        session = Session(store)
        trackers = Trackers(self.callbacks, store)
        try:
            trackers.start(self.tracking_info())
            self._execute(store, resume)
        except StopRequested:
            store.finish("stopped")
            log.warning("stopped on request; `nasforge resume %s` continues it", self.directory)
        except BaseException as exc:  # a diverged loss, every trial failed, a crash, Ctrl-C
            store.end(exc)
            if not isinstance(exc, Exception):
                log.warning(
                    "interrupted; what finished is saved: `nasforge resume %s` continues it",
                    self.directory,
                )
            raise
        else:
            store.finish("stopped" if self.stopping else "finished")
        finally:
            session.end()
            trackers.end()
            if self._run_log is not None:
                self._run_log.detach()
                self._run_log = None
            self.store = None
            if self.discard_record and not resume:
                store.discard()
            else:
                store.close()
            if ranks.distributed:
                leave()
        return self

    def run_stage(self, store: Store, resume: bool) -> None:
        """Returns None after running (with ``resume``: continuing) this runner's search as
        one stage of another run, into that run's open record ``store``: the composing run
        holds the writer's lock and the lifecycle (state, trackers, log), this one writes its
        progress, trials and notes there. A stop asked of the run reaches the stage through
        this kind's own boundaries: :class:`StopRequested` propagates, or :attr:`stopping`
        says so after a kind that finishes its boundary first (the multi-trial loop). It
        raises what the kind's ``_execute`` raises.
        """
        self.store, self.stopping = store, None
        try:
            self._execute(store, resume)
        finally:
            self.store = None

    # -- data parallel: the ranks of a torchrun (or --nproc) job --------------------------------
    #: whether a run of this kind trains data parallel across the ranks of a job (``torchrun``,
    #: ``nasforge run FILE --nproc N``): rank 0 writes the record, the others train beside it
    #: (:meth:`_follow`); a kind that does not refuses such a job in one line
    data_parallel: ClassVar[bool] = False

    def device(self) -> str:
        """Returns the device the run trains on (``cpu``, ``cuda``): a data-parallel job's
        collectives are gloo's on the CPU, NCCL's on CUDA."""
        return "cpu"

    def _join(self) -> Ranks:
        """Returns the ranks of the job this process was started in (one process when none),
        joined before anything is written.

        Raises:
            ConfigError: the job's rendezvous could not form, or this kind is not data
                parallel and the job has several ranks.
        """
        found = from_env()
        if found is None:
            self.ranks = ONE
            return ONE
        if not self.data_parallel:
            raise ConfigError(
                f"a {self.kind} run does not train data parallel, and this process is rank "
                f"{found.rank} of a job of {found.world}; run it as one process (a multi-trial "
                "search spreads its trials with executor: ray)"
            )
        self.ranks = join(self.device())
        return self.ranks

    def _follow_run(self, ranks: Ranks, resume: bool) -> None:
        """Returns None after this rank (not rank 0) trained its part of the job: it waits for
        rank 0 to open the record (and raises rank 0's error if that failed), then trains
        (:meth:`_follow`); a stop asked of the run ends it at the step rank 0's ends."""
        problem = ranks.broadcast(None)
        try:
            if problem is not None:
                raise ConfigError(f"rank 0 could not start the run: {problem}")
            self._follow(resume)
        except StopRequested:
            pass
        finally:
            leave()

    def _follow(self, resume: bool) -> None:
        """Trains this rank's part of a data-parallel job beside rank 0's :meth:`_execute`
        (same collectives in the same order; no record, no files). A data-parallel kind
        implements it."""
        raise NotImplementedError(f"{type(self).__name__} is not data parallel")

    def _open_store(self, resume: bool) -> Store:
        """Returns the writer's store: a new record after the preflight checks, or the record
        of ``directory`` checked to have been made by these settings (``resume``).

        Raises:
            see :meth:`run`.
        """
        if not resume:
            Store.check_new(self.directory)  # a file there, or a run already: nothing made
        self.check()
        config = self.config()
        if resume:
            store = Store.open(self.directory, readonly=False)
            try:
                stored = store.config()
                if stored.get("kind") != self.kind:
                    raise StoreError(
                        f"{self.directory} holds a {stored.get('kind')!r} run, not a "
                        f"{self.kind!r} one; resume it with `nasforge resume {self.directory}`"
                    )
                keys = self.compatible_keys()
                check_compatible(self.directory, stored[self.kind], config[self.kind], keys)
                config = keep_rebuildable(stored, config)
                store.set_config(config)
            except BaseException:
                store.close()
                raise
            return store
        return Store.create(self.directory, config)

    def _start(self, store: Store) -> None:
        """Returns None after recording what the run takes while it runs (its controls),
        dropping requests left from before it started (a ``stop`` that came as the last
        session ended must not stop this one), and opening the run's log."""
        store.set_controls(self.controls)
        for request in take_requests(self.directory):
            log.info("ignoring a request left from before this run started: %s", request)
        self._run_log = RunLog(self.directory).attach()

    def resume(self) -> BaseRunner:
        """Returns self after continuing the run recorded in ``directory`` (see :meth:`run`)."""
        return self.run(resume=True)

    # -- results ---------------------------------------------------------------------------------
    def trials(self) -> list[TrialRecord]:
        """Returns every trial of the run in id order.

        Raises:
            StoreError: the run has no record yet (call run() first).
        """
        if self.store is not None:
            return self.store.trials()
        with Store.open(self.directory) as store:
            return store.trials()

    def best(self, k: int = 1) -> list[TrialRecord]:
        """Returns the k best feasible trials (one per architecture), best first, after the
        trials the run's kind chose (its picks: a one-shot search's architecture); empty when
        the run has no record yet."""
        o = self.objective
        try:
            if self.store is not None:
                picks = self.store.picks()
                return rank_trials(self.store.trials(), o.metric, o.mode, o.constraints,
                                   picks=picks)[:k]  # fmt: skip
            with Store.open(self.directory) as store:
                # rank on light rows (no architecture, no curves), then read the k in full:
                # a long run's every architecture would dominate the time
                light = store.trials(light=True)
                top = rank_trials(light, o.metric, o.mode, o.constraints, picks=store.picks())
                return [store.trial(t.id) for t in top[:k]]
        except StoreError:
            return []

    # exposed for code written against the 0.1 experiment objects
    @property
    def metric(self) -> str:
        """Returns the name of the optimised metric."""
        return self.objective.metric

    @property
    def mode(self) -> str:
        """Returns ``max`` or ``min``."""
        return self.objective.mode

    @property
    def constraints(self) -> dict[str, list[Any]]:
        """Returns the constraints on metrics."""
        return self.objective.constraints


def register_runner(cls: R) -> R:
    """Returns ``cls`` after registering it under its ``kind`` (a class decorator).

    Raises:
        ConfigError: no kind, or the kind is taken by another class.
    """
    if not cls.kind:
        raise ConfigError(f"{cls.__name__} sets no `kind`; a runner needs a unique kind name")
    other = _RUNNERS.get(cls.kind)
    if other is not None and other is not cls:
        raise ConfigError(f"run kind {cls.kind!r} is taken by {other.__qualname__}")
    _RUNNERS[cls.kind] = cls
    return cls


def add_runner_loader(load: Callable[[str | None], None]) -> None:
    """Returns None after adding ``load`` to the functions that register kinds on demand:
    :func:`get_runner` calls ``load(kind)`` for a kind not registered yet, and
    :func:`runner_for_strategy` calls ``load(None)`` (every kind) before it compares names.
    ``load`` imports the modules that register (by fixed names: the floor imports no family
    itself); adding the same function twice adds it once."""
    if load not in _LOADERS:
        _LOADERS.append(load)


def _load(kind: str | None) -> None:
    """Returns None after every loader has registered ``kind`` (None: all it knows)."""
    for load in list(_LOADERS):
        load(kind)


def list_runners() -> list[str]:
    """Returns the kinds registered now, sorted (loaders are not asked: building the command
    line lists what is loaded without importing every family)."""
    return sorted(_RUNNERS)


def get_runner(kind: str | type[BaseRunner]) -> type[BaseRunner]:
    """Returns the runner class of ``kind`` (classes pass through).

    Raises:
        ConfigError: no runner has that kind (the message lists the kinds and the closest).
    """
    if isinstance(kind, type) and issubclass(kind, BaseRunner):
        return kind
    if kind not in _RUNNERS:
        _load(str(kind))
    if kind in _RUNNERS:
        return _RUNNERS[kind]
    hint = did_you_mean(str(kind), list(_RUNNERS), n=2)
    hint = f"; {hint}" if hint else ""
    raise ConfigError(f"unknown run kind {kind!r}{hint} The kinds are {list_runners()}")


def runner_for_strategy(strategy: object) -> type[BaseRunner]:
    """Returns the runner class whose kind accepts the run file's ``strategy``.

    Raises:
        ConfigError: no runner or several accept it; the message suggests the closest names.
    """
    _load(None)  # every kind: a name is only unknown when no kind there claims it
    found = [cls for cls in _RUNNERS.values() if cls.claims(strategy)]
    if len(found) == 1:
        return found[0]
    name = strategy.get("name") if isinstance(strategy, Mapping) else strategy
    if found:
        raise ConfigError(
            f"strategy {name!r} is known to several kinds ({[c.kind for c in found]}); add "
            "`kind = ...` to the run file to say which"
        )
    every = {n: cls.kind for cls in _RUNNERS.values() for n in cls.names()}
    hint = did_you_mean(str(name), list(every))
    hint = f"{hint} " if hint else ""
    listing = ", ".join(f"{n} ({k})" for n, k in sorted(every.items()))
    raise ConfigError(f"unknown strategy {name!r}; {hint}The known strategies are {listing}")
