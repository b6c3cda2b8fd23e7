"""The built wheel works on its own: installed (not editable) into a fresh virtual
environment outside the checkout, it searches, reports, exports, loads and serves."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

import nasforge

ROOT = Path(__file__).resolve().parents[1]

RUN_FILE = """\
space: {object: 'nasforge.spaces:DigitsCNN', kwargs: {widths: [4, 8], depths: [1, 2]}}
evaluator: {type: classification, epochs: 1, lr: 0.01}
strategy: {name: random, seed: 0}
n_trials: 3
executor: inprocess
progress: 'off'
"""

LOAD = """\
import sys, torch, nasforge as nf
model = nf.load_model(sys.argv[1])
out = model(torch.zeros(2, 1, 8, 8))
print(nf.__file__, tuple(out.shape))
"""


def _sh(*args: str | Path, cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    """Returns the standard output of the finished command; it must exit with 0."""
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


def _clean_env(venv: Path) -> dict[str, str]:
    """Returns an environment in which only the fresh venv's nasforge can be imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["NASFORGE_THREADS"] = "1"
    env["NASFORGE_TOKEN"] = ""
    return env


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200, url
        return r.read()


@pytest.mark.slow
def test_the_wheel_installs_alone_and_searches_exports_loads_and_serves(tmp_path: Path) -> None:
    """`python -m build` makes a wheel and an sdist; the wheel holds py.typed and the shipped
    data, states this version and no upper bound on any dependency; installed with its
    dashboard extra into a fresh venv (no checkout on the path), `nasforge --help`,
    `--version`, a three-trial run, status, export, load_model and serve all work, and the
    dashboard's scripts are the files of the installed packages."""
    dist = tmp_path / "dist"
    build_env = dict(os.environ, PYTHONPATH="")
    _sh(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=tmp_path, env=build_env)
    (wheel,) = dist.glob("nasforge-*.whl")
    (sdist,) = dist.glob("nasforge-*.tar.gz")
    assert wheel.name.startswith(f"nasforge-{nasforge.__version__}-py3-none-any")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"nasforge-{nasforge.__version__}.dist-info/METADATA").decode()
    assert {"nasforge/py.typed", "nasforge/data/opennmt_toy_ende/src-train.txt"} <= names
    assert f"\nVersion: {nasforge.__version__}\n" in meta
    requires = re.findall(r"^Requires-Dist: ([^;\n]+)", meta, re.M)
    assert any(r.startswith("waitress") for r in requires)
    assert [r for r in requires if "<" in r] == []  # lower bounds only
    with tarfile.open(sdist) as t:
        top = f"nasforge-{nasforge.__version__}/"
        assert {top + "CHANGELOG.md", top + "pyproject.toml", top + "nasforge/_version.py"} <= set(
            t.getnames()
        )

    venv = tmp_path / "venv"
    _sh(sys.executable, "-m", "venv", venv, cwd=tmp_path, env=build_env)
    python = venv / "bin" / "python"
    constraints = ROOT / "constraints.txt"
    _sh(
        python,
        "-m",
        "pip",
        "install",
        "-q",
        "-c",
        constraints,
        f"{wheel}[dashboard]",
        cwd=tmp_path,
        env=build_env,
    )

    work = tmp_path / "work"  # a user's folder: no checkout, no PYTHONPATH
    work.mkdir()
    env = _clean_env(venv)
    nf = venv / "bin" / "nasforge"
    assert "serve" in _sh(nf, "--help", cwd=work, env=env)
    assert _sh(nf, "--version", cwd=work, env=env).strip() == f"nasforge {nasforge.__version__}"
    (work / "search.yaml").write_text(RUN_FILE)
    _sh(nf, "run", "search.yaml", "--dir", "runs/digits", cwd=work, env=env)
    status = _sh(nf, "status", "runs/digits", cwd=work, env=env)
    assert "finished: 3 of 3 trials done" in status
    _sh(nf, "export", "runs/digits", "--out", "exported", cwd=work, env=env)
    (work / "load.py").write_text(LOAD)
    (exported,) = (work / "exported").iterdir()
    where, shape = _sh(python, "load.py", exported, cwd=work, env=env).split(" ", 1)
    assert Path(where).is_relative_to(venv) and shape.strip() == "(2, 10)"

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [nf, "serve", "runs", "--port", str(port)],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url, deadline, page = f"http://127.0.0.1:{port}", time.monotonic() + 60, b""
        while time.monotonic() < deadline and not page:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                page = _get(url + "/")
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        assert b"nasforge dashboard" in page
        scripts = re.findall(rb'src="(/_dash-component-suites/[^"]+\.js)"', page)
        assert scripts
        installed = {}
        for f in (venv / "lib").glob("python*/site-packages/dash/**/*.js"):
            digest = hashlib.sha256(f.read_bytes()).digest()
            installed.setdefault(f.stat().st_size, set()).add(digest)
        for script in scripts:
            body = _get(url + script.decode())
            assert hashlib.sha256(body).digest() in installed.get(len(body), set()), script
        assert _get(url + "/_dash-layout")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
        log.close()
