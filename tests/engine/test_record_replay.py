"""Record and replay of outside calls (SPEC 13, issue 32) through a session's gateway, in-process and in
the worker: a real HTTP server on 127.0.0.1, the demo SQLite database, the scripted model streaming, and
``ask`` with a password.

A recorded run replays with the same values, outputs and errors and makes no call (the server counts its
requests); recording again with no change leaves the file byte-identical; a changed request is
``replay-miss`` naming the closest entry and the field; a secret the file would hold is refused
(``cassette-secret``) and nothing is written; under ``CI=true`` only ``replay`` runs unless
``S2O_REPLAY`` asks.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, Session, make_settings

TOKEN = "sk-live-7f3a9c21"


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The modes as the settings give them: these tests run under CI=true too (which replays only)."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("S2O_REPLAY", raising=False)


def _settings(http_server: Any, cassette: Path, mode: str) -> dict[str, Any]:
    return {"replay": {"mode": mode, "cassette": str(cassette)}, "secrets": {"TOK": TOKEN},
            "profiles": {"api": {"crm": {"url": http_server.url, "allow_path": True, "allow_headers": True}}}}


def _session(data: dict[str, Any], isolated: bool) -> Any:
    session = IsolatedSession(make_settings(data)) if isolated else Session(Engine(make_settings(data)))
    session.outside.answer = lambda message, questions: {"who": "ada", "pin": "9911"}
    return session


AGENT = [
    {"api": {"profile": "crm", "method": "POST", "path": "/json/orders", "body": {"qty": 2},
             "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOK\"]}' }"}}},
    {"var": {"posted": "{ result['body'] }"}},
    {"api": {"profile": "crm", "path": "/status/404"}, "onError": {"var": {"missing": "{ exc.code }"}}},
    {"db": {"profile": "demo", "sql": "SELECT id FROM orders WHERE id < :n", "params": {"n": 3}}},
    {"var": {"rows": "{ result }"}},
    {"llm": {"profile": "scripted", "input": "Hello", "streamOutput": True}},
    {"var": {"said": "{ result }"}},
    {"ask": {"inputs": [{"name": "who"}, {"name": "pin", "type": "password"}]}},
    {"return": "{ [posted, missing, rows, said, result['who']] }"},
]


def _run(data: dict[str, Any], isolated: bool, fragment: Any = None) -> Any:
    session = _session(data, isolated)
    try:
        return session.run_fragment(AGENT if fragment is None else fragment)
    finally:
        if isolated:
            session.close()


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_a_recorded_run_replays_the_same_without_a_call(
        isolated: bool, http_server: Any, tmp_path: Path, data_dir: Path) -> None:
    cassette = tmp_path / "orders.cassette.json"
    live = _run(_settings(http_server, cassette, "record"), isolated)
    assert live.code == "success", live.error
    assert live.value[1] == "api-status" and live.value[4] == "ada" and "'pin': <secret pin>" in repr(live.result)
    recorded = cassette.read_bytes()
    assert TOKEN.encode() not in recorded and b"9911" not in recorded and b"<secret TOK>" in recorded
    before = len(http_server.requests)
    replayed = _run(_settings(http_server, cassette, "replay"), isolated)
    assert len(http_server.requests) == before  # nothing went out
    assert (replayed.code, replayed.value, replayed.outputs) == (live.code, live.value, live.outputs)
    assert repr(replayed.result) == repr(live.result)
    assert [p["text"] for p in replayed.outputs] == ["You ", "said: ", "Hello"]  # streamed chunk by chunk
    assert _run(_settings(http_server, cassette, "record"), isolated).value == live.value
    assert cassette.read_bytes() == recorded  # recording again with no change: the same bytes
    assert _run(_settings(http_server, cassette, "rewrite"), isolated).value == live.value
    assert cassette.read_bytes() == recorded  # rewritten with no change of behaviour: the same bytes


def test_a_changed_request_is_a_miss_naming_the_closest_entry_and_field(http_server: Any, tmp_path: Path,
                                                                        data_dir: Path) -> None:
    cassette = tmp_path / "c.cassette.json"
    assert _run(_settings(http_server, cassette, "record"), False).code == "success"
    changed = json.loads(json.dumps(AGENT).replace('"qty": 2', '"qty": 3'))
    run = _run(_settings(http_server, cassette, "replay"), False, changed)
    assert (run.code, run.error.code, run.error.path) == ("callFailed", "replay-miss", "[0].api")
    assert "closest is entry 0 (api on 'crm'), which differs in body.qty" in run.error.message
    assert run.error.details["differs"] == ["body.qty"] and "c.cassette.json" in run.error.message
    twice = [AGENT[3], AGENT[3]]  # recorded once: the second equal call has no answer left
    run = _run(_settings(http_server, cassette, "replay"), False, twice)
    assert (run.error.code, run.error.path) == ("replay-exhausted", "[1].db")


def test_equal_requests_are_answered_in_recorded_order(tmp_path: Path) -> None:
    cassette = tmp_path / "poll.cassette.json"
    query = {"db": {"profile": "demo", "sql": "SELECT status FROM orders WHERE id = 1"}}
    poll = [query, {"var": {"a": "{ result }"}}, query, {"return": "{ [a, result] }"}]
    request = {"sql": "SELECT status FROM orders WHERE id = 1", "params": {}, "max_rows": 10000}
    cassette.write_text(json.dumps({"format": 1, "entries": [
        {"kind": "db", "profile": "demo", "request": request, "outcome": {"result": [{"status": status}]}}
        for status in ("queued", "shipped")]}))
    run = Session(Engine(make_settings({"replay": {"mode": "replay", "cassette": str(cassette)}}))).run_fragment(poll)
    assert run.value == [[{"status": "queued"}], [{"status": "shipped"}]], run.error


@pytest.mark.parametrize(("fragment", "where"), [
    ({"api": {"profile": "crm", "method": "POST", "path": "/json/x", "body": {"note": TOKEN}}}, "request body"),
    ({"api": {"profile": "crm", "path": "/json/x", "headers": {"X-Key": TOKEN}}}, "request header"),
    ({"api": {"profile": "crm", "method": "POST", "path": "/json/x",
              "body": {"note": base64.b64encode(TOKEN.encode()).decode()}}}, "request body, base64"),
    ({"api": {"profile": "crm", "path": "/json/x", "query": {"k": TOKEN}}}, "request query"),
    ({"api": {"profile": "crm", "path": "/b64auth",
              "headers": {"Authorization": "{ sys.secret['TOK'] }"}}}, "response, base64"),
])  # fmt: skip
def test_a_secret_the_cassette_would_hold_refuses_the_write(fragment: Any, where: str, http_server: Any,
                                                            tmp_path: Path) -> None:
    cassette = tmp_path / "s.cassette.json"
    run = _run(_settings(http_server, cassette, "record"), False, fragment)
    assert (run.code, run.error.code) == ("callFailed", "cassette-secret"), (where, run.error)
    assert not cassette.exists(), where
    assert base64.b64encode(TOKEN.encode()).decode() not in run.error.message


def test_ci_replays_only_unless_s2o_replay_says(http_server: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = tmp_path / "ci.cassette.json"
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    fragment = {"api": {"profile": "crm", "path": "/json/ci"}}
    run = _run(_settings(http_server, cassette, "record"), False, fragment)
    assert run.error.code == "replay-mode" and "CI=true" in run.error.message
    monkeypatch.setenv("S2O_REPLAY", "record")
    assert _run(_settings(http_server, cassette, "off"), False, fragment).code == "success"
    assert cassette.exists()
    monkeypatch.setenv("S2O_REPLAY", "replay")
    before = len(http_server.requests)
    assert _run(_settings(http_server, cassette, "record"), False, fragment).code == "success"
    assert len(http_server.requests) == before


def test_a_file_that_is_not_a_cassette_is_refused_by_code(tmp_path: Path) -> None:
    cassette = tmp_path / "bad.cassette.json"
    cassette.write_text('{"format": 9, "entries": []}')
    run = Session(Engine(make_settings({"replay": {"mode": "replay", "cassette": str(cassette)}}))).run_fragment(
        {"llm": {"profile": "scripted", "input": "hi"}})
    assert run.error.code == "cassette" and "format 1" in run.error.message


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_a_recording_replays_with_no_keys(isolated: bool, http_server: Any, tmp_path: Path, data_dir: Path) -> None:
    """SPEC 13: a cassette replays where the secrets a recording read are not given (CI, a colleague's
    laptop): each stands in for itself, and a call that would still go out with one is ``missing-secret``,
    never the stand-in sent as text."""
    cassette = tmp_path / "keys.cassette.json"
    assert _run(_settings(http_server, cassette, "record"), isolated).code == "success"
    keyless = _settings(http_server, cassette, "replay")
    del keyless["secrets"]
    before = len(http_server.requests)
    run = _run(keyless, isolated)
    assert run.code == "success", run.error
    assert len(http_server.requests) == before
    session = Session(Engine(make_settings(keyless)))  # the stand-in stays if the mode changes: never sent
    session.update_settings({"replay": {"mode": "off"}})
    run = session.run_fragment(AGENT[0])
    assert (run.code, run.error.code) == ("errorInAgent", "missing-secret"), run.error
    assert len(http_server.requests) == before


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])
def test_cost_limit_and_row_limit_trip_replayed_where_they_did_live(isolated: bool, tmp_path: Path,
                                                                   data_dir: Path) -> None:
    """SPEC 13: spend is the recorded price, so ``cost-limit`` trips where it did; a ``row-limit`` is a
    recorded outcome and replays as the same error."""
    cassette = tmp_path / "limits.cassette.json"
    pricey = {"adapter": "scripted", "model": "scripted", "price_input": 1_000_000.0, "price_output": 0.0}
    data: dict[str, Any] = {"limits": {"llm_cost": 5.0, "db_rows": 2},
                            "profiles": {"llm": {"pricey": pricey}}, "replay": {"cassette": str(cassette)}}
    costly = [{"llm": {"profile": "pricey", "input": "one two three four five six seven"}},
              {"llm": {"profile": "pricey", "input": "again"}}]
    rows = {"db": {"profile": "demo", "sql": "SELECT id FROM orders"}}
    outcomes = {}
    for mode in ("record", "replay"):
        data["replay"]["mode"] = mode
        cost, row = _run(data, isolated, costly), _run(data, isolated, rows)
        outcomes[mode] = [(r.code, r.error.code, r.error.path, r.error.message) for r in (cost, row)]
    assert [o[1] for o in outcomes["record"]] == ["cost-limit", "row-limit"], outcomes
    assert outcomes["replay"] == outcomes["record"]
