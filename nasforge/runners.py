"""Loads the built-in kinds of run, so that the runner registry knows them.

The shared floor (:mod:`nasforge.run`) imports no family; this module sits above both and
imports each family's runner module by a fixed name. The command line calls :func:`load`
(every kind before ``nasforge run FILE``, only the run's own kind before ``nasforge resume
DIR``, which keeps a resume from importing families it does not need); a third-party kind
registers itself when its own module is imported. Importing this module also adds
:func:`load` to the registry's loaders (:func:`nasforge.run.runner.add_runner_loader`), so that
reading the registry (``load_run_file``, ``get_runner``, ``runner_for_strategy``) finds every
built-in kind without any other import first.

A kind's own flags of ``nasforge run`` and ``resume`` (its runner's ``add_arguments``) are
added when the parser is built, so ``nasforge run --help`` lists them: :func:`flag_kinds`
loads every built-in kind for those two commands (``run`` loads them all anyway) and, for
any other, only those whose runner modules import no torch (:data:`WITH_FLAGS`), so that
``nasforge status`` does not import torch.
"""

from __future__ import annotations

from collections.abc import Callable

from nasforge.run.runner import BaseRunner, add_runner_loader, get_runner, list_runners

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


add_runner_loader(load)  # the registry loads a built-in kind when it is read for it


#: The built-in kinds whose runner modules import no torch: their flags are on every parser.
WITH_FLAGS: tuple[str, ...] = ("multitrial",)


def flag_kinds(every: bool = False) -> list[type[BaseRunner]]:
    """Returns the runner classes whose flags ``nasforge run`` and ``resume`` take: every
    built-in kind with ``every`` (what ``run`` and ``resume`` parse: all their kinds' flags),
    else the built-in kinds of :data:`WITH_FLAGS` (their modules import no torch, so any other
    command's parser builds quickly); with either, every kind registered already, in the order
    of their kind names."""
    for kind in BUILTIN if every else WITH_FLAGS:
        BUILTIN[kind]()
    return [get_runner(kind) for kind in list_runners()]
