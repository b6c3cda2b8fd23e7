"""What a command checks before it writes anything: that a folder it will write into can be
one, and that an optional package a run needs is installed.

A run directory that is a file, an output folder under a file, or a package missing for the
run's settings used to surface mid-run as an ``OSError`` or ``ImportError`` traceback, and in a
run, after the record was created (left ``failed``, so the next ``nasforge run`` there was
refused). These checks turn each into one :class:`~nasforge.errors.ConfigError` naming the
path or package and the fix, raised before the record exists. Pure: no torch.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from nasforge.errors import ConfigError

__all__ = ["check_folder", "make_folder", "folder_entries", "remove_new", "require"]


def check_folder(path: str | Path, what: str) -> Path:
    """Returns ``path`` (as a Path, nothing created) when it is a folder or can be made one:
    neither it nor a folder above it is a file, and the nearest existing one is writable.

    Raises:
        ConfigError: ``path`` or a folder above it is a file, or the nearest existing folder
            is not writable (the message names it and says nothing was written).
    """
    p = Path(path)
    for q in (p, *p.parents):
        if not q.exists():
            continue
        if not q.is_dir():
            where = "is a file" if q == p else f"lies under {q}, which is a file"
            raise ConfigError(
                f"{what} {p} {where}, not a folder; give the path of a folder, new or "
                "existing (nothing was written)"
            )
        if not os.access(q, os.W_OK | os.X_OK):
            raise ConfigError(
                f"{what} {p}: {q} is not writable by this user; give a folder you can write "
                "(nothing was written)"
            )
        break
    return p


def make_folder(path: str | Path, what: str) -> Path:
    """Returns ``path`` after creating it and the folders above it (kept when they exist).

    Raises:
        ConfigError: :func:`check_folder` refuses it, or the operating system does (the
            message gives its reason).
    """
    p = check_folder(path, what)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{what} {p} cannot be created: {exc.strerror or exc}") from exc
    return p


def folder_entries(path: str | Path) -> frozenset[str] | None:
    """Returns the names in folder ``path``, or None when it does not exist (what
    :func:`remove_new` compares with)."""
    p = Path(path)
    return frozenset(os.listdir(p)) if p.is_dir() else None


def remove_new(path: str | Path, before: frozenset[str] | None, last: str = "") -> None:
    """Returns None after removing what appeared in folder ``path`` since ``before`` (its
    :func:`folder_entries` then), a new ``last`` after the rest, and the folder itself when
    ``before`` is None (it did not exist) and it is empty now. Links are removed, never
    followed."""
    p = Path(path)
    new = sorted(set(os.listdir(p)) - (before or frozenset()), key=lambda name: name == last)
    for name in new:
        entry = p / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if before is None:
        try:
            p.rmdir()
        except OSError:  # something else was put there meanwhile: kept
            pass


def require(module: str, extra: str, needed_by: str) -> None:
    """Returns None when the top-level package ``module`` is installed (found without
    importing it, so heavy packages cost nothing here).

    Raises:
        ConfigError: it is missing; the message says what needs it and the extra that
            installs it (``pip install 'nasforge[extra]'``).
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module set to None
        found = False
    if not found:
        raise ConfigError(
            f"{needed_by} needs the {module!r} package, which is not installed: pip install "
            f"'nasforge[{extra}]' (or pip install {module}); nothing was written"
        )
