"""The dashboard's callbacks: each fills one view of a page from the run record, read-only
(the trial log view and the control panel's actions are in :mod:`nasforge.dashboard.steering`).

A run's page holds ``run-key`` (which run) and ``run-version`` (a token of its database
files, refreshed by the live tick only when the record changed); every view of the page
listens to ``run-version``, so a run in progress updates in place without a reload and an idle
one costs one ``stat`` per tick. Every record is opened read-only per request; a record that
cannot be read shows its message in the view that asked.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from itertools import islice
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote

import dash
from dash import Input, Output, State, dcc, html
from dash.exceptions import UnsupportedRelativePath

from nasforge.dashboard import charts, data, layout, overview, steering
from nasforge.dashboard.importance import decision_importance
from nasforge.dashboard.runs import ServedRuns
from nasforge.dashboard.series import artifact_series, progress_series
from nasforge.errors import NasforgeError
from nasforge.run import control
from nasforge.run.results import rank_trials
from nasforge.run.store import Store

__all__ = ["register"]

log = logging.getLogger(__name__)
T = TypeVar("T")
#: a chart beside another
HALF = {"width": "49%", "display": "inline-block", "verticalAlign": "top"}
#: at most this many distinct values make a metric a grouping (e.g. a deployment target)
MAX_GROUPS = 8


class _Reader:
    """Returns what a view reads from a run, with the run's record open read-only only for
    the duration of one read."""

    def __init__(self, served: ServedRuns, cache: data.TrialCache, control: bool = False) -> None:
        self.served = served
        self.cache = cache
        self.control = control  # whether a run's page shows the control panel
        self._importance: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def read(self, key: str, fn: Callable[[Store], T]) -> T:
        """Returns ``fn(store)`` for the run named by ``key``.

        Raises:
            NasforgeError: the key is refused, or the record cannot be read.
        """
        with data.open_run(self.served.resolve(key)) as store:
            return fn(store)

    def info(self, store: Store, selection: dict[str, Any] | None = None) -> dict[str, Any]:
        """Returns what a tab needs to start: metric names, the objective, a grouping metric."""
        obj = store.objective()
        trials = self.cache.trials(store)
        metrics = data.metric_names(trials, obj["metric"])
        # the Pareto view's x: the second objective, else the first other metric (a cost)
        second = obj.get("second") or [next(iter(metrics[1:]), obj["metric"]), "min"]
        group = None  # a metric of few values besides the two axes (e.g. a deployment target)
        for m in metrics[1:]:
            distinct = {(t.metrics or {}).get(m) for t in trials if t.metrics}
            if m != second[0] and 1 < len(distinct) <= MAX_GROUPS:
                group = m
                break
        ranked = rank_trials(trials, obj["metric"], obj["mode"], obj["constraints"],
                             picks=store.picks())  # fmt: skip
        ids = [t.id for t in ranked] or [t.id for t in trials]
        sel = dict(selection or {})
        sel["a"] = sel.get("a") or (ids[0] if ids else None)
        if not sel.get("b"):  # compare with the best trial that is not the one shown
            sel["b"] = next((i for i in ids if i != sel["a"]), None)
        return {**obj, "second": second, "metrics": metrics, "group": group, "selection": sel}

    def importance(self, store: Store) -> tuple[dict[str, float], str]:
        """Returns (decision importances, metric) of the run, computed once per version.

        Raises:
            ConfigError: too few scored trials, or no decision varies.
        """
        obj = store.objective()
        key = (store.directory, data.version(store.directory))
        with self._lock:
            if key in self._importance:
                return self._importance[key], obj["metric"]
        trials = data.final_trials(store.trials())  # a pruned trial's value is its rung's
        values = decision_importance(trials, obj["metric"], obj["mode"], obj["constraints"])
        with self._lock:
            self._importance = {key: values}  # the latest run only: it is the one looked at
        return values, obj["metric"]


def _fail(exc: Exception) -> html.Div:
    log.info("view not shown: %s", exc)
    return layout.message(str(exc))


def _local_path(path: str | None) -> str:
    """Returns a page's URL path without the app's path prefix (``/`` when it has none)."""
    try:
        return "/" + (dash.strip_relative_path(path or "/") or "")
    except UnsupportedRelativePath:  # a path outside the prefix: shown as no page
        return path or "/"


def _register_shell(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks around the tabs: the route of a URL, the live
    overview and clock, a run's version token, summary line and the tab the user opens."""
    served, cache = reader.served, reader.cache
    summaries = overview.SummaryCache(cache)

    @app.callback(Output("page", "children"), Input("url", "pathname"), Input("url", "search"))
    def route(path: str | None, search: str | None) -> Any:
        """Returns the page of a URL: the overview, a run's page (its tab from ``?tab=``), or
        a message."""
        path = _local_path(path)
        if path.startswith("/run/"):
            key = unquote(path[len("/run/") :])
            tab = parse_qs((search or "").lstrip("?")).get("tab", ["trials"])[0]
            try:
                directory = served.resolve(key)
                problem = next(
                    (r.problem for r in served.discover() if r.path == directory and r.problem),
                    None,
                )
                if problem:
                    return layout.message(problem)
                tab = tab if tab in layout.TABS else "trials"
                version = data.version(directory)
                info = reader.read(key, reader.info)  # a clear message now if unreadable
                asked = control.run_controls(directory) if reader.control else None
            except NasforgeError as exc:
                return html.Div([html.H3(key), _fail(exc)])
            content = layout.tab_layout(tab, info)  # here, not by a second round trip
            controls = None if asked is None else steering.panel(*asked)
            return layout.run_page(key, served.name_of(key), tab, content, version, controls)
        if path != "/":
            return layout.message(f"no page {path!r}; the overview is at /")
        return html.Div(_overview(), id="overview-body")

    def _overview() -> Any:
        """Returns the overview of every served run."""
        return layout.overview(
            [
                summaries.get(r.key, r.name, r.path)
                if not r.problem
                else overview.RunSummary(r.key, r.name, problem=r.problem)
                for r in served.discover()
            ]
        )

    @app.callback(
        Output("overview-body", "children"),
        Input("tick", "n_intervals"),
        prevent_initial_call=True,
    )
    def live_overview(_: int) -> Any:
        """Returns the overview again at each tick (new runs appear, states change)."""
        return _overview()

    @app.callback(Output("clock", "children"), Input("tick", "n_intervals"))
    def clock(_: int | None) -> str:
        """Returns the time of the last live update, shown in the header."""
        return "live, updated " + time.strftime("%H:%M:%S")

    @app.callback(
        Output("run-version", "data"),
        Input("tick", "n_intervals"),
        Input("run-key", "data"),
        State("run-version", "data"),
    )
    def run_version(_: int | None, key: str, old: Any) -> Any:
        """Returns the run's new version token, or no update while its record is unchanged."""
        try:
            new = list(data.version(served.resolve(key)))
        except NasforgeError:
            return dash.no_update
        return dash.no_update if new == old else new

    @app.callback(
        Output("run-summary", "children"), Input("run-version", "data"), State("run-key", "data")
    )
    def summary(_: Any, key: str) -> Any:
        """Returns the run's summary line: kind, state, progress, best trial, duration."""
        try:
            r = overview.summarize(key, key, served.resolve(key), cache)
            facts = reader.read(key, data.run_facts) if not r.problem else {}
        except NasforgeError as exc:
            return _fail(exc)
        if r.problem:
            return layout.message(r.problem)
        best = (
            "no result yet"
            if r.best is None
            else (f"best {r.metric} {data.plain(r.best)} (trial {r.best_trial})")
        )
        return html.Span(
            [
                f"{r.kind} run · ",
                html.B(r.state, id="run-state"),
                f" · {r.progress} · {best} · {r.n_trials} trials"
                f" · {layout.fmt_seconds(r.duration)}",
                *layout.facts(facts),
            ]
        )

    @app.callback(
        Output("tab-content", "children"),
        Input("tabs", "value"),
        State("run-key", "data"),
        State("selection", "data"),
        prevent_initial_call=True,  # the page comes with its first tab
    )
    def tab(value: str, key: str, selection: dict[str, Any] | None) -> Any:
        """Returns the components of the tab the user opened."""
        try:
            info = reader.read(key, lambda s: reader.info(s, selection))
        except NasforgeError as exc:
            return _fail(exc)
        return layout.tab_layout(value, info)


def _register_trials(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the trials tab: table pages, row clicks."""

    @app.callback(
        Output("trial-table", "data"),
        Output("trial-table", "columns"),
        Output("trial-table", "page_count"),
        Output("trial-count", "children"),
        Input("run-version", "data"),
        Input("trial-table", "page_current"),
        Input("trial-table", "page_size"),
        Input("trial-table", "sort_by"),
        Input("status-filter", "value"),
        State("run-key", "data"),
    )
    def trial_table(_: Any, page: int, size: int, sort_by: Any, statuses: Any, key: str) -> Any:
        """Returns the table's page of rows, its columns, page count and trial count."""
        try:
            p = reader.read(
                key,
                lambda s: data.trial_page(
                    s,
                    reader.cache,
                    0 if page is None else page,
                    size or 20,
                    sort_by or [],
                    statuses or [],
                ),
            )
        except NasforgeError as exc:
            return [], [], 1, _fail(exc)
        columns = layout.trial_columns(p["metrics"])
        text = f"{p['n_rows']} trials" + (" (filtered)" if statuses else "")
        if p["n_metrics"] > len(p["metrics"]):
            text += f"; the first {len(p['metrics'])} of {p['n_metrics']} metrics shown"
        return p["rows"], columns, p["n_pages"], text

    @app.callback(
        Output("selection", "data"),
        Output("tabs", "value"),
        Input("trial-table", "active_cell"),
        State("trial-table", "data"),
        State("selection", "data"),
        prevent_initial_call=True,
    )
    def pick(cell: Any, rows: list[dict[str, Any]], sel: dict[str, Any] | None) -> Any:
        """Returns the selection after a click on a row (that trial, then the one before) and the
        architecture tab."""
        if not cell or not rows or cell.get("row", 0) >= len(rows):
            return dash.no_update, dash.no_update
        picked = rows[cell["row"]]["id"]
        return {"a": picked, "b": (sel or {}).get("a")}, "architecture"


def _register_charts(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the charts tab: best so far, curves, rungs."""

    @app.callback(
        Output("best-graph", "figure"),
        Input("run-version", "data"),
        Input("best-over", "value"),
        State("run-key", "data"),
    )
    def best(_: Any, over: str, key: str) -> Any:
        """Returns the best-so-far chart over trials or time."""
        try:
            return charts.best_so_far(
                reader.read(key, lambda s: data.best_so_far(s, reader.cache)), over
            )
        except NasforgeError as exc:
            return charts.empty(str(exc))

    @app.callback(
        Output("curve-graph", "figure"),
        Output("curve-metric", "options"),
        Output("curve-metric", "value"),
        Input("run-version", "data"),
        Input("curve-metric", "value"),
        State("run-key", "data"),
    )
    def curve(_: Any, metric: str | None, key: str) -> Any:
        """Returns the intermediate-report chart of one metric and the metrics to choose from."""
        try:
            c = reader.read(key, lambda s: data.curves(s, reader.cache))
        except NasforgeError as exc:
            return charts.empty(str(exc)), [], None
        metric = metric if metric in c["metrics"] else (c["metrics"] or [None])[0]
        fig = charts.curves(c, metric) if metric else charts.empty("no intermediate reports")
        return fig, c["metrics"], metric

    @app.callback(
        Output("rung-graph", "figure"), Input("run-version", "data"), State("run-key", "data")
    )
    def rung(_: Any, key: str) -> Any:
        """Returns the rung chart: where each trial ended (pruned ones at their rung)."""
        try:
            return charts.rungs(reader.read(key, data.rungs))
        except NasforgeError as exc:
            return charts.empty(str(exc))


def _register_pareto(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the Pareto tab: its chart and front."""

    @app.callback(
        Output("pareto-graph", "figure"),
        Output("pareto-front", "children"),
        Input("run-version", "data"),
        Input("pareto-x", "value"),
        Input("pareto-xmode", "value"),
        Input("pareto-y", "value"),
        Input("pareto-ymode", "value"),
        Input("pareto-group", "value"),
        State("run-key", "data"),
    )
    def pareto(_: Any, x: str, xm: str, y: str, ym: str, group: str | None, key: str) -> Any:
        """Returns the Pareto chart of two metrics and the table of its front."""
        if not x or not y:
            return charts.empty("choose two metrics"), ""
        try:
            p = reader.read(key, lambda s: data.pareto(s, reader.cache, (x, xm), (y, ym), group))
        except NasforgeError as exc:
            return charts.empty(str(exc)), _fail(exc)
        by_id = {q["id"]: q for q in p["points"]}
        rows = [
            [str(i), data.plain(by_id[i]["x"]), data.plain(by_id[i]["y"])]
            + ([data.plain(by_id[i]["group"])] if group else [])
            for i in p["front"]
        ]
        table = layout.kv_table(rows, ["trial", x, y] + ([group] if group else []), "front-table")
        return charts.pareto(p, x, y), table


def _register_architecture(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the architecture tab: a trial and a diff."""

    @app.callback(
        Output("arch-view", "children"),
        Output("arch-diff", "children"),
        Input("arch-a", "value"),
        Input("arch-b", "value"),
        Input("run-version", "data"),
        State("run-key", "data"),
    )
    def architecture(a: int | None, b: int | None, _: Any, key: str) -> Any:
        """Returns trial ``a``'s decisions and metrics, and its difference from trial ``b``."""
        if not a:
            return layout.message("enter a trial id", error=False), ""
        try:
            t = reader.read(key, lambda s: data.trial_detail(s, a))
            d = reader.read(key, lambda s: data.diff(s, a, b)) if b else None
        except NasforgeError as exc:
            return _fail(exc), ""
        view = html.Div(
            [
                html.H4(f"Trial {t['id']}: {t['status']}, {t['evaluation']}"),
                layout.kv_table(
                    [[k, data.plain(v)] for k, v in sorted(t["arch"].items())],
                    ["decision", "value"],
                    id="decision-view",
                ),
                layout.kv_table(
                    _metric_rows(t["metrics"] or {}),
                    ["metric", "value"],
                ),
                layout.message(t["error"]) if t["error"] else "",
            ]
        )
        if d is None:
            return view, layout.message("enter a second trial id to compare", error=False)
        n = sum(not r["same"] for r in d)
        rows = [[r["label"], r["a"], r["b"], "" if r["same"] else "differs"] for r in d]
        diff_view = html.Div(
            [
                html.Div(f"{n} of {len(d)} decisions differ"),
                layout.kv_table(
                    rows, ["decision", f"trial {a}", f"trial {b}", ""], id="diff-table"
                ),
            ]
        )
        return view, diff_view


def _metric_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """Returns a trial's metrics as table rows, at most :data:`data.MAX_METRIC_COLUMNS` of
    them and a last row counting the rest."""
    rows = [[k, data.plain(v)] for k, v in islice(metrics.items(), data.MAX_METRIC_COLUMNS)]
    more = len(metrics) - len(rows)
    return rows + ([[f"... and {more} more metrics", ""]] if more > 0 else [])


def _register_importance(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the importance tab."""

    @app.callback(
        Output("importance-view", "children"),
        Input("run-version", "data"),
        State("run-key", "data"),
    )
    def importance(_: Any, key: str) -> Any:
        """Returns the decision-importance chart, or why there is none."""
        try:
            values, metric = reader.read(key, reader.importance)
        except NasforgeError as exc:
            return _fail(exc)
        return dcc.Graph(figure=charts.importance(values, metric), id="importance-graph")


def _register_progress(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the progress tab: rows, decisions, artifacts."""

    @app.callback(
        Output("progress-view", "children"),
        Input("run-version", "data"),
        State("run-key", "data"),
    )
    def progress(_: Any, key: str) -> Any:
        """Returns the charts of the progress rows, the decisions per step and the artifacts."""
        try:
            rows, arts = reader.read(key, lambda s: (s.progress(), artifact_series(s)))
            over_time = reader.read(key, data.timeline) if not rows else None
        except NasforgeError as exc:
            return _fail(exc)
        ps = progress_series(rows)
        graphs = [
            dcc.Graph(figure=charts.lines(k, ps["steps"], {k: v}), id=f"progress-{k}")
            for k, v in ps["scalars"].items()
        ]
        graphs += [
            dcc.Graph(figure=charts.lines(k, ps["steps"], g)) for k, g in ps["groups"].items()
        ]
        graphs += layout.timeline_graphs(over_time)
        art_parts: list[Any] = [html.H4("Artifacts")] if arts else []
        for a in arts:
            art_parts.append(
                layout.kv_table(
                    [["path", a["path"]], *([k, data.plain(v)] for k, v in a["numbers"].items())],
                    [a["name"], a["kind"]],
                )
            )
            art_parts += [
                html.Div(dcc.Graph(figure=charts.bars(f"{a['name']}: {k}", v)), style=HALF)
                for k, v in a["lists"].items()
            ]
        return layout.progress_block(graphs, ps["decisions"], html.Div(art_parts))


def _register_config(app: dash.Dash, reader: _Reader) -> None:
    """Returns None; registers the callbacks of the config tab: config, state, plan, error."""

    @app.callback(
        Output("config-view", "children"),
        Input("run-version", "data"),
        State("run-key", "data"),
    )
    def config(_: Any, key: str) -> Any:
        """Returns the stored config, state, plan and error as JSON text."""

        def read(s: Store) -> dict[str, Any]:
            meta = {k: s.get_meta(k) for k in ("state", "plan", "error", "created")}
            return {
                "directory": str(s.directory),
                "state": s.state(),
                "meta": meta,
                "config": s.config(),
            }

        try:
            c = reader.read(key, read)
        except NasforgeError as exc:
            return _fail(exc)
        return html.Pre(
            json.dumps(c, indent=2, sort_keys=True, default=str),
            id="config-json",
            style={"fontSize": "12px", "background": "#f7f7f7", "padding": "8px"},
        )


#: one registrar per tab of a run's page (the keys of ``layout.TABS``)
PAGES: dict[str, Callable[[dash.Dash, _Reader], None]] = {
    "trials": _register_trials,
    "charts": _register_charts,
    "pareto": _register_pareto,
    "architecture": _register_architecture,
    "importance": _register_importance,
    "progress": _register_progress,
    "config": _register_config,
}


def register(
    app: dash.Dash, served: ServedRuns, cache: data.TrialCache, allow_control: bool = False
) -> None:
    """Returns None; registers every callback of the dashboard on ``app``: the shell around
    the tabs, each tab's own (:data:`PAGES`), the trial log view and, when
    ``allow_control``, the control panel's (:mod:`nasforge.dashboard.steering`)."""
    reader = _Reader(served, cache, allow_control)
    _register_shell(app, reader)
    for registrar in PAGES.values():
        registrar(app, reader)
    steering.register(app, served, allow_control)
