"""Red-team findings at the outside door (SPEC 7.1, 12; issues 9 and 12): each test is an attack that
worked before its fix. Calls are made as a hostile agent author (a fragment) and as a hostile worker (a
forged :class:`OutsideCall` handed straight to the parent's gateway), against real servers."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, Session, default_settings, make_settings
from s2o_kernel.engine.errors import S2OError
from s2o_kernel.engine.outside.call import OutsideCall
from s2o_kernel.engine.outside.gateway import Gateway
from s2o_kernel.engine.settings import merge

TOKEN = "tok-redteam-0b7f-secret"


def _settings(url: str) -> Any:
    return make_settings(merge(default_settings().to_dict(), {
        "secrets": {"TOKEN": TOKEN},
        "profiles": {"api": {
            "srv": {"url": url + "/json/", "timeout": 5,
                    "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOKEN\"]}' }"}},
        }},
    }))


#: Paths that leave the profile's base URL: another host, another scheme, or a path above the base.
ESCAPES = ["{other}/whoami", "{other_upper}/whoami", "../whoami", "a/../../whoami", "./../whoami",
           "%2e%2e/whoami", "%2E%2e/%2e%2E/whoami", "..\\whoami", "//127.0.0.1:1/whoami", "\\\\host/whoami",
           "http:/whoami", "whoami\r\nX: 1", "whoami#x",
           # dot segments a server reads once it decodes the path or drops path parameters (red team 3):
           # encoded separators, double encoding, Tomcat's ';' parameters, full-width dots
           "..%2fwhoami", "..%2Fwhoami", "%2e%2e%2fwhoami", "a/..%2f..%2fwhoami", "..%5cwhoami",
           "%252e%252e/whoami", "..;/whoami", "a/..;x=1/..;/whoami", "%2e%2e;/whoami",
           "\uff0e\uff0e/whoami", "%EF%BC%8E%EF%BC%8E/whoami", "whoami%0d%0aX:%201", "%00/whoami"]


def _paths(other: str) -> list[str]:
    return [p.format(other=other, other_upper=other.replace("http://", "HTTP://")) for p in ESCAPES]


@pytest.fixture
def two_servers(http_server: Any) -> Any:
    from http_fixture import HttpServer

    other = HttpServer()
    try:
        yield http_server, other
    finally:
        other.stop()


def test_a_forged_api_path_never_takes_the_profiles_credentials_elsewhere(two_servers: Any) -> None:
    """A hostile worker hands the parent an absolute URL or a path that climbs out of the base."""
    srv, other = two_servers
    gw = Gateway(_settings(srv.url))
    seen = len(srv.requests)
    try:
        for path in _paths(other.url):
            call = OutsideCall("api", "srv", {"method": "GET", "path": path}, "commands[0].api", 5.0)
            with pytest.raises(S2OError) as caught:
                gw.call_sync(call)
            assert (caught.value.code, caught.value.path) == ("fragment", "commands[0].api.path"), path
            assert TOKEN not in caught.value.message
        assert other.requests == [] and len(srv.requests) == seen
        ok = gw.call_sync(OutsideCall("api", "srv", {"method": "GET", "path": "a/b%20c"}, "commands[0].api", 5.0))
        assert ok["path"] == "/json/a/b%20c" and srv.requests[seen][2]["Authorization"] == f"Bearer {TOKEN}"
    finally:
        gw.close()


def test_a_fragments_api_path_cannot_leave_the_profiles_base(two_servers: Any) -> None:
    srv, other = two_servers
    session = Session(Engine(_settings(srv.url)))
    seen = len(srv.requests)
    for path in _paths(other.url):
        run = session.run_fragment({"api": {"profile": "srv", "path": path}})
        assert run.error is not None and run.error.code == "fragment", (path, run.code)
        assert run.error.path == "api.path", path
    assert other.requests == [] and len(srv.requests) == seen


def test_paths_with_encoded_slashes_dots_and_percent_signs_still_reach_the_base(http_server: Any) -> None:
    """What the dot-segment check lets through: an encoded slash inside a name (``group%2Fproject``), dots
    inside a segment, a literal percent sign."""
    session = Session(Engine(_settings(http_server.url)))
    for path, seen in (("group%2Fproject", "/json/group%2Fproject"), ("v1.2/x..y", "/json/v1.2/x..y"),
                       ("..foo/.bar", "/json/..foo/.bar"), ("100%25", "/json/100%25")):
        run = session.run_fragment({"api": {"profile": "srv", "path": path}})
        assert run.code == "success", (path, run.error)
        assert http_server.requests[-1][1] == seen


def _db_gateway(tmp_path: Any) -> Gateway:
    main, other = tmp_path / "main.sqlite", tmp_path / "other.sqlite"
    for path, statement in ((main, "CREATE TABLE t (x TEXT)"), (other, "CREATE TABLE s (x TEXT)")):
        with sqlite3.connect(path) as conn:
            conn.execute(statement)
    with sqlite3.connect(other) as conn:
        conn.execute("INSERT INTO s VALUES ('from another file')")
    return Gateway(make_settings(merge(default_settings().to_dict(), {"profiles": {"db": {
        "reader": {"url": f"sqlite:///{main}", "read_only": True},
        "writer": {"url": f"sqlite:///{main}"},
    }}})))


def _sql(gw: Gateway, profile: str, sql: str) -> Any:
    return gw.call_sync(OutsideCall("db", profile, {"sql": sql, "params": {}, "max_rows": 100}, "db", 10.0))


def test_a_sqlite_profile_reaches_its_own_file_only(tmp_path: Any) -> None:
    """``ATTACH`` / ``VACUUM INTO`` read, create or write any file the kernel may: refused on every
    SQLite profile; a temporary database (what ``VACUUM`` itself attaches) stays allowed."""
    gw = _db_gateway(tmp_path)
    try:
        for profile in ("reader", "writer"):
            for sql in (f"ATTACH '{tmp_path / 'other.sqlite'}' AS o", f"ATTACH '{tmp_path / 'new.sqlite'}' AS n",
                        f"VACUUM INTO '{tmp_path / 'copy.sqlite'}'"):
                with pytest.raises(S2OError) as caught:
                    _sql(gw, profile, sql)
                assert caught.value.code in ("db-failed", "db-read-only"), (profile, sql)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["main.sqlite", "other.sqlite"]
        assert _sql(gw, "writer", "VACUUM") == [] and _sql(gw, "reader", "SELECT count(*) AS n FROM t") == [{"n": 0}]
    finally:
        gw.close()


def test_a_db_result_is_bounded_in_bytes_where_the_kernel_holds_it(tmp_path: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team 3: ``SELECT randomblob(200000000) FROM (VALUES (1),(2),(3))`` took the kernel process (which
    makes a contained run's calls, with no memory cap) to 2.3 GB before the worker's message cap refused
    the result; ten such rows end it. A db call's rows are counted in bytes as they stream, and SQLite
    refuses to build a single value past the same cap."""
    from s2o_kernel.engine.outside import db

    monkeypatch.setattr(db, "MAX_RESULT_BYTES", 1 << 20)
    gw = _db_gateway(tmp_path)
    try:
        with pytest.raises(S2OError) as caught:  # rows that add up past the cap
            _sql(gw, "writer", "SELECT randomblob(300000) AS b FROM (VALUES (1),(2),(3),(4))")
        assert caught.value.code == "db-too-large" and "1048576 bytes" in caught.value.message
        for sql in ("SELECT randomblob(2000000) AS b", "SELECT zeroblob(2000000) AS b",
                    "SELECT length(randomblob(2000000)) AS n", "SELECT replace(hex(zeroblob(600000)), '0', 'ab') AS s"):
            with pytest.raises(S2OError) as caught:  # one value past the cap: SQLite never builds it
                _sql(gw, "writer", sql)
            assert caught.value.code == "db-too-large", sql
        assert _sql(gw, "writer", "SELECT length(randomblob(300000)) AS n") == [{"n": 300000}]
    finally:
        gw.close()
    run = Session(Engine(make_settings({"profiles": {"db": {"w": {"url": f"sqlite:///{tmp_path / 'main.sqlite'}"}}}})))
    done = run.run_fragment({"db": {"profile": "w", "sql": "SELECT randomblob(2000000) AS b"},
                             "onError": [{"return": "{ exc.code }"}]})
    assert (done.code, done.value) == ("success", "db-too-large")


SECRET = "sk-live-hunter2-7d1e"
#: What a run in the worker can write without ``sys.secret``: the placeholder the parent resolves.
FORGED = "{ '\\u2063s2o-secret:K\\u2063' }"


def _leaked(text: str) -> bool:
    return any(form in text for form in (SECRET, SECRET[1:], SECRET.encode().hex().upper(), SECRET[::-1]))


def test_a_secret_never_reaches_sql_or_a_model_that_could_hand_it_back_transformed(tmp_path: Any) -> None:
    """Red team 3: ``SELECT hex(:s), substr(:s, 2)`` with ``s`` a secret returned the secret as text the run
    reads (masking catches the secret as written, never a transformation of it); in the worker, a forged
    placeholder put any secret in any call's fields, an llm input too. Secrets go to api calls only."""
    from fake_llm import FakeLLM

    with FakeLLM() as fake:
        settings = make_settings({"secrets": {"K": SECRET}, "profiles": {
            "db": {"w": {"url": f"sqlite:///{tmp_path / 'w.sqlite'}"}},
            "llm": {"gpt": {"adapter": "openai", "model": "m", "url": fake.url, "key": "k"}}}})
        sql = {"db": {"profile": "w", "sql": "SELECT hex(:s) AS h, substr(:s, 2) AS t",
                      "params": {"s": "{ f'{sys.secret[\"K\"]}' }"}}}
        run = Session(Engine(settings)).run_fragment([sql, {"return": "{ result }"}])
        assert run.error is not None and run.error.code == "not-allowed", run
        assert run.error.path == "[0].db.params.s" and not _leaked(repr(run))
        isolated = IsolatedSession(settings)
        try:
            run = isolated.run_fragment([sql, {"return": "{ result }"}])
            assert run.error is not None and run.error.code == "not-allowed" and not _leaked(repr(run))
            forged = {"db": {"profile": "w", "sql": "SELECT hex(:s) AS h, substr(:s, 2) AS t", "params": {"s": FORGED}}}
            run = isolated.run_fragment([forged, {"return": "{ result }"}])
            assert run.code == "success" and not _leaked(repr(run.value)), run
            fake.replies = [{"text": "ok"}]
            run = isolated.run_fragment({"llm": {"profile": "gpt", "input": FORGED}})
            assert run.code == "success" and fake.requests and not _leaked(json.dumps(fake.requests))
        finally:
            isolated.close()


def test_a_read_only_sqlite_profile_cannot_lift_or_bypass_query_only(tmp_path: Any) -> None:
    gw = _db_gateway(tmp_path)
    try:
        for sql in ("PRAGMA query_only = OFF", "PRAGMA journal_mode = WAL", "PRAGMA user_version = 7"):
            with pytest.raises(S2OError):
                _sql(gw, "reader", sql)
        with pytest.raises(S2OError) as caught:
            _sql(gw, "reader", "INSERT INTO t VALUES ('x')")
        assert caught.value.code == "db-read-only"
        assert _sql(gw, "reader", "PRAGMA table_info(t)")[0]["name"] == "x"
        assert _sql(gw, "reader", "PRAGMA journal_mode") == [{"journal_mode": "delete"}]
    finally:
        gw.close()
    with sqlite3.connect(tmp_path / "main.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0


def test_a_read_only_postgresql_profile_never_runs_as_a_role_with_server_powers(postgres: Any) -> None:
    """In a read-only transaction a superuser still writes server files (``COPY … TO``) and runs programs
    (``COPY … TO PROGRAM``): a read-only profile with such a role is refused before its statement runs."""
    folder = Path(tempfile.mkdtemp(prefix="s2o-redteam-"))
    folder.chmod(0o777)  # the server may run as another user (postgres)
    marker = folder / "copied"
    gw = Gateway(make_settings(merge(default_settings().to_dict(), {"profiles": {"db": {
        "reader": {"url": postgres.url, "read_only": True}}}})))
    try:
        for sql in (f"COPY (SELECT 'x') TO '{marker}'", f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'",
                    "SELECT pg_read_file('/etc/hostname') AS f", "SELECT 1 AS one"):
            with pytest.raises(S2OError) as caught:
                _sql(gw, "reader", sql)
            assert caught.value.code == "db-read-only", sql
        assert not marker.exists()
    finally:
        gw.close()
        shutil.rmtree(folder, ignore_errors=True)


#: A credential in the kernel's environment that is not an ``S2O_SECRET_`` (an API token a launcher set).
CANARY_ENV = {"OPENAI_API_KEY": "sk-canary-env-4e1d", "JUPYTERHUB_API_TOKEN": "hub-canary-env-77a0"}


def _environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        return fh.read()


def test_a_new_interpreter_worker_gets_no_credential_of_the_kernels_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from s2o_kernel.engine import IsolatedSession

    for name, value in CANARY_ENV.items():
        monkeypatch.setenv(name, value)
    session = IsolatedSession(default_settings())
    try:
        assert session.evaluate("1 + 1") == 2 and session.pid is not None
        seen = _environ(session.pid)
        assert b"PATH=" in seen
        assert not any(value.encode() in seen for value in CANARY_ENV.values())
    finally:
        session.close()


_FORKING_PARENT = """
import os, sys, time
from s2o_kernel.engine import IsolatedSession, default_settings
session = IsolatedSession(default_settings(), fork=True)
assert session.evaluate("1 + 1") == 2
print(session.pid, flush=True)
sys.stdin.readline()
session.close()
"""


def test_a_forked_worker_keeps_no_credential_of_the_kernels_environment() -> None:
    """A fork copies the kernel's whole environment (its ``os.environ`` and the block the kernel was started
    with, which ``/proc/PID/environ`` shows): the child scrubs both before it confines itself."""
    import os
    import subprocess
    import sys

    env = {**os.environ, **CANARY_ENV}
    parent = subprocess.Popen([sys.executable, "-c", _FORKING_PARENT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert parent.stdout is not None and parent.stdin is not None
        pid = int(parent.stdout.readline())
        assert any(v.encode() in _environ(parent.pid) for v in CANARY_ENV.values())  # the parent holds them
        seen = _environ(pid)
        assert not any(value.encode() in seen for value in CANARY_ENV.values())
        parent.stdin.write("\n")
        parent.stdin.flush()
        assert parent.wait(30) == 0
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


#: A secret with characters that URLs and JSON encode (quote, slash, space, plus, percent, non-ASCII).
AWKWARD = 'pw"d/ 9+%ü-x'


def test_a_secret_a_server_reflects_encoded_is_masked_too(http_server: Any) -> None:
    """A server that echoes the raw request shows the secret percent-encoded (path, query) or JSON-escaped
    (body text): each encoded form is masked as the value itself is."""
    session = Session(Engine(make_settings(merge(default_settings().to_dict(), {
        "secrets": {"K": AWKWARD},
        "profiles": {"api": {"srv": {"url": http_server.url, "timeout": 5}}}}))))
    secret = "f'{sys.secret[\"K\"]}'"
    run = session.run_fragment([
        {"api": {"profile": "srv", "method": "POST", "path": "{ f'json/{sys.secret[\"K\"]}' }",
                 "query": {"q": "{ " + secret + " }"}, "body": {"b": "{ " + secret + " }"}}},
        {"return": "{ result }"}])
    assert run.code == "success", run.error
    import json
    from urllib.parse import quote, quote_plus

    shown = json.dumps(run.value, ensure_ascii=False) + json.dumps(run.value)
    assert http_server.requests[-1][0] == "POST"
    for form in (AWKWARD, quote(AWKWARD, safe=""), quote(AWKWARD), quote_plus(AWKWARD),
                 json.dumps(AWKWARD)[1:-1], json.dumps(AWKWARD, ensure_ascii=False)[1:-1]):
        assert form not in shown, form
    assert "***" in run.value["path"] and "***" in run.value["body"]


#: Code run inside the confined worker when the allowlist imports it: every db call the worker forwards
#: asks for a billion rows (a hostile worker ignores ``limits.db_rows``).
_GREEDY = """
import dataclasses
from s2o_kernel.engine.worker import forward

_call = forward.Forwarder.call

async def _greedy(self, request, on_stream=None):
    if request.kind == "db":
        request = dataclasses.replace(request, fields={**request.fields, "max_rows": 10**9})
    return await _call(self, request, on_stream)

forward.Forwarder.call = _greedy

def seven():
    return 7
"""


def test_a_hostile_worker_cannot_read_more_rows_than_the_settings_allow(tmp_path: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``max_rows`` comes from the worker; its parent holds it to its own ``limits.db_rows``."""
    from s2o_kernel.engine import IsolatedSession

    path = tmp_path / "many.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE n (i INTEGER)")
        conn.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(50)])
    (tmp_path / "s2o_greedy.py").write_text(_GREEDY)
    monkeypatch.syspath_prepend(str(tmp_path))
    session = IsolatedSession(make_settings({"allowlist": "s2o_greedy.seven as seven", "limits": {"db_rows": 10},
                                             "profiles": {"db": {"d": {"url": f"sqlite:///{path}"}}}}))
    try:
        assert session.evaluate("seven()") == 7  # the worker imported it
        run = session.run_fragment({"db": {"profile": "d", "sql": "SELECT i FROM n"}})
        assert run.error is not None and run.error.code == "row-limit", run.error
        run = session.run_fragment([{"db": {"profile": "d", "sql": "SELECT i FROM n LIMIT 10"}},
                                    {"return": "{ result }"}])
        assert (run.code, [r["i"] for r in run.value]) == ("success", list(range(10))), run.error
    finally:
        session.close()


#: Code run inside the confined worker when the allowlist imports it: the worker stops counting its runs'
#: LLM spend (a hostile worker ignores ``limits.llm_cost``).
_SPENDTHRIFT = """
from s2o_kernel.engine.fragments import interpreter

def _no_limit(self, dollars, path):
    self.spend += dollars

interpreter.Interpreter.add_spend = _no_limit

def seven():
    return 7
"""


def test_a_hostile_worker_cannot_spend_past_the_cost_limit(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent counts what each run's llm calls cost and refuses the next call once the run's spend
    passed ``limits.llm_cost``, whatever the worker says."""
    from s2o_kernel.engine import IsolatedSession

    (tmp_path / "s2o_spendthrift.py").write_text(_SPENDTHRIFT)
    monkeypatch.syspath_prepend(str(tmp_path))
    profiles = {"llm": {"paid": {"adapter": "scripted", "script": [{"text": "x" * 400}],
                                 "price_input": 0.0, "price_output": 1000.0}}}  # $0.1 a turn
    session = IsolatedSession(make_settings({"allowlist": "s2o_spendthrift.seven as seven", "profiles": profiles,
                                             "limits": {"llm_cost": 0.15}}))
    try:
        assert session.evaluate("seven()") == 7  # the worker imported it: its spend check is gone
        turns = [{"llm": {"profile": "paid", "input": f"turn {i}"}} for i in range(5)]
        run = session.run_fragment(turns)
        assert (run.code, run.error and run.error.code) == ("errorInAgent", "cost-limit"), run.error
        assert run.error.path == "[2].llm"  # turns 0 and 1 cost $0.2 > $0.15: the third call is refused
        assert run.error.message == "the run's LLM spend $0.2 passed the cost limit (limits.llm_cost = $0.15)"
        again = session.run_fragment(turns[:1])  # a new run starts with nothing spent
        assert again.code == "success", again.error
    finally:
        session.close()


def test_a_command_never_sets_the_host_or_framing_headers(http_server: Any) -> None:
    """Even where ``allow_headers`` is true, ``Host`` (another site behind the same address, with the
    profile's credentials) and the framing headers stay the client's."""
    gw = Gateway(make_settings(merge(default_settings().to_dict(), {"profiles": {"api": {
        "open": {"url": http_server.url, "allow_headers": True, "timeout": 5}}}})))
    seen = len(http_server.requests)
    try:
        for name in ("Host", "host ", "Content-Length", "Transfer-Encoding", "Proxy-Authorization", "Connection"):
            call = OutsideCall("api", "open", {"path": "json", "headers": {name: "internal.example"}}, "api", 5.0)
            with pytest.raises(S2OError) as caught:
                gw.call_sync(call)
            assert (caught.value.code, caught.value.path) == ("fragment", "api.headers"), name
        assert len(http_server.requests) == seen
        ok = gw.call_sync(OutsideCall("api", "open", {"path": "json", "headers": {"X-Trace": "1"}}, "api", 5.0))
        assert ok["path"] == "/json" and http_server.requests[seen][2]["X-Trace"] == "1"
    finally:
        gw.close()
