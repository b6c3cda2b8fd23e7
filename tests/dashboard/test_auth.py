"""The dashboard's token beyond 127.0.0.1: the gate alone, then real `nasforge serve`
processes on 127.0.0.1 and on 127.0.0.2 (standing in for another interface), read with plain
HTTP and with headless Chromium. Nothing listens beyond loopback."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasforge.dashboard.auth import TokenGate, check_token, make_token, needs_token
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
    start = text.index("/_dash-component-suites/")
    return text[start : text.index('"', start)]


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
    status, headers, page = _get(f"{remote.url}/?token={token}")
    assert status == 200 and b"nasforge dashboard" in page
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie == f"nasforge_token_{remote.port}={token}"
    for path in ("/_dash-layout", "/_dash-dependencies", _dash_asset(page)):
        assert _get(remote.url + path)[0] == 401, path
        assert _get(remote.url + path, Cookie=cookie)[0] == 200, path
        assert _get(remote.url + path, Authorization=f"Bearer {token}")[0] == 200, path
    req = urllib.request.Request(remote.url + "/_dash-update-component", data=b"{}", method="POST")
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

    browser.get(f"{remote.url}/?token={remote.token}")
    shown = wait_for(browser, lambda b: rows(b), "the run's row in the overview")
    assert shown[0].startswith("runs/multitrial") and "finished" in shown[0]
    browser.get(f"{remote.url}/run/0/runs/multitrial")  # no token in the URL: the cookie
    count = wait_for(
        browser,
        lambda b: b.find_element(By.CSS_SELECTOR, "#trial-count").text,
        "the trial count",
    )
    assert count.endswith("trials")
    cells = '#trial-table td[data-dash-column="id"]'
    wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, cells), "trial rows")
    browser.delete_all_cookies()
    browser.get(f"{remote.url}/run/0/runs/multitrial")
    assert "needs its token" in browser.find_element(By.TAG_NAME, "body").text


def test_loopback_stays_token_free_and_a_given_token_is_asked_and_not_printed(
    run_folder: Path,
) -> None:
    """127.0.0.1 answers without a token (Flask's server, nothing printed with a token); a
    token from NASFORGE_TOKEN on 127.0.0.2, or from --token on 127.0.0.1, is required and
    never printed."""
    local = Server([run_folder], run_folder.parent, env={"NASFORGE_TOKEN": ""})
    try:
        status, headers, _ = _get(local.url + "/_dash-layout")
        assert status == 200 and "waitress" not in headers.get("Server", "")
        assert local.token is None and "?token=" not in local.output
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
