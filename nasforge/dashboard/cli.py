"""The ``nasforge serve`` command: a local web dashboard over run directories.

Importing this module imports no web framework, so ``nasforge --help`` works without the
``dashboard`` extra; the command itself says how to install it when it is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from nasforge.dashboard.auth import TOKEN_ENV
from nasforge.errors import ConfigError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Returns None; adds the ``serve`` subcommand."""
    p = subparsers.add_parser(
        "serve",
        help="a local web dashboard over run directories (needs nasforge[dashboard])",
        description=(
            "Serve a web dashboard over run directories, or folders that hold them: an "
            "overview of runs, and per run its trials, charts, Pareto front, architectures, "
            "decision importance, progress, config and each trial's log, updated live. "
            "Read-only unless --allow-control; listens on 127.0.0.1 unless --host says "
            "otherwise, and then asks every request for a token."
        ),
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="a run directory or a folder of runs")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help=(
            "address to listen on (default 127.0.0.1); any address but 127.0.0.1, localhost "
            "and ::1 is served by waitress and needs a token"
        ),
    )
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument(
        "--interval", type=float, default=2.0, help="seconds between live updates (default 2)"
    )
    p.add_argument(
        "--token",
        default=None,
        help=(
            f"the token every request must carry (default: ${TOKEN_ENV}, else one made and "
            "printed at start when the address needs one); giving one requires it on "
            "127.0.0.1 too"
        ),
    )
    p.add_argument(
        "--allow-control",
        action="store_true",
        help=(
            "offer, on a run's page, what `nasforge stop` and `nasforge set` do: stop the "
            "search, cancel one trial, change n_trials and concurrency (default: read-only); "
            "only to a browser that opened the printed address, which carries a control key "
            "made for this start"
        ),
    )
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("dash") is None:
        raise ConfigError(
            "nasforge serve needs the dashboard extra (Dash), which is not installed; install "
            "it with: pip install 'nasforge[dashboard]'"
        )
    from nasforge.dashboard import auth
    from nasforge.dashboard.app import serve  # imports Dash

    if args.interval <= 0:
        raise ConfigError(f"--interval {args.interval} must be a positive number of seconds")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    made = token is None and auth.needs_token(args.host)
    if made:
        token = auth.make_token()

    def announce(url: str) -> None:
        steers = "?control=" in url or "&control=" in url
        if token is None:
            note = (
                "its control key is shown only here: whoever opens this address can steer "
                "the served runs; "
                if steers
                else ""
            )
            print(f"nasforge dashboard on {url} ({note}Ctrl-C stops it)", flush=True)
        elif made:
            print(
                f"nasforge dashboard on {url}\n  (its token is shown only here: anyone with "
                "this address can read the served runs"
                + (", and steer them" if steers else "")
                + "; Ctrl-C stops it)",
                flush=True,
            )
        else:
            bare, _, rest = _without_token(url).partition("?")
            at = f"{bare}?token=YOUR_TOKEN" + (f"&{rest}" if rest else "")
            print(
                f"nasforge dashboard on {bare} (open {at} once, or send "
                "'Authorization: Bearer YOUR_TOKEN'; Ctrl-C stops it)",
                flush=True,
            )

    serve(
        args.dirs,
        host=args.host,
        port=args.port,
        interval_s=args.interval,
        token=token,
        announce=announce,
        allow_control=args.allow_control,
    )
    return 0


def _without_token(url: str) -> str:
    """Returns ``url`` without its ``token`` query parameter (a token the user gave is never
    printed), keeping the others (the control key)."""
    base, _, query = url.partition("?")
    rest = [kv for kv in query.split("&") if kv and not kv.startswith("token=")]
    return base + ("?" + "&".join(rest) if rest else "")
