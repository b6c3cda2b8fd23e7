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
only.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path

import dash

from nasforge.dashboard import auth, callbacks, layout, steering
from nasforge.dashboard.data import TrialCache
from nasforge.dashboard.runs import ServedRuns
from nasforge.errors import ConfigError

__all__ = ["create_app", "serve", "open_address", "DEFAULT_HOST", "DEFAULT_PORT", "MAX_BODY"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
#: the largest request body served (bytes): waitress refuses a longer one with 413 before
#: reading it (its own default buffers up to 1 GiB to disk, token or not); the dashboard's
#: own requests (Dash callbacks) are a few kilobytes
MAX_BODY = 1 << 20


def create_app(
    directories: Sequence[str | Path],
    interval_s: float = 2.0,
    prefix: str = "/",
    allow_control: bool = False,
) -> dash.Dash:
    """Returns the dashboard app over run directories (or folders of runs), refreshing live
    views every ``interval_s`` seconds, served under the URL path ``prefix``; read-only
    unless ``allow_control``, which adds a panel that stops a running search, cancels one of
    its trials or changes its settings (:mod:`nasforge.dashboard.steering`).

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
    app.layout = layout.shell(max(250, int(interval_s * 1000)))
    callbacks.register(app, served, TrialCache(), allow_control)
    steering.guard(app.server, allow_control)
    return app


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

    waitress serves it, refusing request bodies over :data:`MAX_BODY` before reading them.
    On 127.0.0.1, ``localhost`` or ``::1`` with no ``token``, everyone who can reach the
    address (only this machine) may read it, but only through a loopback name
    (:class:`~nasforge.dashboard.auth.HostCheck`). On any other address, or when a ``token``
    is given, it lives under the token's secret path prefix behind
    :class:`~nasforge.dashboard.auth.TokenGate`: requests without the token (made here when
    none is given) get 401.
    ``announce`` receives the address to open, with its token, once the port is bound
    (default: the log). ``allow_control`` offers the actions of ``nasforge stop`` and
    ``nasforge set`` on a run's page (off: read-only, no such endpoint answers).

    Raises:
        ConfigError: no directory given, or one is not a directory; the token is too short
            or not URL-safe; waitress is not installed.
    """
    gated = token is not None or auth.needs_token(host)
    token = auth.check_token(token) if token is not None else auth.make_token()
    prefix = auth.path_prefix(token) if gated else "/"
    app = create_app(directories, interval_s, prefix, allow_control)
    announce = announce or (lambda url: log.info("nasforge dashboard on %s", url))
    try:
        from waitress import create_server
    except ImportError as exc:
        raise ConfigError(
            "nasforge serve needs waitress, a production web server, which is not installed; "
            "install it with: pip install 'nasforge[dashboard]'"
        ) from exc
    server = create_server(
        app.server, host=host, port=port, threads=8, max_request_body_size=MAX_BODY
    )
    bound = int(server.effective_port)
    flask_app = app.server
    base = f"http://{open_address(host)}:{bound}"
    if gated:
        gate = auth.TokenGate(flask_app.wsgi_app, token, bound, prefix)
        flask_app.wsgi_app = gate  # type: ignore[method-assign]
        announce(f"{base}{prefix}?token={token}")
    else:
        flask_app.wsgi_app = auth.HostCheck(flask_app.wsgi_app, bound)  # type: ignore[method-assign]
        announce(f"{base}/")
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
