"""Credentials that do not read ``sys.secret`` (issue 30; SPEC 7.1, 12).

Every credential field of a profile is a secret whether it reads ``sys.secret`` or is written literally: an
``api`` profile's ``headers`` and ``query`` values, an ``llm`` profile's ``key``, the password and every
query parameter of a ``db`` or ``api`` URL. Before the fix a literal ``Authorization`` header, a literal
``query`` value, an llm profile's literal ``key`` and a key in an api URL's query string came back in clear
when a server reflected them, and ``%profiles`` showed the URL's key.

The servers are real and reflect what they receive:

* :class:`Reflector`, an HTTP server on 127.0.0.1 that answers every request with its method, raw path and
  query, headers and body (JSON; ``/text/...`` as plain text; ``/status/N`` with status N), and that is also
  an OpenAI-compatible chat-completions server (``/v1/chat/completions``) whose reply is the
  ``Authorization`` header it received, streamed a few characters at a time (so the key arrives split over
  chunks), or a 401 whose message quotes it;
* the built-in ``echo`` profile (in-process, no socket);
* SQLite, whose driver quotes a bad URL query value in its error, and a file holding a URL query value;
* a throwaway PostgreSQL cluster (``tests/support/postgres.py``), whose driver quotes a bad URL query value,
  and which sends a password back as a row.

:data:`ROWS` is the table: one row per kind of credential, each with the calls that make a server reflect it.
Each row runs in an in-process session and in a real kernel with its containment worker, and the clear value
must appear in none of: the result, the outputs, the log lines, the error (message, source, details; and
``exc`` in ``onError``), ``%profiles``, ``%config``. Each call must show ``***`` somewhere: the value did
come back, masked (the test is not vacuous).

The format-specification class (:data:`SPEC_SHAPES`): a precision sliced a secret (``f'{sys.secret["K"]:.12}'``
sent to ``echo`` came back as its first 12 characters; stepping the precision recovered it) and a width told its
length (the padding). A secret takes no format specification: every shape (precision, width with fill,
``!r``/``!s``/``!a``, nested specs, text made with a secret, the ``format`` builtin, ``%`` formatting) is refused
with ``not-allowed`` or gives text that holds the secret whole or not at all, never a slice of it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from kernel_harness import drain, execute, install_spec, start_kernel, stop_kernel

from s2o_kernel.engine import Engine, Session, default_settings, make_settings
from s2o_kernel.engine.outside.secrets import field_secrets, shown_value, url_secret_spans
from s2o_kernel.engine.run.scopes import SecretText, reveal
from s2o_kernel.engine.settings import merge
from s2o_kernel.kernel.magics.profiles_magic import profile_lines

#: ``sq_rows`` names a URL query parameter the SQLite driver ignores (it only has to come back), which SQLAlchemy warns about.
pytestmark = [pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore:Query string argument")]

#: The clear values, each distinct and long enough that no other text holds it by chance.
HEADER_TOKEN = "lit-hdr-tok-7c1e9a52"
HEADER = f"Bearer {HEADER_TOKEN}"
QUERY = "lit-query-5d2b77e0"
ECHO_QUERY = "lit-echoq-1a9f3c64"
URL_KEY = "lit-urlkey-3f8a21b7"
LLM_KEY = "sk-lit-llm-0e6c44d9f1"
SQLITE_TIMEOUT = "lit-sqt-6b0e93aa"
SQLITE_ROWS = "lit-sqrows-2c7d18f5"
PG_QUERY = "lit-pgq-9b4d03c2"
SECRET = "Zq7vK2xW9pL4mR8tYh3N"  # a sys.secret, for the row that reads one and the format-spec class


class Reflector:
    """The reflecting server (see the module doc); :attr:`url` is its base URL, :attr:`requests` what it got."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                """Quiet."""

            def _send(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", errors="replace") if length else ""
                seen = {"method": self.command, "raw": self.path, "query": dict(parse_qsl(url.query)),
                        "headers": dict(self.headers.items()), "body": body}
                me.requests.append(seen)
                if url.path.endswith("/chat/completions"):
                    self._chat(json.loads(body or "{}"))
                elif url.path.startswith("/status/"):
                    self._send(int(url.path.split("/")[2]), "application/json", json.dumps(seen).encode())
                elif url.path.startswith("/text"):
                    self._send(200, "text/plain; charset=utf-8", repr(seen).encode())
                else:
                    self._send(200, "application/json", json.dumps(seen).encode())

            def _chat(self, request: dict[str, Any]) -> None:
                auth = self.headers.get("Authorization", "")
                said = str((request.get("messages") or [{}])[-1].get("content"))
                if "fail" in said:
                    self._send(401, "application/json", json.dumps({"error": {
                        "message": f"Incorrect API key provided: {auth}", "type": "invalid_request_error"}}).encode())
                    return
                text = f"you sent {auth} with the key {auth.removeprefix('Bearer ')}"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = [{"role": "assistant", "content": ""}] + [{"content": text[i:i + 3]}
                                                                   for i in range(0, len(text), 3)]
                for delta in pieces:
                    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                             "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                done = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}
                self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            do_GET = do_POST = do_PUT = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@dataclass
class Row:
    """One kind of credential: the clear texts that must never show, and the commands that make a server send
    them back (each run twice: as it is, and with an ``onError`` that shows ``exc``)."""

    name: str
    clear: list[str]
    calls: list[dict[str, Any]] = field(default_factory=list)


def _api(profile: str, **fields: Any) -> dict[str, Any]:
    return {"api": {"profile": profile, **fields}}


def _llm(input_text: str) -> dict[str, Any]:
    return {"llm": {"profile": "litkey", "prompt": "demo", "input": input_text, "streamOutput": True}}


def _db(profile: str, sql: str, **params: Any) -> dict[str, Any]:
    return {"db": {"profile": profile, "sql": sql, "params": params}}


ROWS = [
    Row("literal header", [HEADER, HEADER_TOKEN],
        [_api("hdr", path="reflect"), _api("hdr", path="text/x"), _api("hdr", path="status/503")]),
    Row("literal query value", [QUERY],
        [_api("qry", path="reflect"), _api("qry", path="text/x"), _api("qry", path="status/500")]),
    Row("literal query value on echo", [ECHO_QUERY], [_api("echoq", path="/reflect")]),
    Row("key in an api URL's query", [URL_KEY], [_api("urlkey"), _api("urlkey_status")]),
    Row("llm key", [LLM_KEY], [_llm("hello"), _llm("fail, please")]),
    Row("db URL query parameter (SQLite)", [SQLITE_TIMEOUT, SQLITE_ROWS],
        [_db("sq_timeout", "SELECT 1 AS one"), _db("sq_rows", "SELECT v FROM t")]),
    Row("db URL password and query parameter (PostgreSQL)", [],  # the clear values come from the cluster
        [_db("pg", "SELECT CAST(:pw AS TEXT) AS pw, current_user AS who", pw="<password>"),
         _db("pg_query", "SELECT 1 AS one")]),
    Row("secret read with sys.secret", [SECRET],
        [_api("sec", path="reflect"), _api("echo", method="POST", path="/b",
                                             body={"k": "{ f'{sys.secret[\"K\"]}' }"})]),
]


def _profiles(server: Reflector, sqlite_dir: Path, pg_url: str) -> dict[str, Any]:
    db_file = sqlite_dir / "rows.sqlite"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
        conn.execute("DELETE FROM t")
        conn.execute("INSERT INTO t VALUES (?)", (SQLITE_ROWS,))
    return {
        "api": {
            "hdr": {"url": server.url, "timeout": 5, "headers": {"Authorization": HEADER}},
            "qry": {"url": server.url, "timeout": 5, "query": {"api_key": QUERY}},
            "echoq": {"url": "s2o-echo:", "query": {"api_key": ECHO_QUERY}},
            "urlkey": {"url": f"{server.url}/reflect?key={URL_KEY}", "timeout": 5, "allow_path": False},
            "urlkey_status": {"url": f"{server.url}/status/502?key={URL_KEY}", "timeout": 5, "allow_path": False},
            "sec": {"url": server.url, "timeout": 5,
                    "headers": {"Authorization": "{ f'Bearer {sys.secret[\"K\"]}' }"}},
        },
        "llm": {"litkey": {"adapter": "openai", "model": "m", "url": server.url + "/v1", "key": LLM_KEY}},
        "db": {
            "sq_timeout": {"url": f"sqlite:///{sqlite_dir / 'timeout.sqlite'}?timeout={SQLITE_TIMEOUT}"},
            "sq_rows": {"url": f"sqlite:///{db_file}?s2o_unused={SQLITE_ROWS}", "read_only": True},
            "pg": {"url": pg_url},
            "pg_query": {"url": f"{pg_url}?prepared_statement_cache_size={PG_QUERY}"},
        },
    }


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The servers and the profiles over them; ``clear`` maps each row to its clear texts (the PostgreSQL
    row's password is the cluster's)."""
    from postgres import PASSWORD

    server = Reflector()
    try:
        profiles = _profiles(server, tmp_path_factory.mktemp("sqlite"), postgres.url)
        clear = {row.name: row.clear or [PASSWORD, PG_QUERY] for row in ROWS}
        yield {"server": server, "profiles": profiles, "clear": clear, "password": PASSWORD}
    finally:
        server.stop()


def _fragments(call: dict[str, Any]) -> list[Any]:
    """The call as it is (its result logged, output and returned), and with an ``onError`` that shows ``exc``."""
    shown = "{ [exc.code, exc.message, exc.body] }"
    return [[call, {"log": "{ result }"}, {"output": "{ result }"}, {"return": "{ result }"}],
            [{**call, "onError": [{"log": "{ exc.message }"}, {"output": shown}, {"return": shown}]},
             {"return": "{ result }"}]]


def _with_password(call: dict[str, Any], password: str) -> dict[str, Any]:
    return json.loads(json.dumps(call).replace("<password>", password))


def _error_text(error: Any) -> str:
    if error is None:
        return ""
    inner = getattr(error, "errors", [])
    return json.dumps([error.code, error.message, error.source, error.details, *map(_error_text, inner)],
                      default=repr)


@pytest.fixture(scope="module")
def session(world: dict[str, Any]) -> Session:
    return Session(Engine(make_settings(merge(default_settings().to_dict(), {
        "secrets": {"K": SECRET}, "profiles": world["profiles"]}))))


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_credential_never_shows_in_a_session(world: dict[str, Any], session: Session, row: Row) -> None:
    clear = world["clear"][row.name]
    for call in row.calls:
        masked = False
        for fragment in _fragments(_with_password(call, world["password"])):
            parts: list[dict[str, Any]] = []
            run = session.run_fragment(fragment, on_output=parts.append)
            seen = json.dumps([run.code, run.value, run.logs, parts], default=repr) + _error_text(run.error)
            leaked = [c for c in clear if c in seen]
            assert not leaked, (row.name, fragment, leaked, seen)
            masked = masked or "***" in seen
        assert masked, (row.name, call, "nothing came back masked")
    shown = session.settings_dict()
    text = "\n".join(profile_lines(shown["profiles"])) + json.dumps(shown)
    assert not [c for c in clear if c in text], text


def test_the_calls_reached_the_servers_with_the_credentials(world: dict[str, Any], session: Session) -> None:
    """What the masking hides did go out: each server got the clear value (else the table proves nothing)."""
    server: Reflector = world["server"]
    got = json.dumps(server.requests)
    for text in (HEADER, QUERY, URL_KEY, f"Bearer {LLM_KEY}", f"Bearer {SECRET}"):
        assert text in got, text


def test_profiles_shows_each_credential_as_stars(world: dict[str, Any], session: Session) -> None:
    profiles = session.settings_dict()["profiles"]
    assert profiles["api"]["hdr"]["headers"] == {"Authorization": "***"}
    assert profiles["api"]["qry"]["query"] == {"api_key": "***"}
    assert profiles["api"]["urlkey"]["url"] == f"{world['server'].url}/reflect?key=***"
    assert profiles["llm"]["litkey"]["key"] == "***"
    assert profiles["db"]["pg_query"]["url"].startswith("postgresql://s2o:***@127.0.0.1:")
    assert profiles["db"]["pg_query"]["url"].endswith("/s2o?prepared_statement_cache_size=***")
    assert profiles["api"]["sec"]["headers"] == {"Authorization": "***"}


# -- the same rows through a real kernel and its containment worker ---------------------------------------------

def _toml(profiles: dict[str, Any]) -> str:
    lines: list[str] = []
    for kind, named in profiles.items():
        for name, fields in named.items():
            lines.append(f"[profiles.{kind}.{name}]")
            maps = {k: v for k, v in fields.items() if isinstance(v, dict)}
            lines += [f"{k} = {json.dumps(v)}" for k, v in fields.items() if k not in maps]
            for key, values in maps.items():
                lines.append(f"[profiles.{kind}.{name}.{key}]")
                lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def kernel(world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    kernels_dir = install_spec(tmp_path_factory.mktemp("prefix"))
    cwd = tmp_path_factory.mktemp("cwd")
    config = cwd / "credentials.toml"
    config.write_text(_toml(world["profiles"]))
    env = {"S2O_CONFIG": str(config), "S2O_SECRET_K": SECRET, "S2O_KERNEL_ISOLATED": "",
           "S2O_DATA_DIR": str(tmp_path_factory.mktemp("s2o-data"))}
    km, client = start_kernel(kernels_dir, cwd, env=env)
    try:
        drain(client)
        yield client
    finally:
        stop_kernel(km, client)


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_credential_never_shows_in_a_kernel(world: dict[str, Any], kernel: Any, row: Row) -> None:
    clear = world["clear"][row.name]
    for call in row.calls:
        masked = False
        for fragment in _fragments(_with_password(call, world["password"])):
            reply, outputs = execute(kernel, json.dumps(fragment))
            seen = json.dumps([reply, outputs], default=str)
            assert not [c for c in clear if c in seen], (row.name, fragment, seen)
            masked = masked or "***" in seen
        assert masked, (row.name, call, "nothing came back masked")
    for magic in ("%profiles", "%config credentials.toml"):
        reply, outputs = execute(kernel, magic)
        seen = json.dumps([reply, outputs], default=str)
        assert reply["status"] == "ok" and not [c for c in clear if c in seen], (magic, seen)


def test_a_format_specification_on_a_secret_is_refused_in_the_worker(kernel: Any) -> None:
    """In the containment worker a secret is a placeholder; the same refusal holds there."""
    for n in (1, 12):
        cell = [{"api": {"profile": "echo", "query": {"q": "{ f'{sys.secret[\"K\"]:." + str(n) + "}' }"}}},
                {"return": "{ result }"}]
        reply, outputs = execute(kernel, json.dumps(cell))
        assert (reply["status"], reply["ename"]) == ("error", "not-allowed"), reply
        seen = json.dumps([reply, outputs], default=str)
        assert SECRET not in seen and not _slice_in(seen), seen


# -- what is secret in a field: one rule (secrets.field_secrets) -----------------------------------------------

@pytest.mark.parametrize(("url", "password"), [
    ("postgresql://u:pa/ss@h/db", "pa/ss"),
    ("postgresql://u:p%40ss@h/db", "p@ss"),
    ("postgresql+asyncpg://u:p:w@h:5432/db?x=1", "p:w"),
    ("mysql://u:secret-pw@[::1]:3306/db", "secret-pw"),
])
def test_a_url_password_is_found_as_the_driver_reads_it(url: str, password: str) -> None:
    from sqlalchemy.engine import make_url

    assert make_url(url).password == password
    assert password in field_secrets("url", url)
    assert password.split("%")[0] not in shown_value("url", url).replace("***", "")


def test_url_query_values_and_passwords_are_spans_of_the_url() -> None:
    url = "https://user:pw-1@example.org/v1/x?key=k-1&flag&b=a%2Fb#frag"
    parts = [url[a:b] for a, b in url_secret_spans(url)]
    assert parts == ["pw-1", "k-1", "flag", "a%2Fb#frag"]
    assert shown_value("url", url) == "https://user:***@example.org/v1/x?key=***&***&b=***"
    assert {"a/b", "a%2Fb"} <= set(field_secrets("url", url))
    assert shown_value("url", "s2o-echo:") == "s2o-echo:" and field_secrets("url", "https://example.org/a") == []
    assert shown_value("url", "{ 'https://u:p@h/' }") == "***"  # an expression: nothing of it shows


def test_a_header_value_and_its_token_are_secret() -> None:
    assert set(field_secrets("headers", "Bearer abc-123")) == {"Bearer abc-123", "abc-123"}
    assert field_secrets("headers", "application/json") == ["application/json"]
    assert field_secrets("query", "v") == ["v"] and field_secrets("key", "sk-1") == ["sk-1"]


# -- a secret takes no format specification -------------------------------------------------------------------

S = 'sys.secret["K"]'
S1 = "sys.secret['K']"  # inside a nested f-string (Python 3.11: no quote of the outer string inside)
#: Every shape of format specification or formatting call on a secret, as an expression, with what it gives:
#: ``refused`` (a coded error, never ``syntax``), ``whole`` (text holding the whole secret, shown as ``***``),
#: ``name`` (the secret's name, ``<secret K>``, or a piece of it), ``masked`` (the ``repr`` of text made with a
#: secret: ``'***'``).
SPEC_SHAPES = [
    # precision, on the secret and on text made with it
    (f"f'{{{S}:.12}}'", "refused"), (f"f'{{{S}:.1}}'", "refused"), (f"f'{{{S}:.19}}'", "refused"),
    (f"f'{{{S}!s:.5}}'", "refused"), (f"f'{{{S}!r:.5}}'", "refused"), (f"f'{{{S}!a:.5}}'", "refused"),
    (f"f'''{{f\"x{{{S1}}}\":.6}}'''", "refused"), (f"f'''{{f\"{{{S1}}}y\"!s:.2}}'''", "refused"),
    # width, fill and alignment (a width pads by what the secret lacks: its length)
    (f"f'{{{S}:60}}'", "refused"), (f"f'{{{S}:>60}}'", "refused"), (f"f'{{{S}:*<60}}'", "refused"),
    (f"f'{{{S}:^61}}'", "refused"), (f"f'{{{S}:<}}'", "refused"), (f"f'{{{S}:5}}'", "refused"),
    (f"f'{{{S}:s}}'", "refused"), (f"f'{{{S}:0>40}}'", "refused"), (f"f'''{{f\"{{{S1}}}\":>40}}'''", "refused"),
    # nested specifications
    (f"f'{{{S}:{{\".5\"}}}}'", "refused"), (f"f'{{{S}:.{{2 + 3}}}}'", "refused"),
    (f"f'{{{S}:{{\"*\"}}>{{40}}}}'", "refused"), (f"f'{{{S}:{{w}}}}'", "refused"), (f"f'{{{S}:{{e}}}}'", "whole"),
    # conversions alone: the whole secret, or its name
    (f"f'{{{S}!r}}'", "name"), (f"f'{{{S}!s}}'", "whole"), (f"f'{{{S}!a}}'", "name"), (f"f'{{{S}}}'", "whole"),
    (f"f'{{{S}:}}'", "whole"), (f"f'''{{f\"<{{{S1}}}>\"}}'''", "whole"), (f"f'''{{f\"{{{S1}}}\"!r}}'''", "masked"),
    # the format builtin, str.format, % formatting, str and repr
    (f"format({S}, '.5')", "refused"), (f"format({S}, '')", "refused"), (f"format(f'{{{S}}}', '.5')", "refused"),
    (f"'{{:.5}}'.format({S})", "refused"), (f"'{{0!s:.5}}'.format({S})", "refused"),
    (f"'{{k:.5}}'.format_map({{'k': {S}}})", "refused"), (f"'%.5s' % ({S},)", "refused"),
    (f"'%s' % ({S},)", "refused"), (f"'%-40s' % ({S},)", "refused"), (f"'%(k).5s' % {{'k': {S}}}", "refused"),
    (f"'%r' % ({S},)", "name"), (f"'%.3r' % ({S},)", "name"), (f"'%a' % ({S},)", "name"),
    (f"str({S})[:5]", "refused"), (f"repr({S})[:5]", "name"), (f"ascii({S})", "name"),
]


def _slices(text: str, n: int = 4) -> set[str]:
    return {text[i:i + n] for i in range(len(text) - n + 1)}


def _slice_in(text: str) -> bool:
    """Whether ``text`` holds a piece of the secret other than the whole secret."""
    rest = text.replace(SECRET, "\0")
    return any(piece in rest for piece in _slices(SECRET))


@pytest.fixture(scope="module")
def spec_session() -> Session:
    s = Session(Engine(make_settings({"secrets": {"K": SECRET},
                                      "allowlist": default_settings().allowlist + "\nformat\nrepr\nascii\n"})))
    assert s.run_fragment({"var": {"w": ".5", "e": ""}}).code == "success"
    return s


@pytest.mark.parametrize(("expr", "gives"), SPEC_SHAPES, ids=[e for e, _ in SPEC_SHAPES])
def test_no_format_shape_gives_a_slice_of_a_secret(spec_session: Session, expr: str, gives: str) -> None:
    """Evaluated, and sent to ``echo`` (which reflects it): refused, or the whole secret (masked), or its
    name; never a slice of it."""
    try:
        value = spec_session.evaluate(expr)
    except Exception as exc:
        code = getattr(exc, "code", None)
        assert gives == "refused" and code is not None and code != "syntax", (expr, exc)
        assert not _slice_in(str(exc)) and SECRET not in str(exc), (expr, exc)
    else:
        text = reveal(value) if type(value) is SecretText else value
        assert isinstance(text, str) and not _slice_in(text), (expr, text)
        kind = "whole" if SECRET in text else "masked" if "***" in text else "name"
        assert gives == kind, (expr, gives, text)
        assert kind != "name" or text in "<secret K>" or "<secret K>" in text, (expr, text)
    run = spec_session.run_fragment([{"api": {"profile": "echo", "query": {"q": "{ " + expr + " }"},
                                               "body": {"b": "{ " + expr + " }"}}}, {"return": "{ result }"}])
    seen = json.dumps([run.code, run.value]) + _error_text(run.error)
    assert SECRET not in seen and not _slice_in(seen), (expr, seen)
    assert (run.code == "success") == (gives != "refused"), (expr, run.code, seen)
    if gives == "whole":
        assert "***" in json.dumps(run.value), (expr, run.value)


def test_a_format_specification_on_a_secret_is_not_allowed(spec_session: Session) -> None:
    for expr in (f"f'{{{S}:.12}}'", f"f'{{{S}:>40}}'", f"f'{{{S}!r:5}}'", f"f'''x{{f\"{{{S1}}}\":.3}}'''"):
        with pytest.raises(Exception) as caught:
            spec_session.evaluate(expr)
        assert getattr(caught.value, "code", None) == "not-allowed", expr
        assert "format specification" in str(caught.value)
    whole = spec_session.evaluate(f"f'Bearer {{{S}}}'")
    assert reveal(whole) == f"Bearer {SECRET}" and repr(whole) == "'Bearer ***'"
    assert reveal(spec_session.evaluate(f"f'{{{S}!r}}'")) == "<secret K>"


def test_stepping_the_precision_recovers_nothing_through_echo(spec_session: Session) -> None:
    """The attack of the issue: ``f'{sys.secret["K"]:.N}'`` to ``echo`` for N = 1, 2, …"""
    for n in range(1, len(SECRET) + 2):
        run = spec_session.run_fragment([{"api": {"profile": "echo", "query": {"q": "{ f'{" + S + ":." + str(n)
                                                                             + "}' }"}}}, {"return": "{ result }"}])
        assert run.error is not None and run.error.code == "not-allowed", (n, run.code, run.value)
