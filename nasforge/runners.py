"""Loads the built-in kinds of run, so that the runner registry knows them.

The shared floor (:mod:`nasforge.run`) imports no family; this module sits above both and
imports each family's runner module by a fixed name. The command line calls :func:`load`
(every kind before ``nasforge run FILE``, only the run's own kind before ``nasforge resume
DIR``, which keeps a resume from importing families it does not need); a third-party kind
registers itself when its own module is imported.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["load", "BUILTIN"]


def _multitrial() -> None:
    import nasforge.engine.experiment  # noqa: F401


def _oneshot() -> None:
    import nasforge.oneshot.runner  # noqa: F401


def _dartsformer() -> None:
    import nasforge.oneshot.dartsformer.runner  # noqa: F401


def _ofa() -> None:
    import nasforge.ofa.runner  # noqa: F401


def _ofa_deploy() -> None:
    import nasforge.ofa.deploy_runner  # noqa: F401


def _pipeline() -> None:
    import nasforge.parallel.runner  # noqa: F401


#: kind -> the function that imports (and so registers) its runner.
BUILTIN: dict[str, Callable[[], None]] = {
    "multitrial": _multitrial,
    "oneshot": _oneshot,
    "dartsformer": _dartsformer,
    "ofa": _ofa,
    "ofa-deploy": _ofa_deploy,
    "pipeline": _pipeline,
}


def load(kind: str | None = None) -> None:
    """Registers the runner of ``kind`` (a built-in one), or every built-in runner when
    ``kind`` is None or not built in."""
    if kind in BUILTIN:
        BUILTIN[kind]()
        return
    for fn in BUILTIN.values():
        fn()
