"""The `nasforge serve` command: its safe defaults, and a clear message without the extra."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nasforge.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def test_serve_listens_on_localhost_by_default() -> None:
    """Without --host the dashboard binds to 127.0.0.1 only."""
    args = build_parser().parse_args(["serve", "runs"])
    assert (args.host, args.port, args.dirs) == ("127.0.0.1", 8050, ["runs"])


def test_serve_without_the_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When Dash is not installed, `nasforge serve` exits with 2 and says to install
    nasforge[dashboard]."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "dash" else real(name, *a)
    )
    assert main(["serve", "."]) == 2
    assert "pip install 'nasforge[dashboard]'" in caplog.text


def test_serve_refuses_a_missing_directory(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """A directory that does not exist stops the command with a message naming it."""
    pytest.importorskip("dash")
    assert main(["serve", str(tmp_path / "nope")]) == 2
    assert "nope is not a directory" in caplog.text


def test_the_command_line_imports_no_web_framework() -> None:
    """Building the parser (so `nasforge --help`) imports neither Dash, Flask nor waitress: the
    command line works without the dashboard extra."""
    code = (
        "import sys, nasforge.cli as c; c.build_parser(); "
        "web = ('dash', 'flask', 'plotly', 'waitress'); "
        "print(any(m.split('.')[0] in web for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == "False"
