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

A token-served dashboard lives under a secret path prefix, ``/nf-<digest of the token>/``
(:func:`path_prefix`), and its cookie's ``Path`` is that prefix: browsers scope cookies by
host, not by port, so a cookie for ``/`` would also go to every other service on the same
host; one for a path no other service knows goes only to the dashboard. A request with the
token outside the prefix (``/?token=...``, a Bearer request for ``/``) is redirected into it.

Tokens are compared in constant time. The cookie is ``HttpOnly`` and ``SameSite=Strict``.
Cookie headers are read leniently (:func:`cookie_value`): another application's cookie that
holds a space or JSON does not hide the token's.

The token-free loopback mode answers only requests whose ``Host`` is a loopback name with
the served port (:class:`HostCheck`): a web page whose name an attacker re-points at
127.0.0.1 (DNS rebinding) gets 421 and reads nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from nasforge.errors import ConfigError

__all__ = [
    "TOKEN_FREE_HOSTS",
    "TOKEN_ENV",
    "MIN_TOKEN_LENGTH",
    "TokenGate",
    "HostCheck",
    "needs_token",
    "path_prefix",
    "cookie_value",
    "make_token",
    "check_token",
    "same_origin",
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


def path_prefix(token: str) -> str:
    """Returns the secret path prefix a dashboard served with ``token`` lives under,
    ``/nf-<24 hex digits>/``: a one-way digest of the token, so printing it gives the token
    away no more than the digits of a hash do, and the same token keeps its bookmarks."""
    digest = hashlib.sha256(b"nasforge dashboard path\0" + token.encode()).hexdigest()
    return f"/nf-{digest[:24]}/"


def cookie_value(header: str, name: str) -> str | None:
    """Returns the value of cookie ``name`` in a ``Cookie:`` header, or None.

    Lenient, as browsers are: pairs are split at ``;``, each at its first ``=``; a pair that
    is not ``name=value`` (a space, JSON, quotes in another application's cookie) is skipped
    instead of hiding every other cookie. Surrounding double quotes are removed."""
    for part in header.split(";"):
        key, eq, value = part.strip().partition("=")
        if eq and key.strip() == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return value
    return None


def make_token() -> str:
    """Returns a new random token (URL-safe, 256 bits) that starts with a letter or digit,
    so that it can be given back as ``--token TOKEN`` (one starting with ``-`` reads as a
    flag there)."""
    while True:
        token = secrets.token_urlsafe(32)
        if token[0].isalnum():
            return token


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


def same_origin(origin: str | None, host: str | None, fetch_site: str | None = None) -> bool:
    """Returns whether a request that changes something comes from the dashboard's own page:
    its ``Origin`` header names the host and port the request was sent to (its ``Host``),
    and the browser's ``Sec-Fetch-Site``, when sent, is ``same-origin``.

    A browser sends ``Origin`` with every POST, and a page cannot set it: a page of another
    site, or of another port of this host, sends its own and is told apart, whether or not
    the browser sent the token's cookie along. A request without ``Origin`` (not a
    browser's) is refused too: scripts use ``nasforge stop`` and ``nasforge set``.
    """
    if fetch_site is not None and fetch_site.strip().lower() != "same-origin":
        return False
    if not origin or not host:
        return False
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or parts.path not in ("", "/"):
        return False
    return parts.netloc.lower() == host.strip().lower()


class TokenGate:
    """Returns the wrapped WSGI app's answer to requests that carry ``token``, and 401 to the
    rest (see the module's docstring for the three ways to carry it); the app is served
    under ``prefix`` (:func:`path_prefix` of the token), and a request with the token
    elsewhere is redirected there.

    Invariants: no request without the token reaches the app; a request with it in the URL
    leaves with the cookie set, scoped to ``prefix``.
    """

    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        token: str,
        port: int,
        prefix: str = "/",
    ) -> None:
        self.app = app
        self._token = token.encode()
        self.cookie = f"nasforge_token_{port}"
        self.prefix = prefix

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._token)

    def _in_url(self, environ: dict[str, Any]) -> bool:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        return any(self._matches(v) for v in query.get("token", []))

    def allows(self, environ: dict[str, Any]) -> bool:
        """Returns whether a request (its WSGI ``environ``, or one holding only
        ``HTTP_AUTHORIZATION``, ``HTTP_COOKIE`` and ``QUERY_STRING``) carries the token, in
        any of the three ways."""
        auth = environ.get("HTTP_AUTHORIZATION", "")
        bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        cookie = cookie_value(environ.get("HTTP_COOKIE", ""), self.cookie)
        return self._in_url(environ) or self._matches(bearer) or self._matches(cookie)

    def __call__(self, environ: dict[str, Any], start_response: _Start) -> Iterable[bytes]:
        if not self.allows(environ):
            return _refuse(start_response)
        query = parse_qs(environ.get("QUERY_STRING", ""))
        in_url = self._in_url(environ)
        path = environ.get("PATH_INFO", "") or "/"
        if not (path + "/").startswith(self.prefix):
            rest = {k: v for k, v in query.items() if k != "token"}
            target = (
                self.prefix.rstrip("/") + path + ("?" + urlencode(rest, doseq=True) if rest else "")
            )
            headers = [("Location", target), ("Content-Length", "0")]
            if in_url:
                headers.append(("Set-Cookie", self._set_cookie()))
            start_response("302 Found", headers)
            return [b""]
        if not in_url:
            return self.app(environ, start_response)
        set_cookie = self._set_cookie()

        def start_with_cookie(status: str, headers: list, exc_info: Any = None) -> Any:
            return start_response(status, [*headers, ("Set-Cookie", set_cookie)], exc_info)

        return self.app(environ, start_with_cookie)

    def _set_cookie(self) -> str:
        return (
            f"{self.cookie}={self._token.decode()}; Path={self.prefix}; HttpOnly; SameSite=Strict"
        )


def _refuse(start_response: _Start) -> list[bytes]:
    """Returns the 401 answer to a request without the token."""
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


class HostCheck:
    """Returns the wrapped WSGI app's answer to requests whose ``Host`` header is a loopback
    name (127.0.0.1, ``localhost``, ``[::1]``) with the served ``port``, and 421 to the rest.

    Guards the token-free loopback mode against DNS rebinding: a page of ``evil.example``
    whose name is re-pointed at 127.0.0.1 sends ``Host: evil.example:PORT`` and is refused.
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], port: int) -> None:
        self.app = app
        self.port = port
        names = ("127.0.0.1", "localhost", "[::1]")
        self.allowed = {f"{n}:{port}" for n in names} | (set(names) if port == 80 else set())

    def __call__(self, environ: dict[str, Any], start_response: _Start) -> Iterable[bytes]:
        host = environ.get("HTTP_HOST", "").strip().lower().rstrip(".")
        if host in self.allowed:
            return self.app(environ, start_response)
        body = (
            f"421 Misdirected Request: this nasforge dashboard answers only to "
            f"http://127.0.0.1:{self.port}/ or http://localhost:{self.port}/ (Host header "
            f"{host[:80]!r} refused: a page of another site may not read it)\n"
        ).encode()
        start_response(
            "421 Misdirected Request",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]
