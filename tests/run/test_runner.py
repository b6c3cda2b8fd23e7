"""Tests of the runner lifecycle every kind shares: what state each way of ending leaves, and
that check() runs before the record exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nasforge.errors import ConfigError
from nasforge.run.records import TrialOutcome
from nasforge.run.runner import BaseRunner, Objective, register_runner
from nasforge.run.status import summary
from nasforge.run.store import Store


@register_runner
class _Steps(BaseRunner):
    """A kind that records ``steps`` progress rows and a trial; ``fail`` raises that
    exception once, after the first row; ``missing`` makes check() refuse."""

    kind = "test-lifecycle"

    def __init__(self, directory: Any = None, fail: BaseException | None = None,
                 missing: bool = False, source: Any = None) -> None:  # fmt: skip
        self.fail, self.missing = fail, missing
        super().__init__(Objective("accuracy", "max"), directory, source)

    @classmethod
    def from_section(cls, settings: Any, *, base: Path | None = None, **kw: Any) -> _Steps:
        return cls(kw.get("directory"))

    def section(self) -> dict[str, Any]:
        return {}

    def check(self) -> None:
        if self.missing:
            raise ConfigError("the 'nothing' package is missing")

    def _execute(self, store: Store, resume: bool) -> None:
        store.add_progress(1, {"loss": 1.0})
        if self.fail is not None:
            fail, self.fail = self.fail, None
            raise fail
        store.add_progress(2, {"loss": 0.5})
        store.record_trial(
            "a" * 16, {"op": "conv"}, TrialOutcome("done", {"accuracy": 0.9}, evaluation="trained")
        )


def test_a_crash_is_recorded_failed_and_resumes(tmp_path: Path) -> None:
    """An exception that is not a nasforge error (a bug, an OOM) leaves the run ``failed``
    with its type and text (it was left ``running``, read as interrupted); status says that
    resume continues it, and a resume finishes it."""
    run = _Steps(tmp_path / "r", fail=RuntimeError("CUDA out of memory"))
    with pytest.raises(RuntimeError):
        run.run()
    with Store.open(tmp_path / "r") as s:
        assert (s.state(), s.get_meta("error")) == ("failed", "RuntimeError: CUDA out of memory")
        line = summary(s)
    assert "(RuntimeError: CUDA out of memory)" in line
    assert f"after fixing it, `nasforge resume {tmp_path / 'r'}` continues it" in line
    run.resume()
    with Store.open(tmp_path / "r") as s:
        assert (s.state(), s.n_progress(), len(s.trials())) == ("finished", 2, 1)


def test_ctrl_c_leaves_the_run_interrupted(tmp_path: Path) -> None:
    """Ctrl-C leaves the run ``running`` in the record, read as interrupted once the writer
    is gone, so `nasforge resume` continues it, also when it had finished before."""
    with pytest.raises(KeyboardInterrupt):
        _Steps(tmp_path / "r", fail=KeyboardInterrupt()).run()
    with Store.open(tmp_path / "r") as s:
        assert s.state() == "interrupted" and "resume with" in summary(s)
    _Steps(tmp_path / "r").resume()
    with pytest.raises(KeyboardInterrupt):
        _Steps(tmp_path / "r", fail=KeyboardInterrupt()).resume()
    with Store.open(tmp_path / "r") as s:
        assert s.state() == "interrupted"


def test_check_runs_before_the_record_exists(tmp_path: Path) -> None:
    """A runner whose check() refuses leaves no directory (run) and an untouched record
    (resume)."""
    with pytest.raises(ConfigError, match="nothing"):
        _Steps(tmp_path / "new", missing=True).run()
    assert not (tmp_path / "new").exists()
    _Steps(tmp_path / "r").run()
    with pytest.raises(ConfigError, match="nothing"):
        _Steps(tmp_path / "r", missing=True).resume()
    with Store.open(tmp_path / "r") as s:
        assert s.state() == "finished"
