"""Shared fixtures of the parallel tests: seeded randomness, the test's live stage processes."""

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _seed() -> None:
    """Seeds Python's random module for every test."""
    random.seed(0)


def stage_pids(parent: int | None = None) -> list[int]:
    """Returns the pids of the live spawned stage processes of ``parent`` (default: this
    process) (Linux /proc).

    multiprocessing's own resource tracker (a child for the parent's lifetime) is not a stage.
    """
    me, out = os.getpid() if parent is None else parent, []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                if b"spawn_main" in (stat.parent / "cmdline").read_bytes():
                    out.append(int(stat.parent.name))
        except OSError:
            continue
    return out


@pytest.fixture
def live_stages() -> Callable[[], list[int]]:
    """The function that lists this test's live stage processes."""
    return stage_pids
