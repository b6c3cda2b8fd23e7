"""The dashboard as a Dash app: :func:`create_app` builds it over the served run directories,
:func:`serve` runs it on a local address.

Safe by default: it binds to 127.0.0.1 unless told otherwise; every script, style and chart
library comes from the installed Python packages (``serve_locally``: nothing is fetched from
the internet, so it works on a cluster without one); debugging tools, hot reload and Dash's
MCP endpoint are off; its only endpoints serve pages, files of the installed packages, and
callbacks that read run records read-only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import dash

from nasforge.dashboard import callbacks, layout
from nasforge.dashboard.data import TrialCache
from nasforge.dashboard.runs import ServedRuns

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
        update_title=None,  # the tab title does not flicker on every live update
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
) -> None:
    """Returns None when the server stops; serves the dashboard at ``http://host:port/``.

    Raises:
        ConfigError: no directory given, or one is not a directory.
    """
    app = create_app(directories, interval_s)
    log.info("nasforge dashboard on http://%s:%d/ (Ctrl-C stops it)", host, port)
    app.run(host=host, port=port, debug=False)
