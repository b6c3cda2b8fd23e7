"""The dashboard as a Dash app: :func:`create_app` builds it over the served run directories,
:func:`serve` runs it with waitress (a production server: quiet, no per-request log), on
127.0.0.1 answering only loopback ``Host`` names, elsewhere behind a token.

Safe by default: it binds to 127.0.0.1 unless told otherwise, and any other address needs a
token (:mod:`nasforge.dashboard.auth`); every script, style and chart library comes from the
installed Python packages (``serve_locally``: nothing is fetched from the internet, so it works
on a cluster without one); debugging tools, hot reload and Dash's MCP endpoint are off; its
only endpoints serve pages, files of the installed packages, and callbacks that read run
records read-only. Only when started with ``allow_control`` does it also offer the actions of
``nasforge stop`` and ``nasforge set`` (:mod:`nasforge.dashboard.steering`), to its own page
only, and only with the control key that the printed address carries. Dash's own routes answer
a path they do not serve with 404 and a malformed callback request with 400, never 500. The
server's limits (body size, connections per client, slow requests) are
:mod:`nasforge.dashboard.serving`'s.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import dash
import flask
from dash.exceptions import DependencyException

from nasforge.dashboard import auth, callbacks, layout, steering
from nasforge.dashboard.data import TrialCache
from nasforge.dashboard.runs import ServedRuns
from nasforge.dashboard.serving import MAX_BODY, make_server, require_token
from nasforge.errors import ConfigError

__all__ = ["create_app", "serve", "open_address", "DEFAULT_HOST", "DEFAULT_PORT", "MAX_BODY"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050


def create_app(
    directories: Sequence[str | Path],
    interval_s: float = 2.0,
    prefix: str = "/",
    allow_control: bool = False,
    control_key: str | None = None,
) -> dash.Dash:
    """Returns the dashboard app over run directories (or folders of runs), refreshing live
    views every ``interval_s`` seconds, served under the URL path ``prefix``; read-only
    unless ``allow_control``, which adds a panel that stops a running search, cancels one of
    its trials or changes its settings (:mod:`nasforge.dashboard.steering`), for a page that
    holds the control key ``control_key`` (made when not given; the app's
    ``server.config[steering.KEY_CONFIG]`` keeps it).

    Raises:
        ConfigError: no directory given, or one is not a directory.
    """
    served = ServedRuns(directories)
    app = dash.Dash(
        __name__,
        title="nasforge dashboard",
        serve_locally=True,  # the JavaScript (plotly.js included) ships in the Python packages
        suppress_callback_exceptions=True,  # tabs render their components on demand
        update_title="",  # the tab title does not flicker on every live update (falsy: off)
        enable_mcp=False,
        include_assets_files=False,
        url_base_pathname=prefix,
    )
    key = (control_key or steering.make_key()) if allow_control else None
    extra = [steering.key_store()] if allow_control else []
    app.layout = layout.shell(max(250, int(interval_s * 1000)), extra)
    callbacks.register(app, served, TrialCache(), allow_control)
    steering.guard(app.server, allow_control, key)
    _harden(app)
    if key is not None:
        app.server.config[steering.KEY_CONFIG] = key
    return app


def _bad_request(status: int, text: str) -> flask.Response:
    return flask.Response(f"{status} {text}\n", status, mimetype="text/plain")


def _harden(app: dash.Dash) -> None:
    """Returns None after making Dash's own routes answer what they do not serve with a
    4xx, not a 500 and a logged traceback: a file path under ``_dash-component-suites/``
    that names no file Dash registered (404), and a callback request that is not a JSON
    object naming a registered callback's output with lists of inputs and states (400)."""
    server = app.server

    @server.errorhandler(DependencyException)
    def _no_such_file(_: Exception) -> flask.Response:
        return _bad_request(404, "Not Found: Dash serves no such file")

    @server.before_request
    def _check_callback() -> flask.Response | None:
        req = flask.request
        if req.method != "POST" or not req.path.endswith("_dash-update-component"):
            return None
        body: Any = req.get_json(silent=True)
        ok = (
            isinstance(body, dict)
            and isinstance(body.get("output"), str)
            and body["output"] in app.callback_map
            and isinstance(body.get("inputs", []), list)
            and isinstance(body.get("state", []), list)
            and isinstance(body.get("changedPropIds", []), list)
            and all(isinstance(i, dict) for i in body.get("inputs", []) + body.get("state", []))
        )
        if ok:
            return None
        return _bad_request(
            400,
            "Bad Request: not a callback request of this dashboard (a JSON object "
            "naming one of its outputs, with lists of inputs and states)",
        )


def serve(
    directories: Sequence[str | Path],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    interval_s: float = 2.0,
    token: str | None = None,
    announce: Callable[[str], None] | None = None,
    allow_control: bool = False,
) -> None:
    """Returns None when the server stops; serves the dashboard at ``http://host:port/``.

    waitress serves it, with the limits of :mod:`nasforge.dashboard.serving` (bodies over
    :data:`MAX_BODY` refused before they are read, so are bodies without the token where one
    is needed; connections per client bounded; slow requests cut off). On 127.0.0.1,
    ``localhost`` or ``::1`` with no ``token``, everyone who can reach the
    address (only this machine) may read it, but only through a loopback name
    (:class:`~nasforge.dashboard.auth.HostCheck`). On any other address, or when a ``token``
    is given, it lives under the token's secret path prefix behind
    :class:`~nasforge.dashboard.auth.TokenGate`: requests without the token (made here when
    none is given) get 401.
    ``announce`` receives the address to open, with its token, once the port is bound
    (default: the log). ``allow_control`` offers the actions of ``nasforge stop`` and
    ``nasforge set`` on a run's page (off: read-only, no such endpoint answers) to a browser
    that opened the announced address, which carries a control key made for this start
    (``control=KEY``), even on 127.0.0.1.

    Raises:
        ConfigError: no directory given, or one is not a directory; the token is too short
            or not URL-safe; waitress is not installed.
    """
    gated = token is not None or auth.needs_token(host)
    token = auth.check_token(token) if token is not None else auth.make_token()
    prefix = auth.path_prefix(token) if gated else "/"
    key = steering.make_key() if allow_control else None
    app = create_app(directories, interval_s, prefix, allow_control, key)
    announce = announce or (lambda url: log.info("nasforge dashboard on %s", url))
    try:
        server, bound = make_server(app.server, host, port)
    except ImportError as exc:
        raise ConfigError(
            "nasforge serve needs waitress, a production web server, which is not installed; "
            "install it with: pip install 'nasforge[dashboard]'"
        ) from exc
    flask_app = app.server
    base = f"http://{open_address(host)}:{bound}"
    query = {steering.KEY_PARAM: key} if key else {}
    if gated:
        gate = auth.TokenGate(flask_app.wsgi_app, token, bound, prefix)
        flask_app.wsgi_app = gate  # type: ignore[method-assign]
        require_token(server, gate.allows)
        announce(f"{base}{prefix}?{urlencode({'token': token, **query})}")
    else:
        flask_app.wsgi_app = auth.HostCheck(flask_app.wsgi_app, bound)  # type: ignore[method-assign]
        announce(f"{base}/" + (f"?{urlencode(query)}" if query else ""))
    log.info("Ctrl-C stops the dashboard")
    try:
        server.run()
    finally:
        server.close()


def open_address(host: str) -> str:
    """Returns ``host`` as it goes into a URL to open: IPv6 in brackets, and for the addresses
    that mean every interface (``0.0.0.0``, ``::``) this machine's outward address (the one
    its default route leaves from; no packet is sent), else the loopback address."""
    if host in ("0.0.0.0", "::", ""):
        six = host == "::"
        family = socket.AF_INET6 if six else socket.AF_INET
        probe = ("2001:db8::1", 9) if six else ("192.0.2.1", 9)  # documentation addresses
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect(probe)  # UDP: only picks the route
                found = str(s.getsockname()[0])
        except OSError:
            found = "::1" if six else "127.0.0.1"
        host = found
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
