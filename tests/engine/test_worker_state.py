"""A reused pool worker starts each trial in the process state of a fresh worker: for each kind
of state, a trial changes it and the next trial on the same worker (pool x 1, reuse on) reports
what it sees; what cannot be put back gives the next trial a fresh worker instead."""

from __future__ import annotations

import builtins
import faulthandler
import gc
import importlib
import json
import locale
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from nasforge.engine import worker_state
from nasforge.engine.evaluator import FunctionEvaluator
from nasforge.engine.executor import ProcessPoolExecutor
from nasforge.engine.trial import TrialTask
from nasforge.space.search_space import Decision, SearchSpace


def _may(undo: Callable[[], None], do: Callable[[], None]) -> bool:
    """Returns whether a child of this process may ``undo`` what it did with ``do`` (raise a
    hard resource limit or a priority back: root with the capability for it)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            do()
            undo()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


_OUT: list[Path] = []  # where trials write what they saw (set before the pool forks)
_HELD: list[Any] = []  # what a trial leaves behind on purpose (a file, a thread, memory)


def _resource(name: str, limits: tuple[int, int] | None = None) -> Any:
    import resource

    if limits is not None:
        resource.setrlimit(getattr(resource, name), limits)
    return resource.getrlimit(getattr(resource, name))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _warn_once() -> bool:
    """Returns whether a UserWarning raised from this one place reaches showwarning."""
    shown = []
    saved = warnings.showwarning
    warnings.showwarning = lambda *a, **k: shown.append(a)
    try:
        warnings.warn("nasforge test: shown once per place", UserWarning, stacklevel=1)
    finally:
        warnings.showwarning = saved
    return bool(shown)


def _gone_folder() -> None:
    where = tempfile.mkdtemp()
    os.chdir(where)
    os.rmdir(where)


def _cwd() -> str:
    try:
        return os.getcwd()
    except FileNotFoundError:
        return "(removed)"


def _hoard() -> None:
    _HELD.append(bytearray(b"\1") * (160 << 20))  # 160 MiB, every page touched


def _tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def _children() -> int:
    return len(Path(f"/proc/self/task/{os.getpid()}/children").read_text().split())


def _devnull() -> Any:
    return open(os.devnull, "w")  # noqa: SIM115 - left open on purpose


def _held_file() -> Path:
    return _OUT[0] / "held.txt"


def _holds_file() -> bool:
    """Returns whether one of this process's descriptors is open on :func:`_held_file`."""
    fds = Path("/proc/self/fd")
    return any(_target(fd) == str(_held_file()) for fd in fds.iterdir())


def _target(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:
        return ""


def _redirect_stdin() -> None:
    fd = os.open(_held_file(), os.O_RDONLY | os.O_CREAT)
    os.dup2(fd, 0)
    os.close(fd)


def _set_interop() -> None:
    torch.set_num_interop_threads(torch.get_num_interop_threads() + 1)


def _enter_inference_mode() -> None:
    mode = torch.inference_mode()
    mode.__enter__()
    _HELD.append(mode)


def _new_api_precision() -> None:
    torch.backends.cuda.matmul.fp32_precision = "tf32"


def _import_outside() -> None:
    """Imports a module from a folder the trial puts on sys.path (put back after it)."""
    (_OUT[0] / "nf_outside.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(_OUT[0]))
    importlib.import_module("nf_outside")


#: kind -> (change, observe, what follows: "reset" (same worker) / "replace" (a fresh one) /
#: "nice" or "rlimit" (reset where this process may raise it back, else replaced) /
#: "kept" (the same worker, still changed: the import cache))
KINDS: dict[str, tuple[Callable[[], Any], Callable[[], Any], str]] = {
    "env-added": (
        lambda: os.environ.update(NF_ADDED="1"),
        lambda: os.environ.get("NF_ADDED"),
        "reset",
    ),
    "env-changed": (
        lambda: os.environ.update(NF_KEPT="trial"),
        lambda: os.environ.get("NF_KEPT"),
        "reset",
    ),
    "env-removed": (lambda: os.environ.pop("NF_KEPT"), lambda: os.environ.get("NF_KEPT"), "reset"),
    "time-zone": (
        lambda: (os.environ.update(TZ="NPT-05:45"), time.tzset()),
        lambda: time.localtime(0).tm_gmtoff,
        "reset",
    ),
    "cwd": (lambda: os.chdir(tempfile.gettempdir()), os.getcwd, "reset"),
    "cwd-deleted": (_gone_folder, lambda: _cwd(), "reset"),
    "sys.path": (lambda: sys.path.insert(0, "/nowhere"), lambda: list(sys.path), "reset"),
    "meta-path": (lambda: sys.meta_path.insert(0, object()), lambda: len(sys.meta_path), "reset"),
    "builtins": (
        lambda: setattr(builtins, "print", len) or setattr(builtins, "nf_x", 1),
        lambda: (repr(builtins.print), hasattr(builtins, "nf_x")),
        "reset",
    ),
    "random-seed": (lambda: random.seed(123), random.random, "reset"),
    "numpy-seed": (lambda: np.random.seed(123), lambda: float(np.random.random()), "reset"),
    "numpy-errors": (lambda: np.seterr(all="raise"), np.geterr, "reset"),
    "numpy-print": (
        lambda: np.set_printoptions(precision=2),
        lambda: np.get_printoptions()["precision"],
        "reset",
    ),
    "torch-seed": (
        lambda: torch.manual_seed(123),
        lambda: (torch.initial_seed(), torch.rand(1).item()),
        "reset",
    ),
    "grad-mode": (lambda: torch.set_grad_enabled(False), torch.is_grad_enabled, "reset"),
    "default-dtype": (
        lambda: torch.set_default_dtype(torch.float64),
        torch.get_default_dtype,
        "reset",
    ),
    "default-device": (
        lambda: torch.set_default_device("meta"),
        lambda: torch.empty(1).device,
        "reset",
    ),
    "deterministic": (
        lambda: torch.use_deterministic_algorithms(True, warn_only=True),
        torch.are_deterministic_algorithms_enabled,
        "reset",
    ),
    "anomaly": (lambda: torch.set_anomaly_enabled(True), torch.is_anomaly_enabled, "reset"),
    "autocast": (
        lambda: torch.set_autocast_enabled("cpu", True),
        lambda: torch.is_autocast_enabled("cpu"),
        "reset",
    ),
    "threads": (lambda: torch.set_num_threads(2), torch.get_num_threads, "reset"),
    "cudnn-benchmark": (
        lambda: setattr(torch.backends.cudnn, "benchmark", True),
        lambda: torch.backends.cudnn.benchmark,
        "reset",
    ),
    "cudnn-deterministic": (
        lambda: setattr(torch.backends.cudnn, "deterministic", True),
        lambda: torch.backends.cudnn.deterministic,
        "reset",
    ),
    "mkldnn": (
        lambda: setattr(torch.backends.mkldnn, "enabled", False),
        lambda: torch.backends.mkldnn.enabled,
        "reset",
    ),
    "flash-sdp": (
        lambda: torch.backends.cuda.enable_flash_sdp(False),
        torch.backends.cuda.flash_sdp_enabled,
        "reset",
    ),
    "fp32-precision": (
        _new_api_precision,
        lambda: torch.backends.cuda.matmul.fp32_precision,
        "reset",
    ),
    "matmul-precision": (
        lambda: torch.set_float32_matmul_precision("medium"),
        torch.get_float32_matmul_precision,
        "replace",
    ),
    "root-level": (
        lambda: logging.getLogger().setLevel(7),
        lambda: logging.getLogger().level,
        "reset",
    ),
    "root-handler": (
        lambda: logging.getLogger().addHandler(logging.FileHandler(_OUT[0] / "x.log")),
        lambda: [type(h).__name__ for h in logging.getLogger().handlers],
        "reset",
    ),
    "logger-level": (
        lambda: logging.getLogger("nasforge.engine").setLevel(7),
        lambda: logging.getLogger("nasforge.engine").level,
        "reset",
    ),
    "logging-disable": (
        lambda: logging.disable(logging.CRITICAL),
        lambda: logging.root.manager.disable,
        "reset",
    ),
    "logger-disabled": (
        lambda: setattr(logging.getLogger("nasforge.engine"), "disabled", True),
        lambda: logging.getLogger("nasforge.engine").disabled,
        "reset",
    ),
    **{
        f"signal-{s.name}": (
            lambda s=s: signal.signal(s, lambda *a: None),
            lambda s=s: repr(signal.getsignal(s)),
            "reset",
        )
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGUSR1)
    },
    "signal-mask": (
        lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2}),
        lambda: sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "reset",
    ),
    "alarm": (
        lambda: signal.setitimer(signal.ITIMER_REAL, 100),
        lambda: signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0),
        "reset",
    ),
    "faulthandler-later": (
        lambda: faulthandler.dump_traceback_later(100, exit=True),
        _tasks,
        "reset",
    ),
    "stdout": (lambda: setattr(sys, "stdout", _devnull()), lambda: id(sys.stdout), "reset"),
    "stderr": (lambda: setattr(sys, "stderr", _devnull()), lambda: id(sys.stderr), "reset"),
    "excepthook": (
        lambda: setattr(sys, "excepthook", print),
        lambda: repr(sys.excepthook),
        "reset",
    ),
    "trace": (lambda: sys.settrace(lambda *a: None), lambda: sys.gettrace() is None, "reset"),
    "recursion-limit": (lambda: sys.setrecursionlimit(50_000), sys.getrecursionlimit, "reset"),
    "switch-interval": (lambda: sys.setswitchinterval(0.5), sys.getswitchinterval, "reset"),
    "gc": (
        lambda: (gc.disable(), gc.set_threshold(1)),
        lambda: (gc.isenabled(), gc.get_threshold()),
        "reset",
    ),
    "umask": (lambda: os.umask(0o077), _umask, "reset"),
    "warnings-filters": (
        lambda: warnings.simplefilter("error"),
        lambda: warnings.filters[0][0],
        "reset",
    ),
    "warning-shown": (_warn_once, _warn_once, "reset"),
    "tempdir": (
        lambda: setattr(tempfile, "tempdir", "/nowhere"),
        lambda: tempfile.tempdir,
        "reset",
    ),
    "locale": (
        lambda: locale.setlocale(locale.LC_ALL, "C"),
        lambda: locale.setlocale(locale.LC_ALL),
        "reset",
    ),
    "affinity": (
        lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
        lambda: sorted(os.sched_getaffinity(0)),
        "reset",
    ),
    "nice": (lambda: os.nice(5), lambda: os.getpriority(os.PRIO_PROCESS, 0), "nice"),
    "rlimit-soft": (
        lambda: _resource("RLIMIT_NOFILE", (64, _resource("RLIMIT_NOFILE")[1])),
        lambda: _resource("RLIMIT_NOFILE"),
        "reset",
    ),
    "rlimit-hard": (
        lambda: _resource("RLIMIT_FSIZE", (1 << 40, 1 << 40)),
        lambda: _resource("RLIMIT_FSIZE"),
        "rlimit",
    ),
    "fd-left-open": (lambda: _HELD.append(_held_file().open("w")), _holds_file, "replace"),
    "fd-redirected": (_redirect_stdin, _holds_file, "replace"),
    "thread-left-running": (
        lambda: threading.Thread(target=time.sleep, args=(30,), daemon=True).start(),
        threading.active_count,
        "replace",
    ),
    "child-left-running": (
        lambda: _HELD.append(subprocess.Popen(["cat"], stdin=subprocess.PIPE)),
        _children,
        "replace",
    ),
    "memory-grown": (_hoard, lambda: len(_HELD), "replace"),
    "interop-threads": (_set_interop, torch.get_num_interop_threads, "replace"),
    "inference-mode": (_enter_inference_mode, torch.is_inference_mode_enabled, "replace"),
    "session": (os.setsid, lambda: os.getsid(0), "replace"),
    "cuda": (lambda: torch.cuda.init(), torch.cuda.is_initialized, "replace"),
    "module-outside-path": (_import_outside, lambda: "nf_outside" in sys.modules, "replace"),
    # a standard module nothing else here imports (colorsys came in with rich's palette when
    # other tests ran first, so the trial no longer changed anything)
    "module-on-path": (
        lambda: importlib.import_module("tabnanny"),
        lambda: "tabnanny" in sys.modules,
        "kept",
    ),
}
#: kind -> the part of the process state a worker names when that kind replaces it
#: (``worker_state.PARTS``); "nice" and "rlimit" kinds only where they are not reset
REASONS = {
    "nice": "scheduling priority",
    "rlimit-hard": "resource limits",
    "matmul-precision": "torch's float32 precision",
    "fd-left-open": "file descriptors",
    "fd-redirected": "file descriptors",
    "thread-left-running": "threads",
    "child-left-running": "child processes",
    "memory-grown": "anonymous memory",
    "interop-threads": "torch's inter-op threads",
    "inference-mode": "torch's inference mode",
    "session": "credentials, session and process group",
    "cuda": "CUDA initialised",
    "module-outside-path": "modules imported from outside the import path",
}
#: whether this process may undo the kinds that need a privilege to undo
MAY = {
    "nice": _may(lambda: os.setpriority(os.PRIO_PROCESS, 0, 0), lambda: os.nice(5)),
    "rlimit": _may(
        lambda: _resource("RLIMIT_FSIZE", (-1, -1)),
        lambda: _resource("RLIMIT_FSIZE", (1 << 40,) * 2),
    ),
}
#: kinds whose change is seen through sys.stdout/sys.stderr: run without a trial log, which
#: puts the standard streams back by itself
NO_LOG = {"stdout", "stderr"}


def _trial(arch: dict[str, Any], report: Any) -> float:
    """Changes (``step`` change) or only reports (``observe``) the state of one kind, writing
    what it saw and its pid where the test reads it."""
    kind, step = arch["kind"], arch["step"]
    change, observe, _ = KINDS[kind]
    seen = {"pid": os.getpid(), "before": repr(observe())}
    if step == "change":
        change()
        seen["after"] = repr(observe())
    (_OUT[0] / f"{kind}.{step}.json").write_text(json.dumps(seen))
    return 1.0


class _Replaced(logging.Handler):
    """Returns nothing; keeps trial id -> the reasons the pool logged for replacing that
    trial's worker (``"<part>: <what>; ..."``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.why: dict[int, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if "worker is replaced" in str(record.msg) and isinstance(record.args, tuple):
            self.why[int(record.args[0])] = str(record.args[1])


def _run(kinds: list[str], out: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Returns kind -> step -> what the trial saw (and, for the change, why its worker was
    replaced, if it was), after running each kind's change and observe trials one after the
    other on a pool of one reused worker."""
    _OUT[:] = [out]
    out.chmod(0o777)
    engine, replaced = logging.getLogger("nasforge.engine"), _Replaced()
    level = engine.level
    engine.setLevel(logging.DEBUG)
    engine.addHandler(replaced)
    pool = ProcessPoolExecutor(1)
    pool.start(SearchSpace([Decision("kind", "value", tuple(KINDS))]), FunctionEvaluator(_trial))
    trial, seen = 0, {}
    try:
        for kind in kinds:
            for step in ("change", "observe"):
                trial += 1
                log = None if kind in NO_LOG else str(out / "logs" / f"trial_{trial}.log")
                pool.submit(TrialTask(trial, {"kind": kind, "step": step}, "default", log=log))
                end, results = time.monotonic() + 60, []
                while not results and time.monotonic() < end:
                    results = pool.poll(0.5)
                path = out / f"{kind}.{step}.json"
                got = json.loads(path.read_text()) if path.exists() else {}
                if not results or results[0].status != "done":
                    got["error"] = results[0].error if results else "no result in 60 s"
                if step == "change":
                    got["replaced"] = replaced.why.get(trial, "")
                seen.setdefault(kind, {})[step] = got
    finally:
        pool.shutdown()
        engine.removeHandler(replaced)
        engine.setLevel(level)
    return seen


def _kinds_seen(kinds: list[str], where: Path) -> Any:
    """Returns what :func:`_run` returns, with a test-sized memory bound and an environment
    variable the engine had (for the trials that change or remove one)."""
    saved_limit = worker_state.MEMORY_GROWTH_LIMIT
    # the forked worker reads this bound; a first trial's torch calls take about 70 MiB
    worker_state.MEMORY_GROWTH_LIMIT = 128 << 20
    os.environ["NF_KEPT"] = "engine"
    try:
        return _run(kinds, where)
    finally:
        worker_state.MEMORY_GROWTH_LIMIT = saved_limit
        del os.environ["NF_KEPT"]


#: kinds whose change takes seconds (use_deterministic_algorithms imports torch._inductor)
SLOW = {"deterministic"}
#: kinds that need a GPU, which a forked worker can initialise only where this process has not
GPU = {"cuda"}
NO_GPU = not torch.cuda.is_available() or torch.cuda.is_initialized()


def _marks(kind: str) -> list[Any]:
    """Returns the marks of ``kind``'s test: slow, or gpu (skipped without a usable GPU)."""
    if kind in GPU:
        return [pytest.mark.gpu, pytest.mark.skipif(NO_GPU, reason="needs CUDA, not initialised")]
    return [pytest.mark.slow] if kind in SLOW else []


def _selected(request: Any) -> list[str]:
    """Returns the kinds of the tests this session runs (``-k`` may pick a few), in order."""
    ours = [item for item in request.session.items if item.module is request.module]
    params = [getattr(item, "callspec", None) for item in ours]
    kinds = [c.params["kind"] for c in params if c is not None and "kind" in c.params]
    return [k for k in kinds if k not in GPU or not NO_GPU]


@pytest.fixture(scope="module")
def seen(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every fast kind selected run once, in one pool (one worker while the state is put
    back)."""
    kinds = [k for k in _selected(request) if k not in SLOW]
    return _kinds_seen(kinds, tmp_path_factory.mktemp("kinds"))


@pytest.fixture(scope="module")
def seen_slow(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The slow kinds selected, run as :func:`seen` runs the others."""
    kinds = [k for k in _selected(request) if k in SLOW]
    return _kinds_seen(kinds, tmp_path_factory.mktemp("slow_kinds"))


@pytest.mark.parametrize("kind", [pytest.param(k, marks=_marks(k)) for k in KINDS])
def test_the_next_trial_sees_a_fresh_worker_s_state(request: Any, kind: str) -> None:
    """The trial after one that changed ``kind`` sees it as the changing trial first saw it:
    put back on the same worker, or (what cannot be put back) on a fresh one."""
    seen = request.getfixturevalue("seen_slow" if kind in SLOW else "seen")
    change, observe = seen[kind]["change"], seen[kind]["observe"]
    assert "error" not in change and "error" not in observe, (change, observe)
    assert change["after"] != change["before"], f"the trial did not change {kind}"
    follows = KINDS[kind][2]
    if follows in MAY:
        follows = "reset" if MAY[follows] else "replace"
    assert observe["before"] == change["after" if follows == "kept" else "before"]
    assert (observe["pid"] == change["pid"]) == (follows != "replace"), follows
    # a fresh worker because this kind's part could not be put back, not for another reason
    why = f"{REASONS[kind]}:" if follows == "replace" else ""
    assert (why in change["replaced"]) if why else not change["replaced"], change["replaced"]


#: an engine that has not imported ``{module}``, whose trials import it: the first changes
#: its global state, the second reports what it sees (run in a process of its own)
FIRST_IMPORT = """
import json, os, sys, time
from nasforge.engine.evaluator import FunctionEvaluator
from nasforge.engine.executor import ProcessPoolExecutor
from nasforge.engine.trial import TrialTask

assert "{module}" not in sys.modules
seen = []


def trial(arch, report):
    import {module}

    def state():
        {observe}

    before = state()
    if arch["step"] == "change":
        {change}
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps([os.getpid(), repr(before), repr(state())]) + "\\n")
    return 1.0


pool = ProcessPoolExecutor(1)
pool.start(None, FunctionEvaluator(trial))
for i, step in enumerate(("change", "observe")):
    pool.submit(TrialTask(i + 1, {{"step": step}}, "default"))
    results = []
    while not results:
        results = pool.poll(0.5)
    assert results[0].status == "done", results[0].error
pool.shutdown()
"""


def _first_import(tmp_path: Path, module: str, observe: str, change: str) -> list[Any]:
    """Returns [pid, state before, state after] of the change and the observe trial of
    :data:`FIRST_IMPORT` for ``module``."""
    script, out = tmp_path / "engine.py", tmp_path / "seen.jsonl"
    script.write_text(FIRST_IMPORT.format(module=module, observe=observe, change=change))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, str(script), str(out)], env=env, check=True, timeout=120)
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_numpy_first_imported_by_a_trial_is_put_back_as_imported(tmp_path: Path) -> None:
    """Where the engine never imported NumPy, the trial after one that imported it and seeded
    its global generator and error handling sees them as a fresh import left them."""
    observe = "return float(numpy.random.random()), numpy.geterr()['over']"
    change = "numpy.random.seed(5); numpy.seterr(all='raise')"
    (pid, before, after), (pid2, seen, _) = _first_import(tmp_path, "numpy", observe, change)
    assert after != before and seen == before and pid2 == pid


@pytest.mark.slow
def test_torch_first_imported_by_a_trial_is_put_back_as_imported(tmp_path: Path) -> None:
    """Where the engine never imported torch, the trial after one that imported it and changed
    its generator, grad mode and default dtype sees them as a fresh import left them."""
    observe = "return torch.rand(1).item(), torch.is_grad_enabled(), torch.get_default_dtype()"
    change = "torch.manual_seed(5); torch.set_grad_enabled(False); "
    change += "torch.set_default_dtype(torch.float64)"
    (pid, before, after), (pid2, seen, _) = _first_import(tmp_path, "torch", observe, change)
    assert after != before and seen == before and pid2 == pid
