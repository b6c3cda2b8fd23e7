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
key       a dashboard that allows control makes a secret *control key* when it starts
          (:func:`make_key`), which only the address ``nasforge serve`` prints carries
          (``?control=KEY``). The page opened from it keeps the key in the browser's storage
          for its own origin (:data:`KEY_STORE`, ``localStorage``: no other port or site
          reads it, unlike a cookie) and sends it with every control request. Reading needs
          no key, on 127.0.0.1 as before; steering does, even there: any local user can
          reach 127.0.0.1 and set any ``Origin`` with curl, but only whoever started the
          dashboard saw the key
guard     :func:`guard` stands before Dash's callback dispatch. A callback request that
          names a control component (an id starting with :data:`CONTROL_PREFIX`) gets
          403 when control is off, and, when it is on, unless it comes from the
          dashboard's own page (:func:`nasforge.dashboard.auth.same_origin`: its
          ``Origin`` is the address the request was sent to; a page of another site or
          of another port cannot make the browser press a button: cross-site request
          forgery) and carries the control key. Beyond loopback the token gate stands
          before it, as for every request
"""

from __future__ import annotations

import hmac
import logging
import os
from typing import Any
from urllib.parse import parse_qs

import dash
import flask
from dash import Input, Output, State, dcc, html

from nasforge.dashboard import auth, layout
from nasforge.dashboard.runs import ServedRuns
from nasforge.errors import ConfigError, NasforgeError
from nasforge.run import control
from nasforge.run.requests import CONTROLS
from nasforge.run.trial_logs import dropped_bytes, read_log, shown_log

__all__ = [
    "CONTROL_PREFIX",
    "VIA",
    "KEY_PARAM",
    "KEY_STORE",
    "KEY_CONFIG",
    "panel",
    "key_store",
    "make_key",
    "register",
    "guard",
]

log = logging.getLogger(__name__)

#: the id prefix of every control component: the guard knows a control request by it
CONTROL_PREFIX = "nf-control-"
#: who asked, as the run note records it
VIA = "dashboard"
#: the query parameter of the printed address that hands the page the control key
KEY_PARAM = "control"
#: the id of the page's store of the control key (not a control component: setting it is
#: no control request)
KEY_STORE = "control-key"
#: where the Flask app keeps the control key of a dashboard that allows control
KEY_CONFIG = "NASFORGE_CONTROL_KEY"
#: the id of the panel's line saying that this browser lacks the control key
KEY_NOTE = "control-key-note"
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
            html.Div(id=KEY_NOTE, style={"color": "#a00"}),
        ],
        id=_id("panel"),
        style={"border": "1px solid #ddd", "padding": "6px 8px", "margin": "4px 0 8px"},
    )  # fmt: skip


def make_key() -> str:
    """Returns a new control key (URL-safe, 256 bits, as a token)."""
    return auth.make_token()


def key_store() -> dcc.Store:
    """Returns the page's store of the control key: the browser's ``localStorage`` of the
    dashboard's own origin, so that the key outlives a reload and a new tab, and no page of
    another origin (another port of this host included) reads it."""
    return dcc.Store(id=KEY_STORE, storage_type="local")


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
            path = shown_log(served.resolve(key), trial)  # a running in-process trial's too
        except NasforgeError as exc:
            return layout.message(str(exc)), None
        try:
            st = os.lstat(path)  # a link is stamped as itself, and refused below
            new = f"{trial}:{st.st_size}:{st.st_mtime_ns}"  # text: JSON numbers lose digits
        except OSError:
            new = f"{trial}:none"
        if new == stamp:
            return dash.no_update, dash.no_update
        if new.endswith(":none"):
            text = (
                f"trial {trial} has no log: it has not started, or it ran in-process or on "
                "Ray and ended having printed nothing and not failed (no file is kept for "
                "such a trial), or the run was made before nasforge kept logs"
            )
            return layout.message(text, error=False), new
        try:
            text = read_log(path)  # bounded; never a link, a FIFO or a device
        except NasforgeError as exc:
            return layout.message(str(exc)), new
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
    """Returns None; registers the control panel's callback, and the one that keeps the
    control key a printed address brings (``?control=KEY``) in the page's store."""

    @app.callback(Output(KEY_STORE, "data"), Input("url", "search"), prevent_initial_call=False)
    def keep_key(search: str | None) -> Any:
        """Returns the control key the address carries, or no update when it carries none
        (the stored key stays)."""
        given = parse_qs((search or "").lstrip("?")).get(KEY_PARAM)
        return given[0] if given else dash.no_update

    @app.callback(Output(KEY_NOTE, "children"), Input(KEY_STORE, "data"))
    def key_note(stored: Any) -> str:
        """Returns what the panel says when this browser holds no control key, or a stale
        one (the buttons would be refused): which address to open."""
        if _matches(stored, flask.current_app.config.get(KEY_CONFIG)):
            return ""
        return (
            "This browser holds no control key of this dashboard (or one of an earlier "
            "start), so its buttons are refused: open the address `nasforge serve "
            f"--allow-control` printed (it ends in {KEY_PARAM}=...) to steer from here."
        )

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
        State(KEY_STORE, "data"),  # checked by the guard before this runs
        prevent_initial_call=True,
    )
    def act(
        _f: Any, _c: Any, _t: Any, _s: Any, trial: Any, n: Any, c: Any, key: str, _k: Any
    ) -> Any:
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


def _given_key(body: dict[str, Any]) -> str | None:
    """Returns the control key a callback request carries (its :data:`KEY_STORE` state)."""
    states = body.get("state")
    for item in states if isinstance(states, list) else []:
        if isinstance(item, dict) and item.get("id") == KEY_STORE:
            value = item.get("value")
            return value if isinstance(value, str) else None
    return None


def _matches(given: Any, key: Any) -> bool:
    """Returns whether ``given`` is the control key ``key`` (compared in constant time)."""
    if not isinstance(given, str) or not isinstance(key, str) or not key:
        return False
    return hmac.compare_digest(given.encode(), key.encode())


def guard(server: flask.Flask, allow_control: bool, key: str | None = None) -> None:
    """Returns None after installing, before every request of ``server``, the check that
    refuses (403) a control request when ``allow_control`` is off, or when it does not come
    from the dashboard's own page carrying the control ``key``.

    Raises:
        ConfigError: ``allow_control`` without a key (a dashboard that steers has one).
    """
    if allow_control and not key:
        raise ConfigError(
            "guard(server, allow_control=True) needs the dashboard's control key: give "
            "key=steering.make_key() (create_app makes one)"
        )

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
        if not _matches(_given_key(body) if isinstance(body, dict) else None, key):
            return _refuse(
                "a control request must carry this dashboard's control key: open the "
                f"address `nasforge serve --allow-control` printed (it ends in "
                f"{KEY_PARAM}=...) once in this browser; reading needs no key"
            )
        return None
