"""Plotly figures of the dashboard, built from the plain data of :mod:`nasforge.dashboard.data`
and :mod:`nasforge.dashboard.series` (no database access here).

Up to :data:`SVG_POINTS` points a chart is drawn as SVG (each point an element of the page);
beyond it, with WebGL, which keeps 10,000 trials fluid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = [
    "empty",
    "lines",
    "best_so_far",
    "curves",
    "rungs",
    "pareto",
    "importance",
    "bars",
    "SVG_POINTS",
]

#: the most points a chart draws as SVG before it switches to WebGL
SVG_POINTS = 2000
_MARGIN = {"l": 60, "r": 20, "t": 40, "b": 50}


def _scatter(n: int) -> type:
    return go.Scatter if n <= SVG_POINTS else go.Scattergl


def _trial_points(
    kind: type, points: Sequence[Mapping[str, Any]], x: str, y: str, **style: Any
) -> go.Scatter | go.Scattergl:
    """Returns a trace of ``points`` at their ``x`` and ``y`` values, each hovering as its
    trial (``trial <id>``); ``style`` holds the trace's other settings (mode, name, marker)."""
    return kind(
        x=[p[x] for p in points],
        y=[p[y] for p in points],
        text=[f"trial {p['id']}" for p in points],
        **style,
    )


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        xaxis_title=x,
        yaxis_title=y,
        margin=_MARGIN,
        height=360,
        template="plotly_white",
        legend={"font": {"size": 10}},
        uirevision="keep",  # a live update keeps the user's zoom
    )
    return fig


def empty(message: str) -> go.Figure:
    """Returns a blank figure that shows ``message`` in its middle."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, "", "", "")


def lines(
    title: str, x: Sequence[Any], series: Mapping[str, Sequence[Any]], xlabel: str = "step"
) -> go.Figure:
    """Returns a chart with one line per named series over ``x``."""
    fig = go.Figure()
    kind = _scatter(len(x) * max(1, len(series)))
    for name, ys in series.items():
        fig.add_trace(kind(x=list(x), y=list(ys), mode="lines+markers", name=str(name)))
    return _layout(fig, title, xlabel, "")


def best_so_far(data: Mapping[str, Any], over: str = "id") -> go.Figure:
    """Returns each scored trial's value and the best so far, over trial id or seconds."""
    if not data["id"]:
        return empty("no trial has a value yet")
    x = data["seconds"] if over == "seconds" else data["id"]
    kind = _scatter(len(x))
    fig = go.Figure()
    fig.add_trace(
        kind(
            x=x,
            y=data["value"],
            mode="markers",
            name="trial",
            marker={"size": 5, "opacity": 0.5},
            text=[f"trial {i}" for i in data["id"]],
        )
    )
    fig.add_trace(
        kind(
            x=x, y=data["best"], mode="lines", name="best so far", line={"shape": "hv", "width": 2}
        )
    )
    xlabel = "seconds since start" if over == "seconds" else "trial"
    return _layout(fig, f"best {data['metric']} ({data['mode']}) so far", xlabel, data["metric"])


def curves(data: Mapping[str, Any], metric: str) -> go.Figure:
    """Returns one line per trial of its intermediate reports of ``metric``."""
    fig = go.Figure()
    for t in data["trials"]:
        ys = t["series"].get(metric)
        if ys:
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(ys) + 1)),
                    y=ys,
                    mode="lines+markers",
                    name=f"trial {t['id']}",
                )
            )
    if not fig.data:
        return empty("no trial reported intermediate values")
    return _layout(fig, f"intermediate {metric} (best trials)", "report", metric)


def rungs(data: Mapping[str, Any]) -> go.Figure:
    """Returns each trial as a point (reports it reached, its last value), coloured by status;
    the title counts the trials that ended at each resource (the rungs of a pruned search)."""
    points = [p for p in data["points"] if p["value"] is not None]
    if not points:
        return empty("no trial reported intermediate values")
    fig = go.Figure()
    kind = _scatter(len(points))
    for status in sorted({p["status"] for p in points}):
        mine = [p for p in points if p["status"] == status]
        fig.add_trace(_trial_points(kind, mine, "resource", "value", mode="markers", name=status))
    per = ", ".join(f"{r}: {n}" for r, n in data["counts"].items())
    return _layout(fig, f"trials by resource reached ({per})", "reports", data["metric"])


def pareto(data: Mapping[str, Any], x: str, y: str) -> go.Figure:
    """Returns every trial as a point of (``x``, ``y``), grouped by colour when the data has
    groups, with the non-dominated front of each group drawn as a line."""
    points = data["points"]
    if not points:
        return empty(f"no trial reports both {x!r} and {y!r}")
    fig = go.Figure()
    kind = _scatter(len(points))
    groups: dict[Any, list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault(p["group"], []).append(p)
    front = set(data["front"])
    stopped = [p for p in points if p.get("pruned")]
    if stopped:  # their value is the rung they were stopped at, not a result
        groups = {g: [p for p in m if not p.get("pruned")] for g, m in groups.items()}
        fig.add_trace(
            _trial_points(
                kind,
                stopped,
                "x",
                "y",
                mode="markers",
                name="pruned (value at its rung)",
                marker={"size": 6, "color": "#bbbbbb", "symbol": "x"},
            )
        )
    for g, members in groups.items():
        name = "trials" if g is None else f"{g:g}" if isinstance(g, float) else str(g)
        fig.add_trace(
            _trial_points(
                kind,
                members,
                "x",
                "y",
                mode="markers",
                name=name,
                marker={"size": 7, "opacity": 0.6},
            )
        )
        on = sorted((p for p in members if p["id"] in front), key=lambda p: (p["x"], p["y"]))
        fig.add_trace(
            _trial_points(
                go.Scatter,
                on,
                "x",
                "y",
                mode="lines+markers",
                name=f"front {name}".replace(" trials", ""),
                marker={"size": 11, "symbol": "diamond"},
            )
        )
    return _layout(fig, f"{y} against {x}: the front", x, y)


def importance(values: Mapping[str, float], metric: str) -> go.Figure:
    """Returns a horizontal bar per decision, most important on top."""
    names = list(values)[::-1]
    fig = go.Figure(go.Bar(x=[values[n] for n in names], y=names, orientation="h"))
    fig = _layout(
        fig,
        f"decision importance for {metric} (random forest, mean decrease in impurity)",
        "importance",
        "",
    )
    fig.update_layout(height=max(240, 28 * len(names) + 100))
    return fig


def bars(title: str, values: Sequence[Any], label: str = "index") -> go.Figure:
    """Returns a bar per position of ``values``."""
    fig = go.Figure(go.Bar(x=[f"{label} {i}" for i in range(len(values))], y=list(values)))
    return _layout(fig, title, "", "")
