"""What a hostile network or a damaged record must not do to the dashboard (issue 37): the
token gate's cookie parsing and path scope, the loopback mode's Host check, the address
printed for every interface, run names in URLs, and one bad trial row; and (issue 50) a
trial of 20,001 metrics and crafted requests to Dash's own routes."""

from __future__ import annotations

import ipaddress
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nasforge.dashboard import data, overview
from nasforge.dashboard.runs import ServedRuns
from nasforge.errors import StoreError
from tests.dashboard.records import add_wide_trial, make_record

pytest.importorskip("dash", reason="needs the dashboard extra: pip install 'nasforge[dashboard]'")

from nasforge.dashboard import auth  # noqa: E402
from nasforge.run.records import TrialOutcome


def _call(gate: Any, path: str = "/", query: str = "", **headers: str) -> tuple[str, dict, bytes]:
    """Returns the status, headers and body of one GET of ``path`` through ``gate``."""
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query}
    environ.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    seen: dict[str, Any] = {}

    def start(status: str, hdrs: list, exc_info: Any = None) -> None:
        seen["status"], seen["headers"] = status, dict(hdrs)

    body = b"".join(gate(environ, start))
    return seen["status"], seen["headers"], body


def _app(environ: dict, start: Any) -> list[bytes]:
    start("200 OK", [("Content-Type", "text/plain")])
    return [b"runs"]


def test_another_apps_cookie_with_a_space_or_json_does_not_hide_the_token() -> None:
    """Cookies of other applications (a space, JSON, quotes, no '=') beside the token's
    cookie still let the token through; a wrong token in the same header still does not."""
    token = auth.make_token()
    gate = auth.TokenGate(_app, token, 8051)
    for others in [
        "pref=dark mode",
        'state={"a": 1, "b": [2, 3]}',
        'q="quoted; value"',
        "flag",
        "a=b=c",
    ]:
        for header in (
            f"{others}; nasforge_token_8051={token}",
            f"nasforge_token_8051={token}; {others}",
        ):
            assert _call(gate, cookie=header)[0] == "200 OK", header
        assert _call(gate, cookie=f"{others}; nasforge_token_8051=x{token}")[0].startswith("401")
    assert auth.cookie_value(f'a=1; nasforge_token_1="{token}"', "nasforge_token_1") == token


def test_a_token_served_dashboard_lives_under_a_secret_path_its_cookie_is_scoped_to() -> None:
    """The token's URL outside the prefix redirects into it with a cookie whose Path is the
    prefix (a browser sends it to no other path of the host, hence to no other service);
    inside it the app answers; the prefix is stable per token and differs between tokens."""
    token = auth.make_token()
    prefix = auth.path_prefix(token)
    assert prefix.startswith("/nf-") and prefix.endswith("/") and token not in prefix
    assert prefix == auth.path_prefix(token) != auth.path_prefix(auth.make_token())
    gate = auth.TokenGate(_app, token, 8051, prefix)
    status, headers, _ = _call(gate, "/", f"token={token}&tab=charts")
    assert status == "302 Found" and headers["Location"] == prefix.rstrip("/") + "/?tab=charts"
    assert headers["Set-Cookie"] == (
        f"nasforge_token_8051={token}; Path={prefix}; HttpOnly; SameSite=Strict"
    )
    status, headers, body = _call(gate, prefix + "run/x", f"token={token}")
    assert (status, body) == ("200 OK", b"runs") and f"Path={prefix};" in headers["Set-Cookie"]
    assert _call(gate, prefix, cookie=f"nasforge_token_8051={token}")[0] == "200 OK"
    assert _call(gate, "/x", authorization=f"Bearer {token}")[1]["Location"] == prefix + "x"
    assert _call(gate, prefix)[0].startswith("401")  # the prefix alone opens nothing


def test_loopback_mode_answers_only_loopback_host_names_with_its_port() -> None:
    """DNS rebinding: a Host other than 127.0.0.1, localhost or [::1] with the served port
    gets 421 and never reaches the app."""
    calls: list[str] = []

    def app(environ: dict, start: Any) -> list[bytes]:
        calls.append(environ["HTTP_HOST"])
        return _app(environ, start)

    check = auth.HostCheck(app, 8050)
    for host in ["127.0.0.1:8050", "localhost:8050", "LOCALHOST:8050", "[::1]:8050"]:
        assert _call(check, host=host)[0] == "200 OK", host
    for host in [
        "evil.example:8050",
        "evil.example",
        "127.0.0.1:8051",
        "localhost",
        "",
        "127.0.0.2:8050",
        "localhost.evil:8050",
    ]:
        status, _, body = _call(check, host=host)
        assert status.startswith("421") and b"answers only to" in body, host
    assert len(calls) == 4


def test_every_interface_is_announced_as_an_address_to_open() -> None:
    """`--host 0.0.0.0` (or ::) prints an IP address a browser can open, not a host name."""
    from nasforge.dashboard.app import open_address

    ipaddress.ip_address(open_address("0.0.0.0"))
    ipaddress.ip_address(open_address("::").strip("[]"))
    assert open_address("::1") == "[::1]" and open_address("127.0.0.2") == "127.0.0.2"


def test_runs_are_named_in_urls_as_shown_and_old_urls_still_resolve(tmp_path: Path) -> None:
    """A run's key is the name the overview shows (typing it works); `<index>/<name>` keys
    of before still resolve; two roots of one name keep the index form; a NUL or a non-string
    key is refused with a message."""
    make_record(tmp_path / "runs" / "a", n=2)
    make_record(tmp_path / "x" / "same" / "b", n=2)
    make_record(tmp_path / "y" / "same" / "c", n=2)
    served = ServedRuns([tmp_path / "runs", tmp_path / "x" / "same", tmp_path / "y" / "same"])
    refs = served.discover()
    assert [(r.key, r.name) for r in refs] == [
        ("runs/a", "runs/a"),
        ("1/same/b", "same/b"),
        ("2/same/c", "same/c"),
    ]
    a = (tmp_path / "runs" / "a").resolve()
    assert served.resolve("runs/a") == served.resolve("0/runs/a") == a
    assert served.resolve("2/same/c") == (tmp_path / "y" / "same" / "c").resolve()
    assert served.name_of("0/runs/a") == served.name_of("runs/a") == "runs/a"
    for key in ["runs/../x", "runs/a\0", "same/b", "/etc/passwd", "", 3, None]:
        with pytest.raises(StoreError):
            served.resolve(key)  # type: ignore[arg-type]


BAD_ROWS = {
    "a text metric": """UPDATE trials SET metrics='{"accuracy": "high"}' WHERE id=2""",
    "a text duration": "UPDATE trials SET duration='slow' WHERE id=2",
    "a BLOB error": "UPDATE trials SET error=X'00ff' WHERE id=2",
}


@pytest.mark.parametrize("damage", list(BAD_ROWS))
def test_one_bad_trial_row_names_itself_and_spares_the_other_runs(
    tmp_path: Path, damage: str
) -> None:
    """A trial row with a value of the wrong type (written into SQLite directly) makes its
    run's overview row and trial table say which row is bad; another run reads as before."""
    make_record(tmp_path / "good", n=6)
    make_record(tmp_path / "bad", n=6)
    with sqlite3.connect(tmp_path / "bad" / "run.db") as conn:
        conn.execute(BAD_ROWS[damage])
    conn.close()
    cache = data.TrialCache()
    summaries = overview.SummaryCache(cache)
    bad = summaries.get("bad", "bad", tmp_path / "bad")
    assert bad.problem and "trials row 2" in bad.problem, bad.problem
    good = summaries.get("good", "good", tmp_path / "good")
    assert good.problem is None and good.n_trials == 6
    with data.open_run(tmp_path / "bad") as store, pytest.raises(StoreError, match="row 2"):
        data.trial_page(store, cache, page_size=50)


def _callback(client: Any, output_part: str, values: dict[str, Any]) -> tuple[int, Any]:
    """Returns the status and JSON answer of the Dash callback whose output names
    ``output_part``, called with ``values`` ("id.prop" -> value; the rest None)."""
    deps = client.get("/_dash-dependencies").get_json()
    dep = next(d for d in deps if output_part in d["output"])

    def fill(items: list[dict[str, str]]) -> list[dict[str, Any]]:
        return [
            {
                "id": i["id"],
                "property": i["property"],
                "value": values.get(f"{i['id']}.{i['property']}"),
            }
            for i in items
        ]

    outputs = [
        {"id": o.split(".")[0], "property": o.split(".")[1]}
        for o in dep["output"].strip(".").split("...")
    ]
    body = {
        "output": dep["output"],
        "outputs": outputs if len(outputs) > 1 else outputs[0],
        "inputs": fill(dep["inputs"]),
        "state": fill(dep["state"]),
        "changedPropIds": [],
    }
    answer = client.post("/_dash-update-component", json=body)
    return answer.status_code, answer.get_json(silent=True)


def test_malformed_inputs_get_a_message_and_page_size_is_capped(tmp_path: Path) -> None:
    """A NUL in a run key, a non-string key, an odd page size or sort order, a non-number
    trial id: each answers 200 with a message instead of a 500; a huge page size is capped
    at MAX_PAGE_SIZE rows."""
    from nasforge.dashboard.app import create_app

    make_record(tmp_path / "runs" / "a", n=30)
    client = create_app([tmp_path / "runs"]).server.test_client()
    good = {"run-key.data": "runs/a", "trial-table.page_current": 0, "trial-table.page_size": 20}
    status, answer = _callback(client, "trial-table.data", good)
    assert status == 200 and len(answer["response"]["trial-table"]["data"]) == 20
    status, answer = _callback(client, "trial-table.data", {**good, "trial-table.page_size": 10**9})
    assert status == 200 and answer["response"]["trial-table"]["page_count"] == 1
    for odd in [
        {"run-key.data": "runs/a\0"},
        {"run-key.data": ["runs/a"]},
        {"run-key.data": 7},
        {"trial-table.page_size": "many"},
        {"trial-table.page_size": -3},
        {"trial-table.page_current": "x"},
        {"trial-table.sort_by": "accuracy"},
        {"trial-table.sort_by": [{"column_id": 5, "direction": "up"}]},
        {"status-filter.value": [1, None]},
    ]:
        status, answer = _callback(client, "trial-table.data", {**good, **odd})
        assert status == 200, odd
        assert answer["response"]["trial-count"]["children"], odd  # the message
    for odd in [{"arch-a.value": "1; drop"}, {"arch-a.value": 1, "arch-b.value": [2]}]:
        status, _ = _callback(client, "arch-view.children", {"run-key.data": "runs/a", **odd})
        assert status == 200, odd


def test_the_trial_table_formats_numbers_and_shows_the_rung(tmp_path: Path) -> None:
    """Metric columns are formatted to a few significant digits (the raw value stays for
    sorting), and each row carries the rung (reports) it reached."""
    from nasforge.dashboard.layout import trial_columns

    make_record(tmp_path / "a", n=10)
    with data.open_run(tmp_path / "a") as store:
        rows = data.trial_page(store, data.TrialCache(), page_size=10)["rows"]
    assert {r["rung"] for r in rows if r["status"] == "done"} == {2}
    columns = {c["id"]: c for c in trial_columns(["accuracy"])}
    assert columns["rung"]["type"] == "numeric"
    fmt = columns["m:accuracy"]["format"]
    fmt = fmt if isinstance(fmt, dict) else fmt.to_plotly_json()
    assert fmt["specifier"] == ".4~g"


def _pruned_record(directory: Path) -> None:
    """Writes a run with a median stopper: four trials trained to 3 reports, and two pruned
    after one report whose one-epoch accuracy (0.99) beats every finished trial's."""
    from nasforge.run.store import Store

    config = {
        "kind": "multitrial",
        "objective": {"metric": "accuracy", "mode": "max", "constraints": {}, "second": None},
        "multitrial": {
            "strategy": {"name": "random"},
            "stopper": {"rule": "median", "warmup_steps": 1, "min_trials": 3},
        },
    }
    store = Store.create(directory, config)
    for i in range(6):
        pruned = i in (2, 4)
        tid = store.add_trial(f"{i:016x}", {"op": "pool" if pruned else "conv", "w": i % 2})
        reports = (
            [{"accuracy": 0.99}] if pruned else [{"accuracy": 0.3 + 0.1 * k} for k in range(3)]
        )
        status = "pruned" if pruned else "done"
        store.finish_trial(
            tid,
            TrialOutcome(
                status, {"accuracy": reports[-1]["accuracy"], "params": float(i + 1)}, reports
            ),
        )
    store.finish()
    store.close()


def test_pruned_trials_do_not_count_as_finished_results(tmp_path: Path) -> None:
    """A trial pruned after one report is neither the best so far nor on the Pareto front,
    and the importance tab leaves it out; the summary names the stopper and the resource
    spent, pruned share included."""
    _pruned_record(tmp_path / "a")
    cache = data.TrialCache()
    with data.open_run(tmp_path / "a") as store:
        best = data.best_so_far(store, cache)
        front = data.pareto(store, cache, ("params", "min"), ("accuracy", "max"))
        facts = data.run_facts(store)
        final = data.final_trials(store.trials())
    assert max(best["best"]) < 0.99 and not {3, 5} & set(best["id"])
    assert not {3, 5} & set(front["front"]) and {3, 5} <= {p["id"] for p in front["points"]}
    assert {p["id"]: p["pruned"] for p in front["points"]}[3] is True
    assert [t.id for t in final] == [1, 2, 4, 6]
    assert facts["stopper"] == "median (min_trials 3, warmup_steps 1)"
    assert facts["spent"] == "14 reports (done 12, pruned 2)"


def test_a_trial_with_20001_metrics_gives_a_bounded_page(tmp_path: Path) -> None:
    """A record (made before the metric cap, or by hand) with a trial of 20,001 metrics: the
    trial table sends at most MAX_METRIC_COLUMNS metric columns, the objective first, saying
    how many there are, and the architecture view of that trial is bounded too (the answer
    grew with the metrics: 39.7 MB for 200,001)."""
    from nasforge.dashboard.app import create_app

    make_record(tmp_path / "runs" / "wide", n=3)
    tid = add_wide_trial(tmp_path / "runs" / "wide", 20_000)
    client = create_app([tmp_path / "runs"]).server.test_client()
    values = {"run-key.data": "runs/wide", "trial-table.page_current": 0,
              "trial-table.page_size": 500}  # fmt: skip
    status, answer = _callback(client, "trial-table.data", values)
    assert status == 200
    table = answer["response"]
    columns = [c["id"] for c in table["trial-table"]["columns"] if c["id"].startswith("m:")]
    assert len(columns) == data.MAX_METRIC_COLUMNS and columns[0] == "m:accuracy"
    # the wide trial's 20,001 and the other trials' params
    assert "the first 100 of 20002 metrics shown" in table["trial-count"]["children"]
    assert all(len(row) <= 8 + data.MAX_METRIC_COLUMNS for row in table["trial-table"]["data"])
    assert len(json.dumps(answer)) < 100_000
    status, answer = _callback(client, "arch-view.children",
                               {"run-key.data": "runs/wide", "arch-a.value": tid})  # fmt: skip
    assert status == 200 and "and 19901 more metrics" in json.dumps(answer)
    assert len(json.dumps(answer)) < 100_000


def test_dash_s_own_routes_answer_404_or_400_never_500(tmp_path: Path) -> None:
    """Crafted paths under Dash's file route (an unregistered package, a path outside the
    registered files, a NUL) get 404, malformed callback requests 400, and no traceback is
    logged; the real files and callbacks still answer 200."""
    from nasforge.dashboard.app import create_app

    make_record(tmp_path / "runs" / "a", n=3)
    client = create_app([tmp_path / "runs"]).server.test_client()
    suites = "/_dash-component-suites"
    for path in [
        f"{suites}/nonexistent/x.js",
        f"{suites}/os/x.js",
        f"{suites}/dash/..%2f..%2fsetup.py",
        f"{suites}/dash/../x.js",
        f"{suites}/dash/deps/nope.js",
        f"{suites}/dash/dcc/%00.js",
        f"{suites}/dash/x.map",
    ]:
        assert client.get(path).status_code == 404, path
    for body in [{}, [1], {"output": "nope.children"}, {"output": ["page.children"]},
                 {"output": "page.children", "inputs": "x"},
                 {"output": "page.children", "inputs": [1]}]:  # fmt: skip
        assert client.post("/_dash-update-component", json=body).status_code == 400, body
    page = client.get("/").get_data(as_text=True)
    script = page[page.index(f"{suites}/") :].split('"', 1)[0]
    assert client.get(script).status_code == 200
    status, _ = _callback(client, "trial-table.data", {"run-key.data": "runs/a"})
    assert status == 200
