"""Which run directories a dashboard serves, and the one check that keeps it inside them.

``nasforge serve DIR [DIR ...]`` names *roots*: each is a run directory, or a folder whose
children (or grandchildren) are run directories. A run is named in URLs by a *key*: the name
shown for it, its path relative to its root's parent (``runs/digits``), or, where two roots
share a name, ``<root index>/<that path>`` (the form every key had before; such keys still
resolve). :meth:`ServedRuns.resolve` turns a key back into a directory and refuses any key
whose real path (symlinks followed) leaves its root.

Pure file-system logic: no database is opened here (see :mod:`nasforge.dashboard.data`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nasforge.errors import ConfigError, StoreError
from nasforge.run.lock import HOLDER_NAME, LOCK_NAME
from nasforge.run.requests import CONTROL
from nasforge.run.store import DB_NAME, OLD_DB_NAME
from nasforge.run.trial_logs import LOGS

__all__ = ["RunRef", "ServedRuns", "MAX_DEPTH", "ENTRIES"]

#: how deep below a root the dashboard looks for run directories (a root of roots of runs)
MAX_DEPTH = 2
#: the entries of a run folder that the dashboard opens, or that a control request goes
#: through: none may be a link out of the served roots
ENTRIES = (
    DB_NAME,
    DB_NAME + "-wal",
    DB_NAME + "-shm",
    LOCK_NAME,
    HOLDER_NAME,
    CONTROL,
    LOGS,
)


@dataclass(frozen=True)
class RunRef:
    """A run directory found under a served root: its URL key, its path, a problem found
    before opening it (a directory that is not a run) else None, and the name shown for it
    (its path relative to the root's parent)."""

    key: str
    path: Path
    problem: str | None = None
    name: str = ""


def _looks_like_run(path: Path) -> bool:
    """Returns whether ``path`` holds a run database (of this or the old format)."""
    return (path / DB_NAME).exists() or (path / OLD_DB_NAME).exists()


class ServedRuns:
    """Returns the runs under the served roots, and resolves URL keys back to directories.

    Invariants: every path :meth:`resolve` returns lies inside one of the roots (after
    resolving symlinks); the roots never change after construction.
    """

    def __init__(self, roots: Sequence[str | Path]) -> None:
        """Raises:
        ConfigError: no root given, or a root does not exist or is not a directory.
        """
        if not roots:
            raise ConfigError("nasforge serve needs at least one run directory (DIR ...)")
        self.roots: list[Path] = []
        for r in roots:
            p = Path(r).expanduser().resolve()
            if not p.is_dir():
                raise ConfigError(
                    f"{r!s} is not a directory; pass run directories (made by `nasforge run`) "
                    "or folders that hold them"
                )
            self.roots.append(p)

    def _ref(self, index: int, path: Path, problem: str | None = None) -> RunRef:
        """Returns the reference to ``path`` below root ``index``: its name is its path from
        the root's parent; its key is that name unless another root has the same name."""
        root = self.roots[index]
        name = path.relative_to(root.parent).as_posix()
        unique = sum(r.name == root.name for r in self.roots) == 1
        return RunRef(name if unique else f"{index}/{name}", path, problem, name)

    def name_of(self, key: str) -> str:
        """Returns the name shown for the run a key names (the key itself when it names
        none)."""
        head, _, rel = key.partition("/")
        if self._indexed(head, rel):
            return rel
        return key

    def discover(self) -> list[RunRef]:
        """Returns every run directory under the roots, in root order then by path; a root
        that holds no run at all is returned with its ``problem`` set."""
        found: list[RunRef] = []
        for i, root in enumerate(self.roots):
            if _looks_like_run(root):
                found.append(self._ref(i, root, self._refusal(root)))
                continue
            runs = self._below(root, MAX_DEPTH)
            if not runs:
                found.append(
                    self._ref(
                        i,
                        root,
                        f"{root} is not a nasforge run directory and holds none (no {DB_NAME} "
                        f"up to {MAX_DEPTH} levels down); start one with `nasforge run FILE "
                        "--dir DIR`",
                    )
                )
            found.extend(self._ref(i, p, self._refusal(p)) for p in runs)
        return found

    def _below(self, folder: Path, depth: int) -> list[Path]:
        """Returns the run directories below ``folder`` (not itself), ``depth`` levels deep."""
        if depth <= 0:
            return []
        out: list[Path] = []
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            return []
        for child in children:
            if child.is_symlink() and not self._inside(child.resolve()):
                continue  # a link out of the served folders is not followed
            if _looks_like_run(child):
                out.append(child)
            else:
                out.extend(self._below(child, depth - 1))
        return out

    def _inside(self, path: Path) -> bool:
        return any(path == r or path.is_relative_to(r) for r in self.roots)

    def _refusal(self, run: Path) -> str | None:
        """Returns why the run folder ``run`` is refused: the first of its :data:`ENTRIES`
        that is a link leading out of the served roots; None when none is."""
        for name in ENTRIES:
            entry = run / name
            if entry.is_symlink() and not self._inside(entry.resolve()):
                return (
                    f"refused: {entry} is a link out of the served directories; the "
                    "dashboard reads and steers only what lies inside them"
                )
        return None

    def _indexed(self, head: str, rel: str) -> bool:
        """Returns whether a key split at its first ``/`` is of the ``<index>/<name>`` form."""
        if not (head.isascii() and head.isdigit()) or int(head) >= len(self.roots):
            return False
        return rel.split("/", 1)[0] == self.roots[int(head)].name

    def resolve(self, key: str) -> Path:
        """Returns the run directory that URL key ``key`` names: a run's shown name
        (``runs/digits``) or ``<root index>/<shown name>``.

        Raises:
            StoreError: the key is malformed, names no served root, or its real path leaves
                the served root (``..``, an absolute path, a symlink out), or one of the
                run's :data:`ENTRIES` is a link out of the served roots.
        """
        if not isinstance(key, str) or "\0" in key or not key:
            raise StoreError(f"{key!r} is not a run name; pick a run from the overview")
        head, _, rel = key.partition("/")
        if self._indexed(head, rel):
            root = self.roots[int(head)]
        else:
            named = [r for r in self.roots if r.name == head]
            if len(named) != 1:
                raise StoreError(
                    f"{key!r} names no served run; the dashboard serves "
                    f"{', '.join(r.name for r in self.roots)}: pick a run from the overview"
                )
            root, rel = named[0], key
        rel_path = Path(rel)
        if rel_path.is_absolute() or not rel_path.parts:
            raise StoreError(f"{key!r} is not a run path below a served directory")
        # names are relative to the root's parent, and start with the root's own name
        path = (root.parent / rel_path).resolve()
        if not (path == root or path.is_relative_to(root)):
            raise StoreError(
                f"refused: {key!r} lies outside the served directories "
                f"({', '.join(map(str, self.roots))})"
            )
        refusal = self._refusal(path)
        if refusal is not None:
            raise StoreError(refusal)
        return path
