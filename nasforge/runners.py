"""Loads the built-in kinds of run, so that the runner registry knows them.

The shared floor (:mod:`nasforge.run`) imports no family; this module sits above both and
imports each family's runner module by a fixed name. The command line calls :func:`load`
(every kind before ``nasforge run FILE``, only the run's own kind before ``nasforge resume
DIR``, which keeps a resume from importing families it does not need); a third-party kind
registers itself when its own module is imported.

A kind's own flags of ``nasforge run`` and ``resume`` (its runner's ``add_arguments``) are
added when the parser is built, so ``nasforge run --help`` lists them: :func:`flag_kinds`
loads the built-in kinds that add flags (:data:`WITH_FLAGS`; their runner modules import no
torch, so building the parser stays quick) and returns them with every kind registered
already.
"""

from __future__ import annotations

from collections.abc import Callable

from nasforge.run.runner import BaseRunner, get_runner, list_runners

__all__ = ["load", "flag_kinds", "BUILTIN", "WITH_FLAGS"]


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


#: The built-in kinds whose runner adds flags of its own to ``nasforge run`` and ``resume``.
WITH_FLAGS: tuple[str, ...] = ("multitrial",)


def flag_kinds() -> list[type[BaseRunner]]:
    """Returns the runner classes whose flags ``nasforge run`` and ``resume`` take: the
    built-in kinds of :data:`WITH_FLAGS` (registered now) and every kind registered already,
    in the order of their kind names."""
    for kind in WITH_FLAGS:
        BUILTIN[kind]()
    return [get_runner(kind) for kind in list_runners()]
