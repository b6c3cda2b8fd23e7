"""Fixtures of the dashboard tests: real runs of each kind, a real ``nasforge serve`` process on
a free 127.0.0.1 port, and one headless Chromium session per module.

Set ``NASFORGE_SCREENSHOTS=docs/img`` to save a screenshot of each page the browser tests
visit (that is how the screenshots of docs/dashboard.md are made).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: seconds a page may take to show what a test waits for
WAIT = 20

SPACE = """
import time
import torch
from torch import nn
import nasforge as nf


class Net(nf.ModelSpace):
    def __init__(self, width: int = 4):
        super().__init__()
        w = nf.choice([2, 4, 8], label="width")
        self.stem = nn.Conv2d(1, w, 3, padding=1)
        self.op = nf.LayerChoice(
            {"conv": lambda: nn.Conv2d(w, w, 3, padding=1),
             "pool": lambda: nn.AvgPool2d(3, 1, 1)},
            label="op",
        )
        self.blocks = nf.Repeat(lambda i: nn.Conv2d(w, w, 1), (1, 3), label="depth")
        self.fc = nn.Linear(w, 10)

    def forward(self, x):
        return self.fc(self.blocks(torch.relu(self.op(self.stem(x)))).mean((2, 3)))


def evaluate(model, report):
    n = sum(p.numel() for p in model.parameters())
    for k in range(1, 4):
        report(k * n / 3000)
    return {"accuracy": (n % 97) / 97, "params": float(n)}


def slow_evaluate(model, report):
    time.sleep(0.4)
    return evaluate(model, report)
"""

MULTITRIAL = (
    "from dash_space import Net, evaluate\nspace = Net()\n"
    "strategy = {'name': 'random', 'seed': 0}\n"
    "config = {'n_trials': 14, 'executor': 'inprocess', 'progress': 'off', 'metric': 'accuracy'}\n"
)
SLOW_MULTITRIAL = MULTITRIAL.replace("Net, evaluate", "Net, slow_evaluate as evaluate").replace(
    "'n_trials': 14", "'n_trials': 12"
)
DARTS = (
    "from kinds_space import Net\nspace = Net()\ndata = 'digits'\nstrategy = 'darts'\n"
    "config = {'epochs': 2, 'batch_size': 128, 'progress': 'off', 'threads': 1}\n"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["NASFORGE_THREADS"] = "1"
    return env


def nasforge(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Returns the finished ``nasforge ARGS`` process (run in ``cwd``); it must exit with 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "nasforge.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def nasforge_together(commands: Sequence[Sequence[str]], cwd: Path) -> None:
    """Returns once every ``nasforge ARGS`` of ``commands`` (run in ``cwd``, all at once: a
    process each, so that a machine's cores share them) exited with 0."""
    logs = [cwd / f"nasforge-{i}.log" for i in range(len(commands))]
    procs = []
    try:
        for args, log in zip(commands, logs):
            with log.open("wb") as out:  # a file, not a pipe: a full pipe would block it
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "nasforge.cli", *args],
                    cwd=cwd, env=_env(), stdout=out, stderr=subprocess.STDOUT,
                ))  # fmt: skip
        for proc, args, log in zip(procs, commands, logs):
            code = proc.wait(timeout=300)
            assert code == 0, f"nasforge {' '.join(args)}:\n{log.read_text()[-3000:]}"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def make_runs(base: Path) -> Path:
    """Returns a folder ``runs`` under ``base`` holding a multi-trial search, a one-shot
    (DARTS) search, a once-for-all run and a pipeline run, each made by ``nasforge run``, plus
    a corrupt run directory."""
    from tests.run.test_kinds import SPACE as KINDS_SPACE
    from tests.run.test_kinds import _ofa_file, _pipeline_file

    (base / "dash_space.py").write_text(SPACE)
    (base / "kinds_space.py").write_text(KINDS_SPACE)  # no width choice: one-shot can mix it
    (base / "multitrial.py").write_text(MULTITRIAL)
    (base / "slow.py").write_text(SLOW_MULTITRIAL)
    (base / "darts.py").write_text(DARTS)
    runs = base / "runs"
    files = {
        "multitrial": base / "multitrial.py",
        "darts": base / "darts.py",
        "ofa": _ofa_file(base),
        "pipeline": _pipeline_file(base),
    }
    nasforge_together([("run", str(f), "--dir", str(runs / name)) for name, f in files.items()],
                      cwd=base)  # fmt: skip
    (runs / "corrupt").mkdir()
    (runs / "corrupt" / "run.db").write_bytes(b"this is not a database")
    return runs


def free_port(host: str = "127.0.0.1") -> int:
    """Returns a TCP port free on ``host`` (a loopback address) now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _limit_data(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


#: the address ``nasforge serve`` prints (with its token, when it asks for one)
PRINTED_URL = re.compile(r"http://\S+")


class Server:
    """A running ``nasforge serve`` process: its base URL and, when it asks for one, the
    token it printed (or was given)."""

    def __init__(
        self,
        dirs: list[Path],
        cwd: Path,
        host: str = "127.0.0.1",
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        memory: int | None = None,
    ) -> None:
        """``memory``: the most bytes of data the server may allocate (RLIMIT_DATA), so that
        a server that would read without bound fails instead of taking the machine's."""
        self.port = free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.log = cwd / f"serve-{host}-{self.port}.log"
        self.token: str | None = None
        self.control: str | None = None  # the control key it printed (--allow-control)
        self.printed = ""  # the address it printed
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "nasforge.cli",
                    "serve",
                    *map(str, dirs),
                    "--host",
                    host,
                    "--port",
                    str(self.port),
                    "--interval",
                    "0.5",
                    *args,
                ],
                cwd=cwd,
                env={**_env(), **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=None if memory is None else lambda: _limit_data(memory),
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"nasforge serve exited:\n{self.output[-3000:]}")
            printed = PRINTED_URL.search(self.output)
            if printed:
                self.printed = printed.group(0)
                query = parse_qs(urlsplit(self.printed).query)
                self.token = query.get("token", [None])[0]
            key = re.search(r"[?&]control=([\w.~-]+)", self.output)
            self.control = key.group(1) if key else None
            given = list(args)[list(args).index("--token") + 1] if "--token" in args else None
            token = self.token or given or (env or {}).get("NASFORGE_TOKEN")
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            try:
                req = urllib.request.Request(self.url + "/", headers=headers)  # may redirect
                with urllib.request.urlopen(req, timeout=2) as r:
                    # answering can come before the address line reaches the log: wait for
                    # it (and for the control key it carries when control was allowed)
                    if (
                        r.status == 200
                        and self.printed
                        and (self.control or "--allow-control" not in args)
                    ):
                        return
                    time.sleep(0.1)
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"nasforge serve did not answer:\n{self.output[-3000:]}")

    @property
    def output(self) -> str:
        """Returns what the server printed so far (standard output and error)."""
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """Stops the server process (and its group); returns when it is gone."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a folder of real runs of every kind (made once per module)."""
    return make_runs(tmp_path_factory.mktemp("dash"))


@pytest.fixture(scope="module")
def server(runs: Path) -> Iterator[Server]:
    """Returns a ``nasforge serve`` process over the runs folder and a folder that is not a
    run; stopped after the module."""
    other = runs.parent / "not_a_run"
    other.mkdir(exist_ok=True)
    srv = Server([runs, other], runs.parent)
    try:
        yield srv
    finally:
        srv.stop()


def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Returns a headless Chromium driven by Selenium (one per module); skips when Debian's
    ``chromium`` and ``chromium-driver`` are not installed."""
    found = _chromium()
    if found is None:
        pytest.skip(
            "no chromium/chromedriver binary found (apt-get install chromium "
            "chromium-driver); .ci/run installs them"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-gpu",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, check: Callable[[Any], Any], what: str, timeout: float = WAIT) -> Any:
    """Returns the first truthy ``check(driver)`` within ``timeout`` seconds; fails naming
    ``what`` otherwise (exceptions of the check count as not yet)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = check(driver)
            if value:
                return value
        except Exception as exc:  # the page may be re-rendering: try again
            last = exc
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")


def screenshot(driver: Any, name: str) -> None:
    """Saves a screenshot of the page as ``<NASFORGE_SCREENSHOTS>/<name>.png`` when that
    variable is set."""
    folder = os.environ.get("NASFORGE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        time.sleep(0.5)  # let charts finish their transitions
        size = driver.get_window_size()
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(size["width"], min(max(height, 600) + 160, 2200))  # whole page
        time.sleep(0.3)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))
        driver.set_window_size(size["width"], size["height"])
