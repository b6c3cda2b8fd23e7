"""The one-line search API: every algorithm returns a freezable arch and per-epoch history."""

from __future__ import annotations

import logging
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import nasforge as nf
from nasforge.errors import ConfigError
from nasforge.oneshot import search

from ._spaces import tiny_cell_space

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(48, 1, 8, 8, generator=g), torch.randint(0, 3, (48,), generator=g)


@pytest.mark.parametrize(
    "algo, settings",
    [
        ("darts", {}),
        ("nasb", {}),
        ("nasb", {"order": "alternate"}),
        # slow: the hybrid selection scores 200 reference architectures (selection_reference)
        pytest.param("spos", {"cycles": 4, "population": 2}, marks=pytest.mark.slow),
    ],
)
def test_search_returns_freezable_arch(data: tuple, algo: str, settings: dict) -> None:
    """search() gives a valid arch, one history row per epoch with losses and the argmax arch."""
    space = tiny_cell_space()
    rows: list[dict] = []
    result = search(space, algo, data, epochs=2, batch_size=16, on_epoch=rows.append, **settings)
    assert nf.freeze(space, result.arch)(data[0][:2]).shape == (2, 3)
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all({"train_loss", "val_loss", "val_acc", "arch", "arch_id"} <= r.keys() for r in rows)
    if algo != "spos":
        assert rows[-1]["val_loss"] is not None
        # the architecture weights: a strength per candidate of each decision, argmax = arch
        weights = rows[-1]["arch_weights"]
        layer_labels = [k for k, v in result.arch.items() if isinstance(v, str)]
        assert layer_labels and set(layer_labels) <= weights.keys()
        if algo == "darts":
            assert all(abs(sum(w) - 1.0) < 1e-4 for w in weights.values())
    else:
        assert "arch_weights" not in rows[-1]  # SPOS learns no architecture parameters


def test_search_is_deterministic(data: tuple) -> None:
    """The same seed (and the same space weights) gives the same architecture and losses."""
    torch.manual_seed(1)
    a = search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, seed=3)
    torch.manual_seed(1)
    b = search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, seed=3)
    assert a.arch == b.arch and a.history[0]["train_loss"] == b.history[0]["train_loss"]


def test_search_rejects_bad_settings(data: tuple) -> None:
    """Unknown settings, bad orders and malformed data are ConfigErrors."""
    with pytest.raises(ConfigError, match="setting"):
        search(tiny_cell_space(), "darts", data, epochs=1, bogus=1)
    with pytest.raises(ConfigError, match="alternate"):
        search(tiny_cell_space(), "nasb", data, epochs=1, order="sideways")
    with pytest.raises(ConfigError, match="pair"):
        search(tiny_cell_space(), "darts", [1, 2, 3], epochs=1)


@pytest.mark.parametrize("algo", ["darts", "nasb", "spos"])
def test_search_with_repeat_depth_and_explicit_split(data: tuple, algo: str) -> None:
    """A space with a Repeat depth choice searches one-shot; a train/val dict is accepted."""
    from ._spaces import ToySpace

    space = ToySpace()
    split = {"train": (data[0][:32], data[1][:32]), "val": (data[0][32:], data[1][32:])}
    evolution = {"cycles": 3, "population": 2} if algo == "spos" else {}  # SPOS's own settings
    result = search(space, algo, split, epochs=1, batch_size=16, **evolution)
    assert result.arch["depth"] in (1, 2, 3)
    assert nf.freeze(space, result.arch)(data[0][:2]).shape == (2, 3)


def test_search_chooses_threads_and_restores_the_caller_s(
    data: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """search() trains on the library's thread count (NASFORGE_THREADS here, or `threads=`),
    not on whatever torch was left at, gives the caller's count back, and refuses a bad one."""
    seen: list[int] = []
    monkeypatch.setenv("NASFORGE_THREADS", "2")
    torch.set_num_threads(3)
    on_epoch = lambda row: seen.append(torch.get_num_threads())  # noqa: E731
    search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, on_epoch=on_epoch)
    search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, on_epoch=on_epoch, threads=1)
    assert seen == [2, 1]
    assert torch.get_num_threads() == 3
    with pytest.raises(ConfigError, match="threads must be a positive int, got 0"):
        search(tiny_cell_space(), "nasb", data, epochs=1, threads=0)


def test_search_shows_a_line_per_epoch(data: tuple, caplog: pytest.LogCaptureFixture) -> None:
    """Off a terminal search() logs a start line and one line per epoch at INFO on
    `nasforge.oneshot.search` (as runs log progress); `progress="off"` shows none."""
    with caplog.at_level(logging.INFO, logger="nasforge"):
        search(tiny_cell_space(), "nasb", data, epochs=2, batch_size=16, threads=1)
        lines = [r.getMessage() for r in caplog.records if r.name == "nasforge.oneshot.search"]
        assert lines[0] == "nasb: 2 epoch(s) of 2 steps (batch 16) on 1 torch thread(s)"
        assert [ln.split(" | ")[0] for ln in lines[1:]] == ["nasb epoch 1/2", "nasb epoch 2/2"]
        assert all("supernet val acc" in ln and "ETA" in ln for ln in lines[1:])
        caplog.clear()
        search(tiny_cell_space(), "nasb", data, epochs=1, batch_size=16, progress="off")
        assert not [r for r in caplog.records if r.name == "nasforge.oneshot.search"]


SCRIPT = """
import torch
from nasforge.oneshot import search
from tests.oneshot._spaces import tiny_cell_space

g = torch.Generator().manual_seed(0)
X, y = torch.randn(48, 1, 8, 8, generator=g), torch.randint(0, 3, (48,), generator=g)
search(tiny_cell_space(), "nasb", (X, y), epochs=2, batch_size=16)
"""


def test_a_user_at_a_terminal_sees_each_epoch(tmp_path: Path) -> None:
    """Run as a user runs the README's block (at a terminal, logging left unconfigured), a
    search shows its start and each epoch on the terminal."""
    script = tmp_path / "oneshot_block.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), NASFORGE_THREADS="1", COLUMNS="200")
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=env,
                            stdin=child, stdout=child, stderr=child)  # fmt: skip
    os.close(child)
    out, deadline = b"", time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            if select.select([main], [], [], 1.0)[0]:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.decode(errors="replace"))  # no colours
    assert proc.returncode == 0, text[-2000:]
    for shown in ("nasb: 2 epoch(s)", "nasb epoch 1/2", "nasb epoch 2/2"):
        assert shown in text, text[-2000:]


def test_search_refuses_a_gpu_the_machine_lacks(data: tuple, monkeypatch) -> None:
    """device='cuda' where torch sees no GPU, or cuda:N past the last one: one ConfigError line
    before any training (the same check as every other kind of run)."""
    from nasforge.runtime import devices

    monkeypatch.setattr(devices, "visible_gpus", lambda: [])
    with pytest.raises(ConfigError, match="asks for a GPU, but this machine has none"):
        search(tiny_cell_space(), "nasb", data, epochs=1, device="cuda")
    monkeypatch.setattr(devices, "visible_gpus", lambda: [0])
    with pytest.raises(ConfigError, match="asks for GPU 3, but this machine has 1"):
        search(tiny_cell_space(), "darts", data, epochs=1, device="cuda:3")
    with pytest.raises(ConfigError, match="is not a device"):
        search(tiny_cell_space(), "darts", data, epochs=1, device="gpu0")
