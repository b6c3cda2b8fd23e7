"""``nasforge ofa train | search | status | export``: thin aliases over the ``ofa`` kind of run.

    nasforge ofa train --space compofa --out runs/compofa --full-epochs 2 --shrink-epochs 5
    nasforge ofa search runs/compofa runs/ofa --targets 1.5 2 3 --latency measured
    nasforge ofa export runs/compofa --out runs/compofa/export
    nasforge ofa train --resume runs/compofa     # the same as `nasforge resume runs/compofa`
    nasforge ofa status runs/compofa             # the same as `nasforge status runs/compofa`

``train`` builds an :class:`~nasforge.ofa.runner.OFARun` from flags (a run file with ``kind:
ofa`` does the same through ``nasforge run``); ``search`` records one trial per target in each
run given and draws one PNG of the accuracy-latency fronts of all of them; ``export`` is
``nasforge export RUN --per target``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

__all__ = ["register"]

logger = logging.getLogger(__name__)


def _say(text: str) -> None:
    """Writes one line of command output (the command line's user interface, not logging)."""
    from rich.console import Console

    Console().print(text, highlight=False)


def _train(args: argparse.Namespace) -> int:
    from nasforge.ofa.runner import OFARun, OFARunSettings
    from nasforge.run.files import rebuild_runner

    if args.resume:
        from nasforge.ofa.record import open_ofa_store

        open_ofa_store(args.resume).close()  # an OFA run, or a clear error
        runner = rebuild_runner(args.resume).resume()
    else:
        settings = OFARunSettings(
            data=args.data, plan=args.plan, width_mult=args.width_mult,
            full_epochs=args.full_epochs, shrink_epochs=args.shrink_epochs,
            schedule=args.schedule, n_subnets=args.n_subnets, kd_ratio=args.kd_ratio,
            batch_size=args.batch_size, lr=args.lr, seed=args.seed, threads=args.threads,
            probes=not args.no_probes,
        )  # fmt: skip
        runner = OFARun(args.space, settings, directory=args.out).run()
    assert isinstance(runner, OFARun)  # run() returns self; a resumed run was checked as OFA's
    from nasforge.run.store import Store

    with Store.open(runner.directory) as store:
        last = store.progress(last=1)
    accs = {k: v for k, v in (last[-1] if last else {}).items() if k.startswith("acc_")}
    _say(f"supernet ({runner.net.search_space().size} sub-networks) recorded in "
         f"{runner.directory}" + (f"; last epoch: loss {last[-1]['loss']:.4f}" if last else "")
         + "".join(f", {k} {v:.3f}" for k, v in accs.items()))  # fmt: skip
    return 0


def _search_published(args: argparse.Namespace) -> int:
    from nasforge.errors import ConfigError
    from nasforge.ofa.deploy_runner import OFADeploy, OFADeploySettings
    from nasforge.run.export import export_top

    if not (args.predictor and args.target_ms and args.out):
        raise ConfigError(
            "a search on published artifacts needs --predictor, --target-ms and --out"
        )
    ints = [int(r) for r in args.resolutions.split(",")] if args.resolutions else None
    settings = OFADeploySettings(
        supernet=args.supernet, resolutions=ints, population=args.population,
        generations=500 if args.generations is None else args.generations, seed=args.seed,
        threads=args.threads,
    )  # fmt: skip
    targets = [float(t) for t in args.target_ms.split(",")]
    runner = OFADeploy(args.latency_table, args.predictor, targets, settings,
                       directory=args.out).run()  # fmt: skip
    for t in runner.trials():
        m = t.metrics or {}
        _say(f"target {m.get('target'):g} ms: predicted accuracy {m.get('accuracy'):.4f} at "
             f"{m.get('latency_ms'):.3f} ms")  # fmt: skip
    if args.supernet:
        for d in export_top(runner.directory, 1, per="target"):
            _say(f"exported {d}")
    return 0


def _search(args: argparse.Namespace) -> int:
    from nasforge.errors import ConfigError
    from nasforge.ofa.deploy import load_supernet

    if args.latency_table:
        return _search_published(args)
    if not args.runs or not args.targets:
        raise ConfigError("give run folders and --targets, or --latency-table and --predictor")
    from nasforge.ofa.runner import load_data, open_for_search, search_run
    from nasforge.run.preflight import check_folder
    from nasforge.runtime.threads import set_threads

    png = Path(args.png) if args.png else Path(args.runs[0]) / "front.png"
    check_folder(png.parent, "plot folder")  # before the search, not after it
    set_threads(args.threads)
    nets = {run: load_supernet(run) for run in args.runs}  # fail early on a missing run
    data = load_data(args.data)
    settings = {"targets": args.targets, "latency": args.latency, "accuracy": args.accuracy,
                "n_pairs": args.n_pairs, "population": args.population,
                "generations": args.generations or 20}  # fmt: skip
    fronts = {}
    for run, net in nets.items():
        with open_for_search(run) as store:
            rows = search_run(store, net, settings, data)
        fronts[run] = rows
        for r in rows:
            _say(f"{run} target {r['target']:g}: accuracy {r['accuracy']:.4f} cost {r['cost']:.3f}")
    _plot(fronts, args.latency, png)
    _say(f"front plot written to {png}")
    return 0


def _plot(fronts: dict[str, list[dict[str, Any]]], latency: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nasforge.ofa.evolution import pareto_front
    from nasforge.run.preflight import make_folder

    fig, ax = plt.subplots(figsize=(6, 4))
    for run, rows in fronts.items():
        pts = [(r["cost"], r["accuracy"]) for r in rows]
        keep = pareto_front(pts)
        coupling = rows[0]["coupling"] if rows else "?"
        ax.plot([pts[i][0] for i in keep], [pts[i][1] for i in keep], "o-",
                label=f"{coupling} ({Path(run).name})")  # fmt: skip
    unit = "MMACs" if latency == "flops" else "latency (ms)"
    ax.set_xlabel(unit)
    ax.set_ylabel("accuracy")
    ax.set_title("accuracy vs " + unit)
    ax.grid(alpha=0.3)
    ax.legend()
    make_folder(path.parent, "plot folder")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _status(args: argparse.Namespace) -> int:
    from nasforge.ofa.record import open_ofa_store
    from nasforge.run.status import print_status

    open_ofa_store(args.dir).close()  # an OFA run, or a clear error
    print_status(args.dir)
    return 0


def _export(args: argparse.Namespace) -> int:
    from nasforge.ofa.record import open_ofa_store
    from nasforge.run.export import export_top

    open_ofa_store(args.run).close()  # an OFA run, or a clear error
    for d in export_top(args.run, 1, args.out, per="target"):
        _say(f"exported {d}")
    return 0


def register(subparsers: Any) -> None:
    """Adds ``ofa train``, ``ofa search``, ``ofa status`` and ``ofa export``."""
    ofa = subparsers.add_parser("ofa", help="once-for-all / CompOFA supernets")
    sub = ofa.add_subparsers(dest="ofa_command", metavar="STEP")
    ofa.set_defaults(func=lambda a: (ofa.print_help(), 2)[1])

    t = sub.add_parser("train", help="train an elastic supernet (full net, then shrinking)")
    t.add_argument("--space", choices=("ofa", "compofa", "compofa_ek"), default="compofa")
    where = t.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="new run directory (an experiment store, checkpoints)")
    where.add_argument("--resume", metavar="DIR", help="continue the run recorded in DIR")
    t.add_argument(
        "--plan",
        choices=("small", "mobilenetv3"),
        default="small",
        help="small: 28x28 greyscale plan; mobilenetv3: OFA's ImageNet plan",
    )
    t.add_argument("--width-mult", type=float, default=0.5)
    t.add_argument("--data", default="mnist", help="'mnist' or a torch file {'x','y'}")
    t.add_argument("--full-epochs", type=int, default=2)
    t.add_argument("--shrink-epochs", type=int, default=5)
    t.add_argument("--schedule", choices=("auto", "progressive", "single"), default="auto")
    t.add_argument("--n-subnets", type=int, default=4)
    t.add_argument("--kd-ratio", type=float, default=1.0)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--lr", type=float, default=0.1)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: half the cores)"
    )
    t.add_argument(
        "--no-probes",
        action="store_true",
        help="skip the per-epoch accuracy of the largest and smallest networks",
    )
    t.set_defaults(func=_train)

    s = sub.add_parser("search", help="evolutionary search for a list of targets")
    s.add_argument("runs", nargs="*", help="run folders written by `ofa train`")
    s.add_argument("--targets", type=float, nargs="+", help="latency (ms) or MMACs budgets")
    s.add_argument(
        "--latency-table",
        nargs="+",
        help="published <side>_lookup_table.yaml folder or files: search on once-for-all's "
        "artifacts, no training run",
    )
    s.add_argument("--predictor", help="once-for-all's published acc_predictor.pth")
    s.add_argument("--supernet", help="a published supernet checkpoint, or a trained run")
    s.add_argument("--target-ms", help="comma-separated latency targets, e.g. 20,25,30")
    s.add_argument("--resolutions", help="comma-separated input sides to search, e.g. 160,224")
    s.add_argument("--out", help="run directory of a search on published artifacts")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--latency", choices=("measured", "table", "flops"), default="measured")
    s.add_argument("--accuracy", choices=("auto", "measured", "predictor"), default="auto")
    s.add_argument("--n-pairs", type=int, default=150, help="pairs to fit the predictor")
    s.add_argument("--population", type=int, default=100)
    s.add_argument("--generations", type=int, help="default 20 (500 on published artifacts)")
    s.add_argument("--data", default="mnist")
    s.add_argument("--png", default=None, help="plot path (default: first run/front.png)")
    s.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: half the cores)"
    )
    s.set_defaults(func=_search)

    st = sub.add_parser("status", help="the same as `nasforge status DIR`")
    st.add_argument("dir")
    st.set_defaults(func=_status)

    e = sub.add_parser("export", help="export the best sub-network of each target")
    e.add_argument("run")
    e.add_argument("--out", default=None)
    e.set_defaults(func=_export)
