"""The dashboard as a Dash app: :func:`create_app` builds it over the served run directories,
:func:`serve` runs it (on 127.0.0.1 with Flask's server, elsewhere with waitress and a token).

Safe by default: it binds to 127.0.0.1 unless told otherwise, and any other address needs a
token (:mod:`nasforge.dashboard.auth`); every script, style and chart library comes from the
installed Python packages (``serve_locally``: nothing is fetched from the internet, so it works
on a cluster without one); debugging tools, hot reload and Dash's MCP endpoint are off; its
only endpoints serve pages, files of the installed packages, and callbacks that read run
records read-only.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path

import dash

from nasforge.dashboard import auth, callbacks, layout
from nasforge.dashboard.data import TrialCache
from nasforge.dashboard.runs import ServedRuns
from nasforge.errors import ConfigError

__all__ = ["create_app", "serve", "DEFAULT_HOST", "DEFAULT_PORT"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050


def create_app(directories: Sequence[str | Path], interval_s: float = 2.0) -> dash.Dash:
    """Returns the dashboard app over run directories (or folders of runs), refreshing live
    views every ``interval_s`` seconds.

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
    )
    app.layout = layout.shell(max(250, int(interval_s * 1000)))
    callbacks.register(app, served, TrialCache())
    return app


def serve(
    directories: Sequence[str | Path],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    interval_s: float = 2.0,
    token: str | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Returns None when the server stops; serves the dashboard at ``http://host:port/``.

    On 127.0.0.1, ``localhost`` or ``::1`` with no ``token``, Flask's development server
    answers everyone who can reach the address (only this machine). On any other address, or
    when a ``token`` is given, waitress serves it behind
    :class:`~nasforge.dashboard.auth.TokenGate`: requests without the token (made here when
    none is given) get 401.
    ``announce`` receives the address to open, with its token, once the port is bound
    (default: the log).

    Raises:
        ConfigError: no directory given, or one is not a directory; the token is too short
            or not URL-safe; waitress is not installed where it is needed.
    """
    gated = token is not None or auth.needs_token(host)
    token = auth.check_token(token) if token is not None else auth.make_token()
    app = create_app(directories, interval_s)
    announce = announce or (lambda url: log.info("nasforge dashboard on %s", url))
    if not gated:
        announce(f"http://{_url_host(host)}:{port}/")
        log.info("Ctrl-C stops the dashboard")
        app.run(host=host, port=port, debug=False)
        return
    try:
        from waitress import create_server
    except ImportError as exc:
        raise ConfigError(
            f"serving on {host} (or with a token) needs waitress, a production web server, "
            "which is not installed; install it with: pip install 'nasforge[dashboard]'"
        ) from exc
    server = create_server(app.server, host=host, port=port, threads=8)
    bound = int(server.effective_port)
    flask_app = app.server
    flask_app.wsgi_app = auth.TokenGate(flask_app.wsgi_app, token, bound)  # type: ignore[method-assign]
    announce(f"http://{_url_host(host)}:{bound}/?token={token}")
    log.info("Ctrl-C stops the dashboard")
    try:
        server.run()
    finally:
        server.close()


def _url_host(host: str) -> str:
    """Returns ``host`` as it goes into a URL: IPv6 in brackets, and this machine's name for
    the addresses that mean every interface."""
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
