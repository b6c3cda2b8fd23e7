"""The dashboard's pages as Dash component trees: the shell, the overview of runs, a run's
page and each of its tabs. Layout only: no record is read here (see
:mod:`nasforge.dashboard.callbacks`, which fills the components named here).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from dash import dcc, get_relative_path, html
from dash.dash_table.DataTable import DataTable
from dash.dash_table.Format import Format, Scheme
from dash.development.base_component import Component

from nasforge.dashboard.data import plain
from nasforge.dashboard.overview import RunSummary
from nasforge.run.records import STATUSES

__all__ = [
    "TABS",
    "shell",
    "overview",
    "run_page",
    "progress_block",
    "tab_layout",
    "message",
    "kv_table",
    "fmt_seconds",
    "run_href",
    "trial_columns",
    "facts",
    "timeline_graphs",
]

#: the tabs of a run's page: value -> label
TABS = {
    "trials": "Trials",
    "charts": "Charts",
    "pareto": "Pareto front",
    "architecture": "Architecture",
    "importance": "Importance",
    "progress": "Progress",
    "config": "Config",
}
_TABLE_STYLE = {"borderCollapse": "collapse", "fontSize": "13px", "margin": "8px 0"}
_CELL = {"border": "1px solid #ddd", "padding": "4px 8px", "textAlign": "left"}
_ERROR = {"color": "#b00020", "whiteSpace": "pre-wrap"}
#: the colours of a run's state
STATE_STYLE = {
    "running": {"background": "#e3f2fd", "color": "#0d47a1"},
    "finished": {"background": "#e8f5e9", "color": "#1b5e20"},
    "failed": {"background": "#ffebee", "color": "#b71c1c"},
    "interrupted": {"background": "#fff8e1", "color": "#e65100"},
}


def run_href(key: str, tab: str | None = None) -> str:
    """Returns the URL path of a run's page (and tab), under the app's path prefix."""
    return get_relative_path(f"/run/{quote(key)}") + (f"?tab={tab}" if tab else "")


def trial_columns(metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Returns the trial table's columns: id, status, how, the rung (reports) a trial reached,
    each metric (shown to 4 significant digits; the value itself sorts), seconds, where, the
    architecture and the error."""
    four = Format(precision=4, scheme=Scheme.decimal_or_exponent).trim(True)
    return [
        {"name": "trial", "id": "id"},
        {"name": "status", "id": "status"},
        {"name": "how", "id": "how"},
        {"name": "rung", "id": "rung", "type": "numeric"},
        *({"name": m, "id": f"m:{m}", "type": "numeric", "format": four} for m in metrics),
        {"name": "seconds", "id": "seconds", "type": "numeric", "format": four},
        {"name": "where", "id": "where"},
        {"name": "architecture", "id": "arch"},
        {"name": "error", "id": "error"},
    ]


def facts(found: Mapping[str, str]) -> list[Any]:
    """Returns the summary line's parts for a run's stopper and resource spent, and lines
    for its size baseline and shortlist (what :func:`nasforge.dashboard.data.run_facts`
    found), empty ones left out."""
    out: list[Any] = []
    if found.get("stopper"):
        out.append(html.Span(f" · stopper {found['stopper']}", id="run-stopper"))
    if found.get("spent"):
        out.append(html.Span(f" · spent {found['spent']}", id="run-spent"))
    if found.get("baseline"):
        out.append(html.Div(f"baseline: {found['baseline']}", id="run-baseline"))
    if found.get("shortlist"):
        out.append(html.Div(f"shortlist: {found['shortlist']}", id="run-shortlist"))
    return out


def timeline_graphs(found: Mapping[str, Sequence[Any]] | None) -> list[Any]:
    """Returns the progress tab's charts of trials and reports over time (what
    :func:`nasforge.dashboard.data.timeline` found), none when no trial ended."""
    from nasforge.dashboard import charts  # plotly: only where a chart is drawn

    if not found or not found["seconds"]:
        return []
    x = found["seconds"]
    return [
        dcc.Graph(
            figure=charts.lines(
                "trials ended over time",
                x,
                {"trials": found["trials"], "pruned": found["pruned"]},
                xlabel="seconds",
            ),
            id="progress-trials",
        ),
        dcc.Graph(
            figure=charts.lines(
                "resource spent over time (reports)", x, {"reports": found["reports"]}, "seconds"
            ),
            id="progress-reports",
        ),
    ]


def fmt_seconds(s: float | None) -> str:
    """Returns a duration as ``1h02m``, ``3m05s`` or ``4.2s``."""
    if s is None:
        return ""
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def message(text: str, error: bool = True) -> html.Div:
    """Returns a block of text shown in place of a view (an error in red)."""
    return html.Div(text, className="nf-message", style=_ERROR if error else {"color": "#555"})


def kv_table(rows: Sequence[Sequence[Any]], header: Sequence[str] = (), id: str = "") -> html.Table:
    """Returns a plain HTML table of rows of values (text cells)."""
    head = [html.Thead(html.Tr([html.Th(h, style=_CELL) for h in header]))] if header else []
    body = html.Tbody([html.Tr([html.Td(c, style=_CELL) for c in r]) for r in rows])
    if id:
        return html.Table([*head, body], style=_TABLE_STYLE, id=id)
    return html.Table([*head, body], style=_TABLE_STYLE)


def shell(interval_ms: int, extra: Sequence[Any] = ()) -> html.Div:
    """Returns the app's layout: the URL, the live tick, the ``extra`` components (stores),
    a header and the page slot."""
    return html.Div(
        [
            dcc.Location(id="url", refresh="callback-nav"),
            dcc.Interval(id="tick", interval=interval_ms),
            *extra,
            html.Div(
                [
                    dcc.Link(
                        "nasforge dashboard",
                        href=get_relative_path("/"),
                        style={"fontWeight": "bold"},
                    ),
                    html.Span(id="clock", style={"float": "right", "color": "#777"}),
                ],
                style={"padding": "8px 16px", "borderBottom": "1px solid #ddd"},
            ),
            html.Div(id="page", style={"padding": "8px 16px"}),
        ],
        style={"fontFamily": "system-ui, sans-serif"},
    )


def overview(runs: Sequence[RunSummary]) -> html.Div:
    """Returns the overview page: one row per run, and each unreadable directory's message."""
    header = [
        "run",
        "kind",
        "space",
        "strategy",
        "status",
        "progress",
        "best",
        "trials",
        "started",
        "duration",
    ]
    rows = []
    for r in runs:
        if r.problem:
            rows.append(
                html.Tr(
                    [
                        html.Td(r.name, style=_CELL),
                        html.Td(
                            r.problem,
                            colSpan=len(header) - 1,
                            style={**_CELL, **_ERROR},
                            className="nf-problem",
                        ),
                    ]
                )
            )
            continue
        best = "" if r.best is None else f"{r.metric} {plain(r.best)} (trial {r.best_trial})"
        started = (
            ""
            if r.started is None
            else f"{_dt.datetime.fromtimestamp(r.started):%Y-%m-%d %H:%M:%S}"
        )
        cells: list[str | Component] = [
            dcc.Link(r.name, href=run_href(r.key)),
            r.kind,
            r.space,
            r.strategy,
            html.Span(
                r.state,
                className=f"nf-state nf-{r.state}",
                style={"padding": "1px 6px", **STATE_STYLE.get(r.state, {})},
            ),
            r.progress,
            best,
            str(r.n_trials),
            started,
            fmt_seconds(r.duration),
        ]
        rows.append(html.Tr([html.Td(c, style=_CELL) for c in cells], className="nf-run"))
    return html.Div(
        [
            html.H3(f"Runs ({sum(1 for r in runs if not r.problem)})"),
            html.Table(
                [html.Thead(html.Tr([html.Th(h, style=_CELL) for h in header])), html.Tbody(rows)],
                id="overview-table",
                style=_TABLE_STYLE,
            ),
        ]
    )


def run_page(
    key: str,
    name: str,
    tab: str,
    content: Any,
    version: Sequence[int] = (),
    controls: Any = None,
) -> html.Div:
    """Returns a run's page: its summary line, the control panel when ``controls`` is given
    (:func:`nasforge.dashboard.steering.panel`), the tabs, and the open tab's ``content``;
    ``version`` is the record's version when the page was made (a live update comes only
    after a change)."""
    return html.Div(
        [
            dcc.Store(id="run-key", data=key),
            dcc.Store(id="run-version", data=list(version)),
            dcc.Store(id="selection", data={}),
            html.H3(name),
            html.Div(id="run-summary", style={"marginBottom": "8px"}),
            *([controls] if controls is not None else []),
            dcc.Tabs(
                id="tabs",
                value=tab if tab in TABS else "trials",
                children=[
                    dcc.Tab(label=label, value=v, id=f"tab-{v}") for v, label in TABS.items()
                ],
            ),
            html.Div(content, id="tab-content", style={"paddingTop": "8px"}),
        ]
    )


def _dropdown(id: str, options: Sequence[Any], value: Any, width: str = "200px", **kw: Any):
    return dcc.Dropdown(
        id=id,
        options=[{"label": str(o), "value": o} for o in options],
        value=value,
        style={"width": width, "display": "inline-block", "verticalAlign": "middle"},
        **kw,
    )


def _label(text: str) -> html.Span:
    return html.Span(text, style={"margin": "0 6px 0 12px"})


def tab_layout(tab: str, info: Mapping[str, Any]) -> html.Div:
    """Returns the components of one tab of a run's page; ``info`` holds what they need to
    start: ``metrics`` (metric names, the objective's first), ``metric``, ``mode``,
    ``second`` ([metric, mode] of the Pareto view's x axis), ``group`` (a metric to colour
    by, or None),
    ``selection`` ({"a": trial id, "b": trial id})."""
    metrics: list[str] = list(info.get("metrics", []))
    if tab == "trials":
        return html.Div(
            [
                _label("status"),
                _dropdown(
                    "status-filter", STATUSES, [], "360px", multi=True, placeholder="all statuses"
                ),
                html.Span(id="trial-count", style={"marginLeft": "16px"}),
                html.Div("Click a row to view its architecture.", style={"color": "#777"}),
                DataTable(
                    id="trial-table",
                    page_action="custom",
                    page_current=0,
                    page_size=20,
                    sort_action="custom",
                    sort_mode="single",
                    sort_by=[
                        {
                            "column_id": f"m:{info['metric']}",
                            "direction": "desc" if info["mode"] == "max" else "asc",
                        }
                    ],
                    style_cell={
                        "fontSize": "12px",
                        "fontFamily": "monospace",
                        "maxWidth": "420px",
                        "overflow": "hidden",
                        "textOverflow": "ellipsis",
                    },
                    style_header={"fontWeight": "bold"},
                    tooltip_duration=None,
                ),
            ]
        )
    if tab == "charts":
        return html.Div(
            [
                _label("x axis"),
                dcc.RadioItems(
                    id="best-over",
                    options=[
                        {"label": "trial", "value": "id"},
                        {"label": "time", "value": "seconds"},
                    ],
                    value="id",
                    inline=True,
                    style={"display": "inline-block"},
                ),
                dcc.Graph(id="best-graph"),
                _label("intermediate metric"),
                _dropdown("curve-metric", [], None),
                dcc.Graph(id="curve-graph"),
                dcc.Graph(id="rung-graph"),
            ]
        )
    if tab == "pareto":
        second = info["second"]
        return html.Div(
            [
                _label("x"),
                _dropdown("pareto-x", metrics, second[0]),
                _dropdown("pareto-xmode", ["min", "max"], second[1], "90px", clearable=False),
                _label("y"),
                _dropdown("pareto-y", metrics, info["metric"]),
                _dropdown("pareto-ymode", ["max", "min"], info["mode"], "90px", clearable=False),
                _label("colour by"),
                _dropdown("pareto-group", metrics, info.get("group")),
                dcc.Graph(id="pareto-graph"),
                html.H4("Front"),
                html.Div(id="pareto-front"),
            ]
        )
    if tab == "architecture":
        sel = info.get("selection") or {}
        return html.Div(
            [
                html.Div(
                    [
                        _label("trial"),
                        dcc.Input(
                            id="arch-a", type="number", value=sel.get("a"), debounce=True, min=1
                        ),
                        _label("compare with trial"),
                        dcc.Input(
                            id="arch-b", type="number", value=sel.get("b"), debounce=True, min=1
                        ),
                        html.Div(id="arch-view"),
                        html.H4("Difference"),
                        html.Div(id="arch-diff"),
                    ],
                    style={"flex": "1 1 50%", "minWidth": "0"},
                ),
                html.Div(  # the trial's log beside it (nasforge.dashboard.steering fills it)
                    [html.H4("Log"), dcc.Store(id="arch-log-stamp"), html.Div(id="arch-log")],
                    style={"flex": "1 1 50%", "minWidth": "0"},
                ),
            ],
            style={"display": "flex", "gap": "16px", "alignItems": "flex-start"},
        )
    if tab == "importance":
        return html.Div([dcc.Loading(html.Div(id="importance-view"))])
    if tab == "progress":
        return html.Div(id="progress-view")
    return html.Div(id="config-view")


def progress_block(
    graphs: Sequence[Any], decisions: Sequence[tuple[Any, Mapping[str, Any]]], artifacts: Any
) -> html.Div:
    """Returns the progress tab's content: the charts of the progress rows, the decisions over
    steps (the current architecture), and the artifacts."""
    parts: list[Any] = []
    if graphs:
        parts += [html.Div(g, style={"width": "49%", "display": "inline-block"}) for g in graphs]
    else:
        parts.append(message("this run has recorded no progress rows", error=False))
    if decisions:
        labels = sorted({k for _, a in decisions for k in a})
        shown = list(decisions)[-30:]
        parts += [
            html.H4(f"Current architecture per step (last {len(shown)} of {len(decisions)})"),
            kv_table(
                [[str(s), *(plain(a.get(k)) for k in labels)] for s, a in shown],
                ["step", *labels],
                id="decision-table",
            ),
        ]
    parts.append(artifacts)
    return html.Div(parts)
