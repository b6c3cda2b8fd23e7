"""The commands every run shares: ``run``, ``resume``, ``status``, ``export``, ``plot``, and
``migrate`` (a nasforge 0.1 record copied into this format).

They read the record and the runner registry; none of them asks which kind of run it holds.
``run`` and ``resume`` share ``--threads`` and ``--set``; every other flag of theirs is a
kind's own, added by its runner's :meth:`~nasforge.run.runner.BaseRunner.add_arguments`
(``--n-trials`` is the multi-trial kind's) in a group named after the kind. Which kinds add
theirs is the caller's to say (:func:`register`'s ``kinds``): ``nasforge/cli.py`` parses in
two phases, the second with the kind of the run that the first found (:func:`open_target`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from nasforge.errors import ConfigError, NasforgeError
from nasforge.run.deploy import FORMATS
from nasforge.run.files import (
    NULL,
    RecordedRun,
    RunFile,
    open_run_file,
    read_recorded,
    rebuild_runner,
)
from nasforge.run.quantize import QUANTIZE
from nasforge.run.runner import BaseRunner, get_runner, list_runners

__all__ = ["register", "add_run_commands", "open_target", "kind_of", "RUN_COMMANDS"]

log = logging.getLogger("nasforge.run")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    pairs = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set takes KEY=VALUE, got {item!r}")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        # null sets the setting to None (a plain None would read as "not given")
        pairs[key.strip().replace("-", "_")] = NULL if parsed is None else parsed
    # the kinds' own flags (None: not given), then --threads; --set wins over both
    flags = {dest: getattr(args, dest) for dest in getattr(args, "kind_flags", ())}
    return {**flags, "threads": args.threads, **pairs}


def _report(runner: BaseRunner) -> None:
    best = runner.best(1)
    t = best[0] if best else None
    if t is not None and t.metrics is not None:  # a ranked trial has metrics
        log.info(
            "best trial %d: %s = %.6g, arch %s",
            t.id,
            runner.objective.metric,
            t.metrics[runner.objective.metric],
            json.dumps(t.arch),
        )
    log.info(
        "run recorded in %s; `nasforge status %s` shows it", runner.directory, runner.directory
    )


#: The commands that run a run of some kind: their second phase adds its kind's flags.
RUN_COMMANDS = ("run", "resume")


def open_target(command: str, target: str) -> RunFile | RecordedRun:
    """Returns what ``command`` (``run`` or ``resume``) reads of its ``target`` before the
    kind's flags are parsed, read once: the run file (:func:`~nasforge.run.files.open_run_file`,
    its kind resolved through the registry) or the record
    (:func:`~nasforge.run.files.read_recorded`, its kind's runner loaded).

    Raises:
        ConfigError: a run file that cannot be read or names no known kind; a record of a
            kind no runner has.
        StoreError: no readable run in the directory.
    """
    if command == "run":
        return open_run_file(target)
    recorded = read_recorded(target)
    get_runner(recorded.kind)  # loads the family that wrote it, and only that one
    return recorded


def kind_of(opened: RunFile | RecordedRun) -> type[BaseRunner]:
    """Returns the runner class of what :func:`open_target` read."""
    return opened.runner if isinstance(opened, RunFile) else get_runner(opened.kind)


def _opened(args: argparse.Namespace, target: str) -> Any:
    """Returns what the parser read of ``target`` while it was built (``opened``: a RunFile,
    a RecordedRun, or the NasforgeError reading it raised), or None when it read another."""
    opened, where = getattr(args, "opened", None), getattr(args, "opened_for", None)
    if opened is None or where != target:
        return None
    if isinstance(opened, NasforgeError):
        raise opened
    return opened


def _local_job(args: argparse.Namespace) -> int | None:
    """Returns the exit code of the ``--nproc N`` job this command starts (N ranks of the same
    command on this machine), or None when it runs here (no ``--nproc``, or this process is
    already a rank)."""
    from nasforge.runtime.distributed import from_env, launch_local

    if args.nproc is None or from_env() is not None:
        return None
    if args.nproc == 1:  # one process: this one
        return None
    argv, skip = [], False
    for word in args.argv:  # the same command, less --nproc
        if skip:
            skip = False
        elif word == "--nproc":
            skip = True
        elif not word.startswith("--nproc="):
            argv.append(word)
    return launch_local(args.nproc, argv)


def _cmd_run(args: argparse.Namespace) -> int:
    from nasforge.run.store import is_run
    from nasforge.runtime.distributed import from_env

    job = _local_job(args)
    if job is not None:
        return job
    run_file = _opened(args, args.file) or open_run_file(args.file)
    runner = run_file.build(directory=args.dir, **_overrides(args))
    ranks = from_env()
    if ranks is not None and ranks.restarts and is_run(runner.directory):
        # torchrun restarted the job (a rank died, restarts were left): go on from the record
        log.warning("restart %d of the job: resuming %s", ranks.restarts, runner.directory)
        runner = rebuild_runner(read_recorded(runner.directory), **_overrides(args))
        runner.resume()
    else:
        runner.run()
    if runner.ranks.writer:
        _report(runner)
    return 0


def _cmd_resume(args: argparse.Namespace) -> int:
    job = _local_job(args)
    if job is not None:
        return job
    recorded = _opened(args, args.dir) or read_recorded(args.dir)
    runner = rebuild_runner(recorded, **_overrides(args))
    runner.resume()
    if runner.ranks.writer:
        _report(runner)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from nasforge.run.status import print_status

    print_status(args.dir, args.limit)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from nasforge.run.export import export_top

    if args.to is not None:  # a tracker, not an export folder: every trial, no weights
        from nasforge.run.tracking import export_run

        tracker, path = args.to
        n = export_run(args.dir, tracker, path)
        sys.stdout.write(f"{n} trials written to {tracker} at {path}\n")
        return 0

    example = None
    if args.input_shape:
        import torch

        example = torch.randn(2, *args.input_shape)  # batch 2: torch.export fixes a 1
    formats = args.format or []
    for path in export_top(
        args.dir,
        args.top,
        args.out,
        per=args.per,
        hf=args.hf,
        formats=formats,
        example=example,
        quantize=args.quantize,
    ):
        sys.stdout.write(f"{path}\n")
        if formats:
            deploy = json.loads((path / "arch.json").read_text())["deploy"]
            for fmt, r in deploy.items():
                batch = "dynamic batch" if r["dynamic_batch"] else "fixed batch"
                sys.stdout.write(
                    f"  {r['path']}  {fmt}  max |diff| {r['max_abs_diff']:.2g} "
                    f"<= {r['tolerance']:g}, {batch}\n"
                )
            if args.quantize:
                sys.stdout.write(_quantized_line(json.loads((path / "arch.json").read_text())))
    return 0


def _quantized_line(meta: dict[str, Any]) -> str:
    """Returns the line ``nasforge export --quantize`` prints for an export's int8 model."""
    q = meta["quantized"]
    t, acc = q["latency_ms"], q["accuracy"]
    what = (
        f"accuracy {acc['fp32']:.4f} -> {acc['int8']:.4f} ({acc['change']:+.4f}) on {acc['n']} "
        f"samples of {q['data']}"
        if acc is not None
        else f"no evaluator data: max |diff| from fp32 {q['max_abs_diff']:.2g} on the example"
    )
    return (
        f"  {q['path']}  int8  {what}; onnxruntime {q['threads']} thread: {t['fp32']:.3f} -> "
        f"{t['int8']:.3f} ms ({q['speedup']:.2f}x)\n"
    )


def _shape(text: str) -> tuple[int, ...]:
    """Returns the sizes of ``C,H,W``-style ``text``.

    Raises:
        argparse.ArgumentTypeError: not a comma-separated list of positive ints.
    """
    try:
        sizes = tuple(int(v) for v in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not sizes like 3,32,32")
    return sizes


def _cmd_plot(args: argparse.Namespace) -> int:
    from nasforge.run.plot import plot_run

    sys.stdout.write(f"{plot_run(args.dir, args.out)}\n")
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from nasforge.run.migrate import migrate

    new = migrate(args.old, args.new)
    sys.stdout.write(f"{new}\n")
    log.info("`nasforge status %s` shows the migrated run", new)
    return 0


def _registered() -> list[type[BaseRunner]]:
    """Returns the runner of every kind registered now."""
    return [get_runner(kind) for kind in list_runners()]


def add_run_commands(
    p: argparse.ArgumentParser, kinds: Sequence[type[BaseRunner]] | None = None
) -> list[str]:
    """Returns the settings the kinds' flags override (their ``dest``), after adding to ``p``
    the flags that ``run`` and ``resume`` share (``--threads``, ``--set``) and each kind's own
    (:meth:`~nasforge.run.runner.BaseRunner.add_arguments`, one group per kind; ``kinds``
    defaults to every registered kind).

    Raises:
        ConfigError: a kind adds a flag that another kind or a shared flag has.
    """
    p.add_argument("--threads", type=int, help="torch threads of the training process")
    p.add_argument(
        "--nproc",
        type=int,
        help="train data parallel in N processes on this machine (one-shot and once-for-all "
        "runs; docs/distributed.md); torchrun starts the same command on any topology",
    )
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override any setting (JSON value)"
    )
    dests: list[str] = []
    for cls in _registered() if kinds is None else kinds:
        before = len(p._actions)  # argparse keeps every action, groups' included, in order
        try:
            cls.add_arguments(p.add_argument_group(f"{cls.kind} runs"))
        except argparse.ArgumentError as exc:
            raise ConfigError(f"run kind {cls.kind!r} adds a flag that is taken: {exc}") from exc
        dests += [a.dest for a in p._actions[before:]]
    p.set_defaults(kind_flags=dests)
    return dests


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    kinds: Sequence[type[BaseRunner]] | None = None,
    opened: tuple[str, Any] | None = None,
) -> None:
    """Adds the shared subcommands to the ``nasforge`` parser. ``kinds`` None is the first
    phase of parsing: ``run`` and ``resume`` take only their shared flags, their FILE or DIR
    may be missing and their ``--help`` waits for the second phase, so that
    ``parse_known_args`` finds the command and its run whatever else the line holds. With
    ``kinds`` (the second phase) they take those kinds' flags too, and ``opened`` is
    ``(target, what open_target read of it, or the error it raised)``, which the command
    uses instead of reading its file or record again."""
    first = kinds is None
    where, read = opened if opened is not None else (None, None)
    p = subparsers.add_parser(
        "run", help="run a run file (.py, .yaml, .toml) of any kind", add_help=not first
    )
    p.add_argument(
        "file",
        nargs="?" if first else None,
        help="run file; see docs/architecture.md and each kind's guide",
    )
    p.add_argument("--dir", help="run directory (default runs/<file stem>)")
    add_run_commands(p, kinds or [])
    p.set_defaults(func=_cmd_run, opened=read, opened_for=where)

    p = subparsers.add_parser(
        "resume", help="continue a stopped or crashed run of any kind", add_help=not first
    )
    p.add_argument("dir", nargs="?" if first else None, help="run directory")
    add_run_commands(p, kinds or [])
    p.set_defaults(func=_cmd_resume, opened=read, opened_for=where)

    p = subparsers.add_parser("status", help="state, progress and trials of a run, best first")
    p.add_argument("dir", help="run directory")
    p.add_argument("--limit", type=int, default=20, help="rows per table (default 20)")
    p.set_defaults(func=_cmd_status)

    p = subparsers.add_parser("export", help="export the best architectures with weights")
    p.add_argument("dir", help="run directory")
    p.add_argument("--top", type=int, default=1, help="how many (default 1)")
    p.add_argument("--per", help="the best --top for each value of this metric (e.g. target)")
    p.add_argument("--out", help="output folder (default <dir>/export)")
    p.add_argument(
        "--to",
        nargs=2,
        metavar=("TRACKER", "PATH"),
        help="write every trial to TensorBoard (tensorboard LOGDIR) or MLflow (mlflow "
        "FOLDER_OR_URI) instead of exporting the best",
    )
    p.add_argument(
        "--hf",
        action="store_true",
        help="also save each model for Hugging Face (<folder>/hf: config.json with the "
        "searched sizes and the weights, loaded by from_pretrained)",
    )
    p.add_argument(
        "--format",
        action="append",
        choices=FORMATS,
        help="also write each model as ONNX, TorchScript or a torch.export program, verified "
        "against the PyTorch model (repeat for several; docs/deploy.md)",
    )
    p.add_argument(
        "--quantize",
        choices=QUANTIZE,
        help="also write the ONNX model quantized by onnxruntime (model.int8.onnx), with its "
        "accuracy change and latency gain (needs --format onnx; docs/deploy.md)",
    )
    p.add_argument(
        "--input-shape",
        type=_shape,
        metavar="C,H,W",
        help="the example input --format checks on, without the batch (default: derived)",
    )
    p.set_defaults(func=_cmd_export)

    p = subparsers.add_parser(
        "migrate", help="copy a nasforge 0.1 run (experiment.db) into a new run directory"
    )
    p.add_argument("old", help="directory nasforge 0.1 recorded the run in (only read)")
    p.add_argument("new", help="new or empty directory for the copy")
    p.set_defaults(func=_cmd_migrate)

    p = subparsers.add_parser("plot", help="PNG of progress curves, trials, Pareto front")
    p.add_argument("dir", help="run directory")
    p.add_argument("--out", help="PNG path (default <dir>/plot.png)")
    p.set_defaults(func=_cmd_plot)
