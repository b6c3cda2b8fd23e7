"""Loads the built-in kinds of run, so that the runner registry knows them.

The shared floor (:mod:`nasforge.run`) imports no family; this module sits above both and
imports each family's runner module by a fixed name. The command line loads only the kind
of the run it names (through the registry: ``nasforge resume DIR`` imports no family it does
not need), every kind only to list their flags; a third-party kind
registers itself when its own module is imported. Importing this module also adds
:func:`load` to the registry's loaders (:func:`nasforge.run.runner.add_runner_loader`), so that
reading the registry (``load_run_file``, ``get_runner``, ``runner_for_strategy``) finds every
built-in kind without any other import first.

A kind's own flags of ``nasforge run`` and ``resume`` (its runner's ``add_arguments``) are
added in the command line's second phase, for the kind of the run it names (the registry
loads that kind alone); ``nasforge run --help`` without a file lists every kind's flags
(:func:`every_kind`), and a reading command loads no kind at all.
"""

from __future__ import annotations

from collections.abc import Callable

from nasforge.run.runner import BaseRunner, add_runner_loader, get_runner, list_runners

__all__ = ["load", "every_kind", "BUILTIN"]


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


def _two_stage() -> None:
    import nasforge.twostage.runner  # noqa: F401


#: kind -> the function that imports (and so registers) its runner.
BUILTIN: dict[str, Callable[[], None]] = {
    "multitrial": _multitrial,
    "oneshot": _oneshot,
    "dartsformer": _dartsformer,
    "ofa": _ofa,
    "ofa-deploy": _ofa_deploy,
    "pipeline": _pipeline,
    "two-stage": _two_stage,
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


def every_kind() -> list[type[BaseRunner]]:
    """Returns the runner class of every kind, in the order of their names: every built-in
    kind loaded, and every kind registered already (a third-party one whose module was
    imported first). ``nasforge run --help`` lists their flags."""
    load()
    return [get_runner(kind) for kind in list_runners()]
