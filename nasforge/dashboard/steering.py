"""Watching and steering a running search from the dashboard.

log       the architecture tab shows the chosen trial's log beside its decisions: what
          ``nasforge logs DIR N`` prints, read by the same reader
          (:func:`nasforge.run.trial_logs.read_log`), saying when its start was dropped;
          a failed trial's log ends with its traceback. Read-only, always on; a tick
          costs one ``stat`` of the log, which is sent again only when it changed
control   only on a dashboard started with ``allow_control`` (``nasforge serve
          --allow-control``): a panel on a run's page that stops the search (letting its
          running trials finish, or cancelling them), cancels one running trial, or
          changes ``n_trials`` and ``concurrency``. The stop and cancel buttons ask the
          browser to confirm (``confirm()``) and send nothing when it is dismissed. Each
          button calls the function the command line calls
          (:func:`nasforge.run.control.stop`, ``cancel``, ``change``), which leaves a
          request that the running engine applies and records as a run note naming
          ``via=dashboard``; the dashboard itself still never writes the record
guard     :func:`guard` stands before Dash's callback dispatch. A callback request that
          names a control component (an id starting with :data:`CONTROL_PREFIX`) gets
          403 when control is off, and, when it is on, unless it comes from the
          dashboard's own page (:func:`nasforge.dashboard.auth.same_origin`: its
          ``Origin`` is the address the request was sent to): a page of another site or
          of another port cannot make the browser press a button (cross-site request
          forgery). Beyond loopback the token gate stands before it, as for every request
"""

from __future__ import annotations

import logging
from typing import Any

import dash
import flask
from dash import Input, Output, State, dcc, html

from nasforge.dashboard import auth, layout
from nasforge.dashboard.runs import ServedRuns
from nasforge.errors import NasforgeError
from nasforge.run import control
from nasforge.run.requests import CONTROLS
from nasforge.run.trial_logs import dropped_bytes, read_log, trial_log

__all__ = ["CONTROL_PREFIX", "VIA", "panel", "register", "guard"]

log = logging.getLogger(__name__)

#: the id prefix of every control component: the guard knows a control request by it
CONTROL_PREFIX = "nf-control-"
#: who asked, as the run note records it
VIA = "dashboard"
_BUTTON = {"margin": "0 6px 4px 0"}
_NUMBER = {"width": "80px", "marginRight": "6px"}
_LOG = {
    "fontSize": "12px",
    "background": "#f7f7f7",
    "padding": "8px",
    "maxHeight": "520px",
    "overflow": "auto",
    "whiteSpace": "pre-wrap",
    "wordBreak": "break-all",
}


def _id(name: str) -> str:
    return CONTROL_PREFIX + name


def _confirmed(name: str, text: str, question: str) -> dcc.ConfirmDialogProvider:
    """Returns the button ``text`` wrapped in a browser confirmation (``confirm()`` asking
    ``question``): the request is sent only when it is accepted, as the provider's
    ``submit_n_clicks`` (id ``nf-control-<name>``); dismissing it sends nothing."""
    return dcc.ConfirmDialogProvider(
        html.Button(text, id=_id(f"{name}-button"), style=_BUTTON),
        id=_id(name),
        message=question,
    )


def panel(kind: str = "multitrial", controls: frozenset[str] | None = None) -> html.Div:
    """Returns the control panel of a run's page (shown only when control is allowed): the
    buttons of the ``controls`` the run's ``kind`` declared (default: all); the others are
    in the page but hidden, and the command they would send is refused anyway."""
    every = frozenset(CONTROLS)
    have = every if controls is None else controls
    trials = "cancel" in have  # a run of trials: its stop lets them finish
    boundary = "epoch or step"

    def label(text: str) -> html.Span:
        return html.Span(text, style={"margin": "0 6px 0 12px"})

    def shown(*needed: str) -> dict[str, str]:
        return {} if all(c in have for c in needed) else {"display": "none"}

    if not have:
        headline = f"This {kind} run takes no requests while it runs."
    elif have == {"stop"}:
        headline = f"This {kind} run can be stopped: it stops at its next boundary, resumable."
    else:
        headline = "(the running search applies each request within a second and records it)"
    return html.Div(
        [
            html.B("Steer this run"),
            html.Span(" " + headline, id=_id("what"), style={"color": "#777"}),
            html.Div(
                [
                    html.Span(_confirmed(
                        "stop-finish",
                        "Stop: let running trials finish" if trials else "Stop",
                        "Stop this search? The running trials finish; no new trial starts."
                        if trials else f"Stop this run? It stops at the end of its current "
                        f"{boundary}, keeping what it did; `nasforge resume` continues it.",
                    ), style=shown("stop")),
                    html.Span(_confirmed(
                        "stop-cancel",
                        "Stop: cancel running trials",
                        "Stop this search now? The running trials are cancelled and their "
                        "work is lost.",
                    ), style=shown("stop:cancel")),
                    html.Span([
                        label("trial"),
                        dcc.Input(id=_id("trial"), type="number", min=1, style=_NUMBER),
                        _confirmed(
                            "cancel",
                            "Cancel trial",
                            "Cancel the trial whose id is in the box? Its work is lost; the "
                            "search goes on.",
                        ),
                    ], style=shown("cancel")),
                    html.Span([
                        label("n_trials"),
                        dcc.Input(id=_id("n-trials"), type="number", min=1, style=_NUMBER),
                        label("concurrency"),
                        dcc.Input(id=_id("concurrency"), type="number", min=1, style=_NUMBER),
                        html.Button("Apply", id=_id("set"), style=_BUTTON),
                    ], style=shown("set:n_trials", "set:concurrency")),
                ],
                style={"marginTop": "4px"},
            ),
            html.Div(id=_id("result")),
        ],
        id=_id("panel"),
        style={"border": "1px solid #ddd", "padding": "6px 8px", "margin": "4px 0 8px"},
    )  # fmt: skip


def _whole(value: Any) -> Any:
    """Returns a number input's value as an int when it is a whole number, else as given."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _register_log(app: dash.Dash, served: ServedRuns) -> None:
    """Returns None; registers the callback that shows the chosen trial's log."""

    @app.callback(
        Output("arch-log", "children"),
        Output("arch-log-stamp", "data"),
        Input("arch-a", "value"),
        Input("tick", "n_intervals"),
        State("run-key", "data"),
        State("arch-log-stamp", "data"),
    )
    def trial_log_view(a: Any, _: Any, key: str, stamp: Any) -> Any:
        """Returns trial ``a``'s log and its stamp (trial, size, time), or no update while
        the stamp is unchanged."""
        trial = _whole(a)
        if not isinstance(trial, int) or isinstance(trial, bool) or trial < 1:
            return layout.message("enter a trial id", error=False), None
        try:
            path = trial_log(served.resolve(key), trial)
        except NasforgeError as exc:
            return layout.message(str(exc)), None
        try:
            st = path.stat()
            new = f"{trial}:{st.st_size}:{st.st_mtime_ns}"  # text: JSON numbers lose digits
        except OSError:
            new = f"{trial}:none"
        if new == stamp:
            return dash.no_update, dash.no_update
        if new.endswith(":none"):
            text = (
                f"trial {trial} has no log: it has not started, or the run was made before "
                "nasforge kept logs"
            )
            return layout.message(text, error=False), new
        text = read_log(path)
        dropped = dropped_bytes(text)
        note = f"{path.name}, {len(text.encode())} bytes shown" + (
            f"; truncated: the first {dropped} bytes were dropped (a trial's log keeps its "
            "last bytes)"
            if dropped
            else ""
        )
        return html.Div(
            [
                html.Div(note, id="trial-log-note", style={"color": "#777"}),
                html.Pre(text, id="trial-log", style=_LOG),
            ]
        ), new


def _register_control(app: dash.Dash, served: ServedRuns) -> None:
    """Returns None; registers the control panel's one callback."""

    @app.callback(
        Output(_id("result"), "children"),
        Input(_id("stop-finish"), "submit_n_clicks"),
        Input(_id("stop-cancel"), "submit_n_clicks"),
        Input(_id("cancel"), "submit_n_clicks"),
        Input(_id("set"), "n_clicks"),
        State(_id("trial"), "value"),
        State(_id("n-trials"), "value"),
        State(_id("concurrency"), "value"),
        State("run-key", "data"),
        prevent_initial_call=True,
    )
    def act(_f: Any, _c: Any, _t: Any, _s: Any, trial: Any, n: Any, c: Any, key: str) -> Any:
        """Returns what was asked of the running search, after asking it through the
        functions of ``nasforge stop`` and ``nasforge set``, or why it was refused."""
        which = str(dash.ctx.triggered_id or "")[len(CONTROL_PREFIX) :]
        try:
            directory = served.resolve(key)
            if which in ("stop-finish", "stop-cancel"):
                text = control.stop(directory, which[len("stop-") :], via=VIA)
            elif which == "cancel":
                text = control.cancel(directory, _whole(trial), via=VIA)
            elif which == "set":
                pairs = [
                    f"{name}={_whole(value)}"
                    for name, value in (("n_trials", n), ("concurrency", c))
                    if value not in (None, "")
                ]
                text = control.change(directory, pairs, via=VIA)
            else:
                return dash.no_update
        except NasforgeError as exc:
            log.info("dashboard control refused: %s", exc)
            return layout.message(str(exc))
        log.warning("dashboard: %s", text)
        return layout.message(text, error=False)


def register(app: dash.Dash, served: ServedRuns, allow_control: bool) -> None:
    """Returns None; registers the log view's callback, and the control panel's when
    ``allow_control``."""
    _register_log(app, served)
    if allow_control:
        _register_control(app, served)


def _refuse(reason: str) -> flask.Response:
    return flask.Response(f"403 Forbidden: {reason}\n", 403, mimetype="text/plain")


def guard(server: flask.Flask, allow_control: bool) -> None:
    """Returns None after installing, before every request of ``server``, the check that
    refuses (403) a control request when ``allow_control`` is off, or when it does not come
    from the dashboard's own page."""

    @server.before_request
    def _check_control() -> flask.Response | None:
        req = flask.request
        if req.method != "POST" or not req.path.endswith("_dash-update-component"):
            return None
        body = req.get_json(silent=True)  # cached: Dash reads the same object
        output = str(body.get("output", "")) if isinstance(body, dict) else ""
        if CONTROL_PREFIX not in output:
            return None
        if not allow_control:
            return _refuse(
                "this dashboard is read-only; start it with `nasforge serve DIR "
                "--allow-control` to stop or change a running search from it (or use "
                "`nasforge stop` and `nasforge set`)"
            )
        if not auth.same_origin(
            req.headers.get("Origin"), req.headers.get("Host"), req.headers.get("Sec-Fetch-Site")
        ):
            return _refuse(
                "a control request must come from the dashboard's own page (its Origin "
                "header must name the address it is sent to)"
            )
        return None
