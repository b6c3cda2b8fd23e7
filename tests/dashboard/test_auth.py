"""The dashboard's token beyond 127.0.0.1: the gate alone, then real `nasforge serve`
processes on 127.0.0.1 and on 127.0.0.2 (standing in for another interface), read with plain
HTTP and with headless Chromium. Nothing listens beyond loopback."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasforge.dashboard.auth import (
    TokenGate,
    check_token,
    make_token,
    needs_token,
    path_prefix,
)
from nasforge.errors import ConfigError
from tests.dashboard.conftest import MULTITRIAL, SPACE, Server, nasforge, wait_for

OTHER = "127.0.0.2"  # another loopback address: an interface the gate must not trust


def test_only_the_loopback_names_are_token_free() -> None:
    """127.0.0.1, localhost and ::1 (exactly) need no token; 127.0.0.2, 0.0.0.0, :: and a LAN
    address do."""
    assert not any(map(needs_token, ["127.0.0.1", "localhost", "LOCALHOST", "::1", "[::1]"]))
    assert all(map(needs_token, [OTHER, "0.0.0.0", "::", "192.168.1.5", "example.org"]))


def test_a_short_or_unquotable_token_is_refused() -> None:
    """A token shorter than 16 characters or with URL-special characters is a ConfigError;
    a made token passes."""
    with pytest.raises(ConfigError, match="has 6 characters; give at least 16"):
        check_token("secret")
    with pytest.raises(ConfigError, match="holds '&'"):
        check_token("a" * 20 + "&b")
    token = make_token()
    assert check_token(token) == token and len(token) >= 40
    # 1 in 64 of secrets.token_urlsafe starts with '-', which `--token TOKEN` reads as a flag
    assert all(make_token()[0].isalnum() for _ in range(2000))


def _call(gate: TokenGate, query: str = "", **headers: str) -> tuple[str, dict, bytes]:
    """Returns the status, headers and body of one GET through ``gate``."""
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "QUERY_STRING": query}
    environ.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    seen: dict[str, Any] = {}

    def start(status: str, hdrs: list, exc_info: Any = None) -> None:
        seen["status"], seen["headers"] = status, dict(hdrs)

    body = b"".join(gate(environ, start))
    return seen["status"], seen["headers"], body


def test_the_gate_lets_only_the_token_through_in_each_of_its_three_ways() -> None:
    """Without the token, or with a wrong one, the app is never called (401 and a Bearer
    challenge); the right token in the URL (which sets an HttpOnly, SameSite=Strict cookie
    named for the port), in that cookie or as a Bearer header reaches it."""
    calls: list[str] = []

    def app(environ: dict, start: Any) -> list[bytes]:
        calls.append(environ["PATH_INFO"])
        start("200 OK", [("Content-Type", "text/plain")])
        return [b"runs"]

    token = make_token()
    gate = TokenGate(app, token, 8051)
    wrong = "x" + token[1:]
    for query, headers in [
        ("", {}),
        (f"token={wrong}", {}),
        ("", {"authorization": f"Bearer {wrong}"}),
        ("", {"cookie": f"nasforge_token_8051={wrong}"}),
        ("", {"cookie": f"nasforge_token_8050={token}"}),  # another port's dashboard
        ("", {"authorization": f"Basic {token}"}),
    ]:
        status, hdrs, body = _call(gate, query, **headers)
        assert status.startswith("401") and b"needs its token" in body, (query, headers)
        assert hdrs["WWW-Authenticate"].startswith("Bearer")
    assert calls == []
    status, hdrs, body = _call(gate, f"tab=charts&token={token}")
    assert (status, body) == ("200 OK", b"runs")
    assert hdrs["Set-Cookie"] == (f"nasforge_token_8051={token}; Path=/; HttpOnly; SameSite=Strict")
    assert _call(gate, cookie=f"other=1; nasforge_token_8051={token}")[0] == "200 OK"
    assert _call(gate, authorization=f"Bearer {token}")[0] == "200 OK"
    assert len(calls) == 3


# -- real servers -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a folder ``runs`` holding one finished multi-trial run."""
    for module in ("dash", "waitress"):
        pytest.importorskip(module, reason="needs the extra: pip install 'nasforge[dashboard]'")
    base = tmp_path_factory.mktemp("auth")
    (base / "dash_space.py").write_text(SPACE)
    (base / "multitrial.py").write_text(MULTITRIAL)
    runs = base / "runs"
    nasforge("run", str(base / "multitrial.py"), "--dir", str(runs / "multitrial"), cwd=base)
    return runs


@pytest.fixture(scope="module")
def remote(run_folder: Path) -> Iterator[Server]:
    """Returns `nasforge serve --host 127.0.0.2` with the token it made and printed."""
    srv = Server([run_folder], run_folder.parent, host=OTHER, env={"NASFORGE_TOKEN": ""})
    try:
        yield srv
    finally:
        srv.stop()


def _get(url: str, **headers: str) -> tuple[int, dict, bytes]:
    """Returns the status, headers and body of a GET of ``url`` (errors included)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _dash_asset(html: bytes) -> str:
    """Returns the path of the first Dash script the page loads from the installed packages."""
    text = html.decode()
    at = text.index("/_dash-component-suites/")
    start = text.rindex('"', 0, at) + 1  # the whole path, the app's prefix included
    return text[start : text.index('"', at)]


def test_beyond_loopback_waitress_serves_and_every_endpoint_wants_the_token(
    remote: Server,
) -> None:
    """On 127.0.0.2 the token is made and printed once; waitress answers; the page, Dash's
    layout, its scripts and its callbacks are 401 without the token and served with it (URL,
    then the cookie it set, or a Bearer header); nothing listens on 127.0.0.1's same port."""
    token = remote.token
    assert token and len(token) >= 40
    assert remote.output.count(token) == 1
    status, headers, body = _get(remote.url + "/")
    assert status == 401 and b"needs its token" in body
    assert headers["Server"] == "waitress"
    prefix = path_prefix(token)  # the app lives under the token's secret path
    assert remote.printed == f"{remote.url}{prefix}?token={token}"
    status, headers, page = _get(remote.printed)
    assert status == 200 and b"nasforge dashboard" in page
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie == f"nasforge_token_{remote.port}={token}"
    assert f"Path={prefix};" in headers["Set-Cookie"]
    paths = [prefix + "_dash-layout", prefix + "_dash-dependencies", _dash_asset(page)]
    assert all(p.startswith(prefix) for p in paths)
    for path in paths:
        assert _get(remote.url + path)[0] == 401, path
        assert _get(remote.url + path, Cookie=cookie)[0] == 200, path
        assert _get(remote.url + path, Authorization=f"Bearer {token}")[0] == 200, path
    url = remote.url + prefix + "_dash-update-component"
    req = urllib.request.Request(url, data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 401
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", remote.port)) != 0  # bound to 127.0.0.2 only


def test_the_printed_address_opens_the_dashboard_in_a_browser(browser: Any, remote: Server) -> None:
    """Chromium opening the printed address (with its token) shows the overview and a run's
    trial table, both filled by Dash's callbacks through the cookie; without the cookie the
    same pages are 401."""
    from selenium.webdriver.common.by import By

    def rows(b: Any) -> list[str]:
        return [e.text for e in b.find_elements(By.CSS_SELECTOR, "tr.nf-run")]

    prefix = path_prefix(remote.token or "")
    for opened in (remote.printed, f"{remote.url}/?token={remote.token}"):  # both lead in
        browser.delete_all_cookies()
        browser.get(opened)
        shown = wait_for(browser, lambda b: rows(b), "the run's row in the overview")
        assert shown[0].startswith("runs/multitrial") and "finished" in shown[0]
        assert browser.current_url.split("?")[0] == remote.url + prefix
    browser.get(f"{remote.url}{prefix}run/runs/multitrial")  # no token in the URL: the cookie
    count = wait_for(
        browser,
        lambda b: b.find_element(By.CSS_SELECTOR, "#trial-count").text,
        "the trial count",
    )
    assert count.endswith("trials")
    cells = '#trial-table td[data-dash-column="id"]'
    wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, cells), "trial rows")
    browser.delete_all_cookies()
    browser.get(f"{remote.url}{prefix}run/runs/multitrial")
    assert "needs its token" in browser.find_element(By.TAG_NAME, "body").text


def test_the_token_cookie_reaches_no_other_service_on_the_host(
    browser: Any, remote: Server
) -> None:
    """After Chromium opened the dashboard with its token, a page of another service on the
    same host (another port) receives no nasforge cookie: the cookie's Path is the secret
    prefix, which no other service serves."""
    import http.server
    import threading

    from selenium.webdriver.common.by import By

    seen: list[str] = []

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            seen.append(self.headers.get("Cookie", ""))
            body = b"<html><body>other service</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.ThreadingHTTPServer((OTHER, 0), Other)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        browser.delete_all_cookies()
        browser.get(remote.printed)
        wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "tr.nf-run"), "the overview")
        names = [c["name"] for c in browser.get_cookies()]
        assert f"nasforge_token_{remote.port}" in names  # the dashboard did set it
        for path in ("/", path_prefix("x" * 43), "/run/runs/multitrial"):
            browser.get(f"http://{OTHER}:{other.server_port}{path}")
            wait_for(browser, lambda b: "other service" in b.page_source, "the other page")
        assert len(seen) >= 3 and not any("nasforge_token" in c for c in seen), seen
    finally:
        other.shutdown()
        other.server_close()
        thread.join()


def _raw(host: str, port: int, request: bytes, timeout: float = 10) -> bytes:
    """Returns the start of the answer to raw ``request`` bytes (what arrived in time)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(request)
        try:
            return s.recv(4096)
        except TimeoutError:
            return b""


def test_a_huge_body_is_refused_before_it_is_read(remote: Server) -> None:
    """A request announcing a 900 MiB body (and sending none of it) gets 413 at once, token
    or not, instead of waitress waiting to buffer it to disk."""
    host, port = OTHER, remote.port
    for auth_header in (b"", f"Authorization: Bearer {remote.token}\r\n".encode()):
        answer = _raw(
            host,
            port,
            b"POST /_dash-update-component HTTP/1.1\r\nHost: x\r\n"
            + auth_header
            + b"Content-Type: application/json\r\nContent-Length: 943718400\r\n\r\n{",
        )
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_loopback_mode_refuses_a_rebound_host_name(run_folder: Path) -> None:
    """DNS rebinding: the token-free dashboard on 127.0.0.1 answers `Host: localhost:PORT`
    and `127.0.0.1:PORT`, and refuses `Host: attacker.example:PORT` with 421 (a page of that
    site, its name re-pointed at 127.0.0.1, reads nothing)."""
    local = Server([run_folder], run_folder.parent, env={"NASFORGE_TOKEN": ""})
    try:
        for host in (f"localhost:{local.port}", f"127.0.0.1:{local.port}"):
            assert _get(local.url + "/_dash-layout", Host=host)[0] == 200, host
        for host in (f"attacker.example:{local.port}", "attacker.example", "127.0.0.1:1"):
            status, _, body = _get(local.url + "/_dash-layout", Host=host)
            assert status == 421 and b"answers only to" in body, host
    finally:
        local.stop()


def test_loopback_stays_token_free_and_a_given_token_is_asked_and_not_printed(
    run_folder: Path,
) -> None:
    """127.0.0.1 answers without a token (Flask's server, nothing printed with a token); a
    token from NASFORGE_TOKEN on 127.0.0.2, or from --token on 127.0.0.1, is required and
    never printed."""
    local = Server([run_folder], run_folder.parent, env={"NASFORGE_TOKEN": ""})
    try:
        status, headers, _ = _get(local.url + "/_dash-layout")
        assert status == 200 and local.printed == local.url + "/"
        assert local.token is None and "?token=" not in local.output
        # quiet: no development-server banner, no line per request
        assert "development server" not in local.output and "_dash-layout" not in local.output
    finally:
        local.stop()
    token = make_token()
    for host, args, env in [
        (OTHER, (), {"NASFORGE_TOKEN": token}),
        ("127.0.0.1", ("--token", token), {"NASFORGE_TOKEN": ""}),
    ]:
        srv = Server([run_folder], run_folder.parent, host=host, args=args, env=env)
        try:
            assert _get(srv.url + "/")[0] == 401
            assert _get(srv.url + "/", Authorization=f"Bearer {token}")[0] == 200
            assert token not in srv.output and "YOUR_TOKEN" in srv.output
        finally:
            srv.stop()


def test_a_short_token_stops_serve_before_it_listens(run_folder: Path) -> None:
    """`nasforge serve --host 127.0.0.2 --token short` exits with 2 and the reason."""
    from nasforge.cli import main

    assert main(["serve", str(run_folder), "--host", OTHER, "--token", "short"]) == 2


def _connect_from(source: str, host: str, port: int) -> socket.socket:
    """Returns a TCP connection to ``host``:``port`` from the loopback address ``source``."""
    s = socket.socket()
    s.settimeout(10)
    s.bind((source, 0))
    s.connect((host, port))
    return s


def test_slow_connections_of_one_client_leave_the_dashboard_to_the_others(
    remote: Server,
) -> None:
    """110 connections from one client (127.0.0.3) that send the start of a request and
    nothing more, without the token: a request with the token from another client is still
    answered at once (one client holds at most a bounded number of connections)."""
    slow: list[socket.socket] = []
    try:
        for _ in range(110):
            s = _connect_from("127.0.0.3", OTHER, remote.port)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finished
            slow.append(s)
        start = time.monotonic()
        ok = socket.create_connection((OTHER, remote.port), timeout=10)
        with ok:
            ok.sendall(
                f"GET {path_prefix(remote.token or '')} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {remote.token}\r\nConnection: close\r\n\r\n".encode()
            )
            try:
                answer = ok.recv(4096)
            except TimeoutError:
                answer = b""
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert time.monotonic() - start < 5
    finally:
        for s in slow:
            s.close()


def test_a_body_without_the_token_is_refused_before_it_is_read(remote: Server) -> None:
    """A POST without the token that announces a body under the 1 MiB limit (800 kB) and
    sends none of it gets 401 at once and its connection closed: the body is never read
    (neither into memory nor to the temporary disk), where before it was awaited."""
    with socket.create_connection((OTHER, remote.port), timeout=10) as s:
        s.sendall(
            b"POST /_dash-update-component HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 800000\r\n\r\n{"
        )
        answer, closed = b"", False
        while not closed:
            try:
                chunk = s.recv(4096)
            except TimeoutError:  # still waiting for the body
                break
            answer, closed = answer + chunk, not chunk
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert closed


@pytest.mark.slow
def test_a_request_that_trickles_in_is_cut_off(remote: Server) -> None:
    """A connection that sends its request a byte a second, and one that sends nothing, are
    closed by the server once the request deadline has passed."""
    from nasforge.dashboard.serving import REQUEST_DEADLINE_S

    quiet = socket.create_connection((OTHER, remote.port), timeout=30)
    slow = socket.create_connection((OTHER, remote.port), timeout=30)
    start = time.monotonic()
    try:
        closed = False
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 60:
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(1)
        elapsed = time.monotonic() - start
        assert closed and REQUEST_DEADLINE_S <= elapsed < REQUEST_DEADLINE_S + 8, elapsed
        assert quiet.recv(4096) == b""  # closed by the server, nothing sent
    finally:
        quiet.close()
        slow.close()


def test_chromium_reaches_the_dashboard_while_another_client_holds_110_slow_connections(
    browser: Any, remote: Server
) -> None:
    """While one client (127.0.0.3) holds 110 connections that never finish a request,
    Chromium opening the printed address shows the overview with its run."""
    from selenium.webdriver.common.by import By

    slow: list[socket.socket] = []
    try:
        for _ in range(110):
            s = _connect_from("127.0.0.3", OTHER, remote.port)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        browser.delete_all_cookies()
        browser.get(remote.printed)
        shown = wait_for(
            browser,
            lambda b: [e.text for e in b.find_elements(By.CSS_SELECTOR, "tr.nf-run")],
            "the run's row in the overview",
            timeout=10,
        )
        assert shown[0].startswith("runs/multitrial")
    finally:
        for s in slow:
            s.close()
