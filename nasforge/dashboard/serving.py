"""The dashboard's waitress server, with the limits that keep it reachable when someone who
may reach its port is not its user: :func:`make_server`.

    body size     a request body over :data:`MAX_BODY` is refused with 413 before it is read
                  (waitress's own default buffers up to 1 GiB to disk); a smaller one is held
                  in memory, never written to the temporary disk
    unknown body  on a token-served dashboard, a request that announces a body and does not
                  carry the token gets 401 and its connection is closed as soon as its headers
                  are read, before any of the body is: bodies of strangers never reach memory
                  or the temporary disk
    per client    at most :data:`MAX_PER_CLIENT` connections from one client address at once;
                  a further one is closed as it is accepted, so that one client cannot take
                  all of waitress's :data:`MAX_CONNECTIONS`
    slow request  a request must arrive whole (headers and body) within
                  :data:`REQUEST_DEADLINE_S` of its first byte, and a new connection must
                  bring its first request within that time: a client that trickles bytes
                  (slowloris) is disconnected; an idle kept-alive connection is closed after
                  :data:`IDLE_S`

On 127.0.0.1 every local client has the same address, so the per-client bound is one bound
for all of them there; the deadline still frees what a slow client holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "MAX_PER_CLIENT",
    "REQUEST_DEADLINE_S",
    "IDLE_S",
    "make_server",
    "require_token",
]

#: the largest request body served (bytes); the dashboard's own requests (Dash callbacks)
#: are a few kilobytes
MAX_BODY = 1 << 20
#: the most connections open at once (waitress's ``connection_limit``)
MAX_CONNECTIONS = 100
#: the most connections open at once from one client address
MAX_PER_CLIENT = 24
#: seconds a request may take to arrive, from its first byte (or from the connection's
#: opening, for its first request)
REQUEST_DEADLINE_S = 10.0
#: seconds a kept-alive connection may stay idle between requests
IDLE_S = 60

#: whether a request may send a body: the environ-like mapping of its headers and query
Authorized = Callable[[dict[str, str]], bool]


def _channel_class(authorized: Authorized | None, deadline: float) -> type:
    """Returns waitress's channel class with the limits of the module's docstring."""
    from waitress.channel import HTTPChannel
    from waitress.parser import HTTPRequestParser
    from waitress.utilities import Error

    class Unauthorized(Error):
        code = 401
        reason = "Unauthorized"

    class Parser(HTTPRequestParser):  # type: ignore[misc]
        def __init__(self, adj: Any) -> None:
            super().__init__(adj)
            self.begun = time.monotonic()

        def parse_header(self, header_plus: bytes) -> None:
            super().parse_header(header_plus)
            announced = self.content_length > 0 or self.chunked
            if authorized is None or not announced or getattr(self, "error", None) is not None:
                return
            environ = {
                "HTTP_AUTHORIZATION": self.headers.get("AUTHORIZATION", ""),
                "HTTP_COOKIE": self.headers.get("COOKIE", ""),
                "QUERY_STRING": self.query or "",
            }
            if not authorized(environ):
                self.error = Unauthorized(
                    "this nasforge dashboard needs its token; a request without it may not "
                    "send a body"
                )
                self.body_rcv = None  # complete now: nothing of the body is read
                self.connection_close = True

    class Channel(HTTPChannel):  # type: ignore[misc]
        parser_class = Parser

        def __init__(self, server: Any, sock: Any, addr: Any, adj: Any, map: Any = None) -> None:
            super().__init__(server, sock, addr, adj, map)
            self.opened = time.monotonic()
            self.spoke = False  # whether the client has sent anything yet
            client = _client(addr)
            same = sum(_client(c.addr) == client for c in list(server.active_channels.values()))
            if same > MAX_PER_CLIENT:
                self.will_close = True  # closed at the next turn of the loop, unread

        def received(self, data: bytes) -> bool:
            self.spoke = self.spoke or bool(data)
            return bool(super().received(data))

        def readable(self) -> bool:
            request = self.request
            if request is not None and not request.completed:
                late = time.monotonic() - request.begun > deadline
            else:  # a connection that never sent a byte: its first request is late
                late = not self.spoke and time.monotonic() - self.opened > deadline
            if late:
                self.will_close = True  # writable() now; handle_write closes it
            return bool(super().readable())

    return Channel


def _client(addr: Any) -> Any:
    """Returns the client address of a socket address (its host part)."""
    return addr[0] if isinstance(addr, (tuple, list)) and addr else addr


def make_server(
    app: Any,
    host: str,
    port: int,
    threads: int = 8,
    deadline: float = REQUEST_DEADLINE_S,
) -> tuple[Any, int]:
    """Returns a bound waitress server of the WSGI ``app`` on ``host``:``port``, with the
    limits of the module's docstring (:func:`require_token` adds the refusal of bodies
    without the token), and the port it is bound to.

    Raises:
        ImportError: waitress is not installed.
        OSError: the address cannot be bound.
    """
    from waitress import create_server

    sockets: dict[int, Any] = {}
    server = create_server(
        app,
        map=sockets,
        host=host,
        port=port,
        threads=threads,
        max_request_body_size=MAX_BODY,
        inbuf_overflow=MAX_BODY,  # a body that may be read stays in memory
        connection_limit=MAX_CONNECTIONS,
        channel_timeout=IDLE_S,
        cleanup_interval=1,
    )
    listeners = [s for s in sockets.values() if hasattr(s, "channel_class")]
    server.nasforge_limits = (listeners, deadline)
    _set_channels(server, None)
    return server, int(listeners[0].effective_port)


def require_token(server: Any, authorized: Authorized) -> None:
    """Returns None after making ``server`` (:func:`make_server`) answer 401, and close the
    connection, to a request that announces a body while ``authorized(environ)`` is false,
    before reading the body (``environ`` holds ``HTTP_AUTHORIZATION``, ``HTTP_COOKIE`` and
    ``QUERY_STRING``)."""
    _set_channels(server, authorized)


def _set_channels(server: Any, authorized: Authorized | None) -> None:
    """Returns None after giving every listening socket of ``server`` the limited channel."""
    listeners, deadline = server.nasforge_limits
    channel = _channel_class(authorized, deadline)
    for listener in listeners:
        listener.channel_class = channel
