"""The dashboard's trial log and control panel (nasforge.dashboard.steering), called through
Flask's test client over real records and a real search running in a thread: read-only
unless allowed, actions reach the running engine and are recorded, control requests need the
dashboard's own origin and, beyond loopback, the token."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nasforge.dashboard.auth import TokenGate, path_prefix, same_origin
from nasforge.engine import Experiment
from nasforge.run.control import CONTROL
from nasforge.run.store import Store
from nasforge.run.trial_logs import LOG_LIMIT, trial_log
from nasforge.space.search_space import Decision, SearchSpace
from tests.dashboard.records import SECRET, hostile_run, make_record
from tests.runwait import wait_until

pytest.importorskip("dash", reason="needs the dashboard extra: pip install 'nasforge[dashboard]'")

SPACE = SearchSpace([Decision("d", "value", tuple(range(60)))])
ORIGIN = {"Origin": "http://localhost"}  # the test client's requests go to Host: localhost
#: the control key the tests' dashboards are made with (as `nasforge serve` prints its own)
KEY = "k" * 20 + "-control-key"


def _slow(arch: dict[str, Any], report: Any) -> float:
    time.sleep(0.15)
    return float(arch["d"])


@contextlib.contextmanager
def _search(directory: Path) -> Iterator[threading.Thread]:
    """Returns (as a context) a thread running a 60-trial in-process grid search of slow
    trials in ``directory``; it is stopped (cancelling) on exit if still running."""
    exp = Experiment(SPACE, _slow, "grid", directory=directory, executor="inprocess",
                     progress="off")  # fmt: skip
    thread = threading.Thread(target=exp.run, daemon=True)
    thread.start()
    try:
        _wait(lambda: (directory / "run.db").exists() and _trials(directory) >= 1, "a trial")
        yield thread
    finally:
        if thread.is_alive():
            from nasforge.run.control import stop

            with contextlib.suppress(Exception):
                stop(directory, "cancel")
            thread.join(60)


def _wait(check: Any, what: str, limit: float = 60.0) -> None:
    assert wait_until(check, limit, poll=0.05), f"timed out waiting for {what}"


def _trials(directory: Path) -> int:
    try:
        with Store.open(directory, readonly=True) as store:
            return len(store.trials(light=True))
    except Exception:  # noqa: BLE001 - not written yet
        return 0


def _notes(directory: Path) -> list[dict[str, Any]]:
    with Store.open(directory, readonly=True) as store:
        return store.notes("control")


def _press(
    client: Any,
    button: str,
    values: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    prefix: str = "/",
    key: str | None = KEY,
) -> Any:
    """Returns the answer to the control callback's request, as the page sends it when
    ``button`` (nf-control-<button>) is pressed with the inputs ``values``, carrying the
    control ``key`` its store holds (None: none)."""
    values = {"run-key.data": "runs/live", **(values or {})}
    # the stop and cancel buttons send their confirmation's clicks (the browser's confirm()
    # accepted), Apply its own
    ids = {"stop-finish": "submit_n_clicks", "stop-cancel": "submit_n_clicks",
           "cancel": "submit_n_clicks", "set": "n_clicks"}  # fmt: skip
    body = {
        "output": "nf-control-result.children",
        "outputs": {"id": "nf-control-result", "property": "children"},
        "inputs": [
            {"id": f"nf-control-{b}", "property": p, "value": 1 if b == button else None}
            for b, p in ids.items()
        ],
        "state": [
            {"id": i, "property": p, "value": values.get(f"{i}.{p}")}
            for i, p in [
                ("nf-control-trial", "value"),
                ("nf-control-n-trials", "value"),
                ("nf-control-concurrency", "value"),
                ("run-key", "data"),
            ]
        ]
        + [{"id": "control-key", "property": "data", "value": key}],
        "changedPropIds": [f"nf-control-{button}.{ids[button]}"],
    }
    return client.post(prefix + "_dash-update-component", json=body, headers=headers or {})


def _said(answer: Any) -> str:
    return str(answer.get_json()["response"]["nf-control-result"]["children"])


def _page(client: Any, key: str, prefix: str = "/") -> str:
    """Returns the run page's component tree (as JSON text) for ``key``."""
    body = {
        "output": "page.children",
        "outputs": {"id": "page", "property": "children"},
        "inputs": [
            {"id": "url", "property": "pathname", "value": f"{prefix}run/{key}"},
            {"id": "url", "property": "search", "value": ""},
        ],
        "changedPropIds": ["url.pathname"],
    }
    answer = client.post(prefix + "_dash-update-component", json=body)
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


def test_a_read_only_dashboard_shows_no_control_and_refuses_a_forged_request(
    tmp_path: Path,
) -> None:
    """Without allow_control no control component or callback exists, and a control request
    (from the page's own origin) gets 403 naming the option; nothing reaches the run."""
    from nasforge.dashboard.app import create_app

    with _search(tmp_path / "runs" / "live") as thread:
        client = create_app([tmp_path / "runs"]).server.test_client()
        assert "nf-control" not in client.get("/_dash-dependencies").get_data(as_text=True)
        assert "nf-control" not in _page(client, "runs/live")
        answer = _press(client, "stop-cancel", headers=ORIGIN)
        assert answer.status_code == 403
        assert "--allow-control" in answer.get_data(as_text=True)
        assert not list((tmp_path / "runs" / "live" / CONTROL).glob("*.json"))
        assert thread.is_alive() and not _notes(tmp_path / "runs" / "live")


def test_actions_reach_the_running_search_and_are_recorded_as_the_command_line_s(
    tmp_path: Path,
) -> None:
    """With allow_control the run page has the panel; `set` changes n_trials in the record
    and `stop` ends the search as stopped, each a control note naming via=dashboard; a bad
    value, or a concurrency above what the run can run at once, gets the command line's
    message and leaves nothing; a finished run says nothing is running."""
    from nasforge.dashboard.app import create_app

    directory = tmp_path / "runs" / "live"
    with _search(directory) as thread:
        client = create_app(
            [tmp_path / "runs"], allow_control=True, control_key=KEY
        ).server.test_client()
        assert "nf-control-panel" in _page(client, "runs/live")
        bad = _press(client, "set", {"nf-control-n-trials.value": 2.5}, ORIGIN)
        assert bad.status_code == 200 and "n_trials must be a positive int" in _said(bad)
        many = _said(_press(client, "set", {"nf-control-concurrency.value": 40}, ORIGIN))
        assert "concurrency=40 is more than this run can run at once" in many, many
        assert "one trial at a time" in many and "concurrency=1 or fewer" in many
        assert not list((directory / CONTROL).glob("*.json"))
        answer = _press(client, "set", {"nf-control-n-trials.value": 40}, ORIGIN)
        assert answer.status_code == 200 and "n_trials=40" in _said(answer)
        _wait(lambda: any(n["event"] == "set" for n in _notes(directory)), "the set note")
        answer = _press(client, "stop-finish", headers=ORIGIN)
        assert "to stop" in _said(answer)
        thread.join(60)
        assert not thread.is_alive()
    with Store.open(directory, readonly=True) as store:
        assert store.state() == "stopped"
        assert store.config()["multitrial"]["n_trials"] == 40
        assert len(store.trials()) < 40
    notes = {n["event"]: n for n in _notes(directory)}
    assert notes["set"]["n_trials"] == 40 and notes["set"]["via"] == "dashboard"
    assert notes["stop"]["mode"] == "finish" and notes["stop"]["via"] == "dashboard"
    late = _press(client, "stop-cancel", headers=ORIGIN)
    assert "no run is running" in _said(late)


def test_a_control_request_from_another_origin_is_refused(tmp_path: Path) -> None:
    """A control request with no Origin, another site's, another port's, or a cross-site
    Sec-Fetch-Site gets 403 and leaves no request; read callbacks need no Origin."""
    from nasforge.dashboard.app import create_app

    make_record(tmp_path / "runs" / "live", n=3)
    client = create_app(
        [tmp_path / "runs"], allow_control=True, control_key=KEY
    ).server.test_client()
    for headers in [
        {},
        {"Origin": "http://evil.example"},
        {"Origin": "http://localhost:9999"},
        {"Origin": "null"},
        {**ORIGIN, "Sec-Fetch-Site": "cross-site"},
        {**ORIGIN, "Sec-Fetch-Site": "same-site"},
    ]:
        answer = _press(client, "stop-cancel", headers=headers)
        assert answer.status_code == 403, headers
        assert "own page" in answer.get_data(as_text=True)
    assert not (tmp_path / "runs" / "live" / CONTROL).exists()
    assert "nf-control-panel" in _page(client, "runs/live")  # reads need no Origin
    answer = _press(client, "stop-cancel", headers={**ORIGIN, "Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 200 and "no run is running" in _said(answer)


def test_same_origin_compares_the_origin_with_the_host() -> None:
    """Origin must name exactly the Host (scheme http or https, no path)."""
    assert same_origin("http://127.0.0.1:8050", "127.0.0.1:8050")
    assert same_origin("https://Node.Example", "node.example", "same-origin")
    assert not same_origin("http://127.0.0.1:8051", "127.0.0.1:8050")
    assert not same_origin("http://127.0.0.1:8050", "127.0.0.1:8050", "cross-site")
    assert not same_origin(None, "127.0.0.1:8050")
    assert not same_origin("file://127.0.0.1:8050", "127.0.0.1:8050")
    assert not same_origin("http://127.0.0.1:8050/x", "127.0.0.1:8050")


def test_beyond_loopback_an_action_needs_the_token(tmp_path: Path) -> None:
    """Behind the token gate (as served beyond loopback) a control request without the token
    gets 401 and reaches nothing; with it (and the page's Origin) the search takes it."""
    from nasforge.dashboard.app import create_app

    token = "t" * 20 + "-steering"
    prefix = path_prefix(token)
    directory = tmp_path / "runs" / "live"
    with _search(directory) as thread:
        app = create_app([tmp_path / "runs"], prefix=prefix, allow_control=True, control_key=KEY)
        app.server.wsgi_app = TokenGate(app.server.wsgi_app, token, 80, prefix)  # type: ignore[method-assign]
        client = app.server.test_client()
        answer = _press(client, "stop-cancel", headers=ORIGIN, prefix=prefix)
        assert answer.status_code == 401
        assert not list((directory / CONTROL).glob("*.json")) and thread.is_alive()
        bearer = {**ORIGIN, "Authorization": f"Bearer {token}"}
        answer = _press(client, "stop-cancel", headers=bearer, prefix=prefix)
        assert answer.status_code == 200 and "to stop" in _said(answer)
        thread.join(60)
        assert not thread.is_alive()
    assert [n["event"] for n in _notes(directory)][0] == "stop"


def _case(arch: dict[str, Any], report: Any) -> float:
    print(f"trial of case {arch['case']} says hello")
    if arch["case"] == "broken":
        raise ValueError("broken on purpose")
    if arch["case"] == "loud":
        for _ in range(2 * LOG_LIMIT // 100):
            print("z" * 99)
    return 1.0


def _log_record(directory: Path) -> dict[str, int]:
    """Returns {case: trial id} after running an in-process search of three trials: one that
    prints, one that fails, one that prints more than a log keeps."""
    space = SearchSpace([Decision("case", "value", ("ok", "broken", "loud"))])
    exp = Experiment(space, _case, "grid", directory=directory, executor="inprocess",
                     progress="off")  # fmt: skip
    exp.run()
    return {t.arch["case"]: t.id for t in exp.trials()}


def _log_body(key: str, trial: Any, stamp: Any = None) -> dict[str, Any]:
    """Returns the request the page sends for trial ``trial``'s log view."""
    return {
        "output": "..arch-log.children...arch-log-stamp.data..",
        "outputs": [
            {"id": "arch-log", "property": "children"},
            {"id": "arch-log-stamp", "property": "data"},
        ],
        "inputs": [
            {"id": "arch-a", "property": "value", "value": trial},
            {"id": "tick", "property": "n_intervals", "value": 3},
        ],
        "state": [
            {"id": "run-key", "property": "data", "value": key},
            {"id": "arch-log-stamp", "property": "data", "value": stamp},
        ],
        "changedPropIds": ["arch-a.value"],
    }


def _log_view(client: Any, key: str, trial: Any, stamp: Any = None) -> Any:
    return client.post("/_dash-update-component", json=_log_body(key, trial, stamp))


def test_the_log_view_shows_what_nasforge_logs_shows(tmp_path: Path, capsys: Any) -> None:
    """A trial's log view holds the text `nasforge logs DIR N` prints; a failed trial's ends
    with its traceback; a long one says it is truncated; an unchanged log is not sent again;
    a trial without a log says so."""
    from nasforge.cli import main
    from nasforge.dashboard.app import create_app

    ids = _log_record(tmp_path / "runs" / "logs")
    client = create_app([tmp_path / "runs"]).server.test_client()
    for case, trial in ids.items():
        answer = _log_view(client, "runs/logs", trial)
        assert answer.status_code == 200
        view = answer.get_json()["response"]
        text = view["arch-log"]["children"]["props"]["children"][1]["props"]["children"]
        note = view["arch-log"]["children"]["props"]["children"][0]["props"]["children"]
        assert main(["logs", str(tmp_path / "runs" / "logs"), str(trial)]) == 0
        assert text == capsys.readouterr().out
        # the loud trial's first lines are the ones dropped
        assert (f"trial of case {case} says hello" in text) == (case != "loud")
        assert ("truncated" in note) == (case == "loud"), note
        if case == "broken":
            assert "Traceback" in text and "ValueError: broken on purpose" in text
        again = _log_view(client, "runs/logs", trial, view["arch-log-stamp"]["data"])
        assert again.status_code in (200, 204)  # Dash 4 answers 200 and no update
        assert not (again.get_json(silent=True) or {}).get("response"), "the log sent again"
    trial_log(tmp_path / "runs" / "logs", ids["ok"]).unlink()
    answer = _log_view(client, "runs/logs", ids["ok"])
    assert "has no log" in answer.get_data(as_text=True)


def _hidden(component: Any, ids: set[str], hidden: bool = False) -> dict[str, bool]:
    """Returns component id -> whether it is hidden (inside a ``display: none`` element)."""
    hidden = hidden or (getattr(component, "style", None) or {}).get("display") == "none"
    found = {component.id: hidden} if getattr(component, "id", None) in ids else {}
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children]:
        if child is not None and not isinstance(child, str):
            found.update(_hidden(child, ids, hidden))
    return found


def test_the_panel_shows_only_the_controls_the_run_s_kind_declared() -> None:
    """A one-shot run's panel shows its stop button and says it stops at a boundary; the
    trial and settings controls are hidden. A multi-trial run's panel shows every control."""
    from nasforge.dashboard.steering import panel

    ids = {f"nf-control-{n}" for n in ("stop-finish", "stop-cancel", "cancel", "n-trials", "set")}
    one_shot = panel("oneshot", frozenset({"stop"}))
    assert _hidden(one_shot, ids) == {
        "nf-control-stop-finish": False, "nf-control-stop-cancel": True,
        "nf-control-cancel": True, "nf-control-n-trials": True, "nf-control-set": True,
    }  # fmt: skip
    assert "can be stopped" in str(one_shot)
    assert not any(_hidden(panel("multitrial", None), ids).values())
    assert "takes no requests" in str(panel("ofa-deploy", frozenset()))


def _store_key(client: Any, search: str) -> Any:
    """Returns what the page's key store receives when the address's query is ``search``."""
    body = {
        "output": "control-key.data",
        "outputs": {"id": "control-key", "property": "data"},
        "inputs": [{"id": "url", "property": "search", "value": search}],
        "changedPropIds": ["url.search"],
    }
    answer = client.post("/_dash-update-component", json=body)
    return (answer.get_json(silent=True) or {}).get("response", {}).get("control-key", {})


def test_steering_needs_the_control_key_even_on_loopback(tmp_path: Path) -> None:
    """On loopback, where reading needs no token, a control request with the page's own
    Origin (curl forges it at will) but no control key, a wrong one or the key of an
    earlier start gets 403 and leaves no request; the printed address (?control=KEY) puts
    the key in the page's store, and with it the request reaches the run."""
    from nasforge.dashboard.app import create_app
    from nasforge.dashboard.steering import KEY_CONFIG

    directory = tmp_path / "runs" / "live"
    with _search(directory) as thread:
        client = create_app([tmp_path / "runs"], allow_control=True, control_key=KEY).server
        client = client.test_client()
        earlier = create_app([tmp_path / "runs"], allow_control=True).server.config[KEY_CONFIG]
        assert earlier != KEY and len(earlier) >= 40  # a key is made per start
        for key in (None, "", KEY[:-1], KEY + "x", earlier, 7):
            answer = _press(client, "stop-cancel", headers=ORIGIN, key=key)  # type: ignore[arg-type]
            assert answer.status_code == 403, key
            assert "control key" in answer.get_data(as_text=True)
        assert not list((directory / CONTROL).glob("*.json")) and thread.is_alive()
        assert _store_key(client, "") == {}  # an address without a key leaves the store
        assert _store_key(client, f"?tab=trials&control={KEY}") == {"data": KEY}
        answer = _press(client, "stop-cancel", headers=ORIGIN, key=KEY)
        assert answer.status_code == 200 and "to stop" in _said(answer)
        thread.join(60)
        assert not thread.is_alive()


def _alarm(seconds: float) -> Any:
    """Returns a context in which a call still blocked after ``seconds`` raises
    TimeoutError (a FIFO opened for reading blocks until someone writes it)."""

    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        def ring(*_: Any) -> None:
            raise TimeoutError(f"still blocked after {seconds} s")

        old = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    return ctx()


def test_the_log_view_refuses_a_link_and_a_fifo_and_keeps_serving(tmp_path: Path) -> None:
    """A trial log that is a link to a secret file of the server's user, or a FIFO, or a run
    whose logs/ links out: the log view answers at once with the refusal, never the
    secret; the next view is served as before."""
    from nasforge.dashboard.app import create_app

    hostile_run(tmp_path, ["secret", "fifo", "honest"])
    runs = tmp_path / "runs"
    make_record(runs / "linked", n=1)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "trial_1.log").write_text(SECRET + "\n")
    os.symlink(tmp_path / "elsewhere", runs / "linked" / "logs")
    client = create_app([runs]).server.test_client()
    for key, trial, what in [
        ("runs/hostile", 1, "is a symbolic link"),
        ("runs/hostile", 2, "is a FIFO"),
        ("runs/linked", 1, "a link out of the served directories"),
    ]:
        with _alarm(5):
            answer = _log_view(client, key, trial)
        text = answer.get_data(as_text=True)
        assert answer.status_code == 200 and what in text, (key, trial, text[:500])
        assert SECRET not in text
    assert "an honest log" in _log_view(client, "runs/hostile", 3).get_data(as_text=True)


def test_a_run_whose_record_or_control_folder_links_out_is_not_steered(tmp_path: Path) -> None:
    """A folder in the served root whose record, holder and control folder are links to a
    run outside it that is running (its writer alive), its own lock held by whoever made
    it: the dashboard refuses to steer it, and no request reaches the outside run."""
    from nasforge.dashboard.app import create_app
    from nasforge.run.lock import HOLDER_NAME, LOCK_NAME

    outside = tmp_path / "private" / "run"
    writer = make_record(outside, n=2, finish=False)  # running: this process writes it
    (outside / CONTROL).mkdir()
    decoy = tmp_path / "runs" / "decoy"
    decoy.mkdir(parents=True)
    for name in ("run.db", HOLDER_NAME, CONTROL):
        os.symlink(outside / name, decoy / name)
    try:
        with open(decoy / LOCK_NAME, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the decoy's maker holds its lock
            client = create_app([tmp_path / "runs"], allow_control=True, control_key=KEY)
            answer = _press(client.server.test_client(), "stop-cancel",
                            {"run-key.data": "runs/decoy"}, ORIGIN)  # fmt: skip
        assert answer.status_code == 200 and "is a link out of the served" in _said(answer)
        assert not list((outside / CONTROL).iterdir())
    finally:
        assert writer is not None
        writer.close()


def _rss(pid: int) -> int:
    """Returns the resident memory of process ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_served_log_view_of_dev_zero_or_a_fifo_answers_at_once_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """A real `nasforge serve` over a run whose trial logs are a link to a secret, a link to
    /dev/zero and a FIFO: each log view answers within seconds with the refusal, the
    server's memory stays within 50 MB of where it was (it took 1.6 GB in a second), and
    it goes on serving pages and an honest log."""
    import json as _json
    import urllib.request

    from tests.dashboard.conftest import Server

    hostile_run(tmp_path, ["secret", "zero", "fifo", "honest"])
    server = Server([tmp_path / "runs"], tmp_path, memory=2 << 30)
    try:
        before = _rss(server.proc.pid)

        def view(trial: int) -> str:
            body = _log_body("runs/hostile", trial)
            req = urllib.request.Request(
                server.url + "/_dash-update-component",
                data=_json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=15) as answer:
                assert answer.status == 200
                return answer.read().decode()

        for trial, what in ((1, "is a symbolic link"), (2, "is a symbolic link"),
                            (3, "is a FIFO")):  # fmt: skip
            start = time.monotonic()
            text = view(trial)
            assert what in text and SECRET not in text, text[:300]
            assert time.monotonic() - start < 10
        assert _rss(server.proc.pid) - before < 50 << 20
        assert "an honest log" in view(4)
        with urllib.request.urlopen(server.url + "/", timeout=15) as page:
            assert page.status == 200
    finally:
        server.stop()
