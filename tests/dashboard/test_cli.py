"""The `nasforge serve` command: its safe defaults, and a clear message without the extra."""

from __future__ import annotations

import importlib.util

import pytest

from nasforge.cli import build_parser, main


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
