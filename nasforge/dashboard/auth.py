"""Who may read the dashboard: :class:`TokenGate` returns 401 to a request without the
serving token, and :func:`needs_token` says on which addresses one is required.

A dashboard on 127.0.0.1, ``localhost`` or ``::1`` (exactly these) is reachable only from its
own machine and needs no token. On any other address (another interface, ``0.0.0.0``, even
another loopback address such as 127.0.0.2, which a reader cannot tell from an interface by
its name) every request must carry the token, in one of three ways:

- ``?token=TOKEN`` in the URL: the address ``nasforge serve`` prints. The answer sets a
  cookie, so the page's own requests (scripts, Dash's callbacks) carry it from then on;
- the cookie ``nasforge_token_PORT`` set that way (one per port, so that two dashboards on
  one machine do not overwrite each other's);
- an ``Authorization: Bearer TOKEN`` header, for scripts (``curl -H``).

Tokens are compared in constant time. The cookie is ``HttpOnly`` and ``SameSite=Strict``.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from nasforge.errors import ConfigError

__all__ = [
    "TOKEN_FREE_HOSTS",
    "TOKEN_ENV",
    "MIN_TOKEN_LENGTH",
    "TokenGate",
    "needs_token",
    "make_token",
    "check_token",
]

#: the addresses served without a token: the loopback names a user types, nothing else
TOKEN_FREE_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: the environment variable that gives the token (``--token`` wins over it)
TOKEN_ENV = "NASFORGE_TOKEN"
#: the shortest token accepted: a guessable token would make the gate a formality
MIN_TOKEN_LENGTH = 16

_Start = Callable[..., Any]


def needs_token(host: str) -> bool:
    """Returns whether serving on ``host`` requires a token: every address but exactly
    127.0.0.1, ``localhost`` and ``::1``."""
    return host.strip("[]").lower() not in TOKEN_FREE_HOSTS


def make_token() -> str:
    """Returns a new random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def check_token(token: str) -> str:
    """Returns ``token`` when it can guard a dashboard.

    Raises:
        ConfigError: it is shorter than :data:`MIN_TOKEN_LENGTH` or holds characters that
            do not survive a URL unquoted (anything but letters, digits, ``-``, ``_``, ``.``
            and ``~``).
    """
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"the dashboard token has {len(token)} characters; give at least "
            f"{MIN_TOKEN_LENGTH} (leave --token and {TOKEN_ENV} unset and nasforge serve "
            "makes one)"
        )
    bad = sorted({c for c in token if not (c.isascii() and (c.isalnum() or c in "-_.~"))})
    if bad:
        raise ConfigError(
            f"the dashboard token holds {''.join(bad)!r}; use only letters, digits, '-', '_', "
            "'.' and '~' so that it can be pasted into a URL as it is"
        )
    return token


class TokenGate:
    """Returns the wrapped WSGI app's answer to requests that carry ``token``, and 401 to the
    rest (see the module's docstring for the three ways to carry it).

    Invariants: no request without the token reaches the app; a request with it in the URL
    leaves with the cookie set.
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], token: str, port: int) -> None:
        self.app = app
        self._token = token.encode()
        self.cookie = f"nasforge_token_{port}"

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._token)

    def __call__(self, environ: dict[str, Any], start_response: _Start) -> Iterable[bytes]:
        auth = environ.get("HTTP_AUTHORIZATION", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        cookies = SimpleCookie()
        try:
            cookies.load(environ.get("HTTP_COOKIE", ""))
        except Exception:  # a malformed cookie header is no token
            cookies = SimpleCookie()
        morsel = cookies.get(self.cookie)
        if self._matches(bearer) or self._matches(morsel.value if morsel else None):
            return self.app(environ, start_response)
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if any(self._matches(v) for v in query.get("token", [])):
            cookie = f"{self.cookie}={self._token.decode()}; Path=/; HttpOnly; SameSite=Strict"

            def start_with_cookie(status: str, headers: list, exc_info: Any = None) -> Any:
                return start_response(status, [*headers, ("Set-Cookie", cookie)], exc_info)

            return self.app(environ, start_with_cookie)
        body = (
            b"401 Unauthorized: this nasforge dashboard needs its token. Open the address "
            b"`nasforge serve` printed (it ends in ?token=...), or send the header "
            b"'Authorization: Bearer TOKEN'.\n"
        )
        start_response(
            "401 Unauthorized",
            [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("WWW-Authenticate", 'Bearer realm="nasforge dashboard"'),
            ],
        )
        return [body]
