"""PNG plots of any run (matplotlib, Agg backend), drawn from the record alone:

progress    every numeric series of the progress rows against the step (losses,
            accuracies per epoch or step), when the run has progress rows
trials      the metric of every trial with the running best, when it has two or more
            (pruned trials apart, in grey: their value is the rung they were stopped at)
front       the Pareto front, when the objective has a second metric (pruned trials left out)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nasforge.run.preflight import check_folder, make_folder
from nasforge.run.results import pareto_front, score
from nasforge.run.store import Store

__all__ = ["plot_run", "trial_points"]

#: inches: the width of one panel, the height of the figure
_PANEL_WIDTH, _HEIGHT = 6.0, 4.0

#: at most this many trials are drawn as points (the running best uses every trial)
_MAX_POINTS = 2000


def trial_points(trials: list[Any], metric: str, mode: str, cons: Any) -> dict[str, list[Any]]:
    """Returns the trials panel's data: ``x``/``y`` (id, value of each scored trial that was
    not pruned), ``best_x``/``best_y`` (the running best's steps) and ``pruned_x``/
    ``pruned_y`` (pruned trials at the value of the rung they were stopped at)."""
    out: dict[str, list[Any]] = {k: [] for k in ("x", "y", "best_x", "best_y")}
    out["pruned_x"], out["pruned_y"] = [], []
    best: tuple[float, float] | None = None
    for t in trials:
        s = score(t, metric, mode, cons)
        if s is None or t.metrics is None:  # a scored trial has metrics
            continue
        if t.status == "pruned":
            out["pruned_x"].append(t.id)
            out["pruned_y"].append(t.metrics[metric])
            continue
        out["x"].append(t.id)
        out["y"].append(t.metrics[metric])
        if best is None or s > best[0]:
            best = (s, t.metrics[metric])
            out["best_x"].append(t.id)  # the running best's steps: only where it changes
            out["best_y"].append(best[1])
    if out["x"]:
        out["best_x"].append(out["x"][-1])
        out["best_y"].append(out["best_y"][-1])
    return out


def plot_run(directory: str | Path, out: str | Path | None = None) -> Path:
    """Returns the path of the PNG written for the run in ``directory``.

    Raises:
        StoreError: the record cannot be read, or it holds nothing to plot.
        ConfigError: the folder of ``out`` is a file, lies under one, or cannot be made.
    """
    from matplotlib.figure import Figure  # no pyplot: no global state, a faster import

    from nasforge.errors import StoreError

    directory = Path(directory)
    out = Path(out) if out is not None else directory / "plot.png"
    check_folder(out.parent, "plot folder")  # before the work, as the record is read
    with Store.open(directory) as store:
        obj, trials, rows = store.objective(), store.trial_metrics(), store.progress()
    metric, mode, cons, second = obj["metric"], obj["mode"], obj["constraints"], obj["second"]
    # a repeat adds no new point; a trial in flight has none yet
    trials = [t for t in trials if t.status not in ("cached", "running", "interrupted")]
    series: dict[str, tuple[list[int], list[float]]] = {}
    for r in rows:
        for k, v in r.items():
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                xs, ys = series.setdefault(k, ([], []))
                xs.append(r["step"])
                ys.append(float(v))
    series.pop("epoch", None)
    panels = (["progress"] if series else []) + (["trials"] if len(trials) >= 2 else [])
    panels += ["front"] if second and len(trials) >= 2 else []
    if not panels and trials:
        panels = ["trials"]
    if not panels:
        raise StoreError(
            f"{directory} has no progress rows and no finished trial to plot yet; `nasforge "
            f"status {directory}` shows how far it got"
        )
    width = _PANEL_WIDTH * len(panels)
    fig = Figure(figsize=(width, _HEIGHT))
    # fixed margins (in inches, whatever the panel count): tight_layout would draw the whole
    # figure once more only to measure its labels
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.35 / width, bottom=0.55 / _HEIGHT,
                        top=1 - 0.4 / _HEIGHT, wspace=1.15 / (_PANEL_WIDTH - 1.15))  # fmt: skip
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel == "progress":
            for k, (xs, ys) in series.items():
                ax.plot(xs, ys, marker="." if len(xs) < 50 else None, label=k)
            ax.set_xlabel("step")
            ax.set_title(f"{directory.name}: progress ({len(rows)} rows)")
            ax.legend(fontsize="small")
            ax.grid(alpha=0.3)
        elif panel == "trials":
            pts = trial_points(trials, metric, mode, cons)
            xs, ys, bx, by = pts["x"], pts["y"], pts["best_x"], pts["best_y"]
            stride = max(1, -(-len(xs) // _MAX_POINTS))  # a big run: every stride-th is drawn
            label = "trial" if stride == 1 else f"every {stride}th trial"
            ax.scatter(xs[::stride], ys[::stride], s=12, alpha=0.6, label=label)
            ax.step(bx, by, where="post", color="C3", label="running best")
            if pts["pruned_x"]:
                ax.scatter(pts["pruned_x"][::stride], pts["pruned_y"][::stride], s=10,
                           color="lightgrey", label="pruned (value at its rung)")  # fmt: skip
            failed = [t.id for t in trials if t.status == "failed"]
            if failed:
                lo = min(ys) if ys else 0.0
                ax.scatter(failed, [lo] * len(failed), marker="x", color="grey", label="failed")
            ax.set_xlabel("trial")
            ax.set_ylabel(f"{metric} ({mode})")
            ax.set_title(f"{directory.name}: {len(trials)} trials")
            # a fixed corner: "best" searches every point for a free spot (slow on long runs)
            ax.legend(loc="lower right" if mode == "max" else "upper right")
        else:
            m2 = second[0]
            final = [t for t in trials if t.status != "pruned"]  # a rung's value is no result
            both = [(t.metrics[metric], t.metrics[m2]) for t in final
                    if score(t, metric, mode, cons) is not None
                    and t.metrics is not None and m2 in t.metrics]  # fmt: skip
            if both:
                ax.scatter([p[1] for p in both], [p[0] for p in both], s=12, alpha=0.5,
                           label="trial")  # fmt: skip
            front = pareto_front(final, (metric, mode), tuple(second), cons)
            # front trials have metrics (pareto_front keeps only those)
            order = sorted([(m[m2], m[metric]) for t in front if (m := t.metrics) is not None],
                           key=lambda p: p[0])  # fmt: skip
            ax.plot([p[0] for p in order], [p[1] for p in order], "o-",
                    color="C3", label="Pareto front")  # fmt: skip
            ax.set_xlabel(f"{m2} ({second[1]})")
            ax.set_ylabel(metric)
            ax.legend()
    make_folder(out.parent, "plot folder")
    fig.savefig(out, dpi=100)
    return out
