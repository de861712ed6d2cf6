"""Red-team findings on record and replay (SPEC 13): each test is an attack on the cassette, the gateway's
record/replay path or ``%replay`` that worked when it was written (a failing test until its cause is fixed),
unless its name says it is a regression test of something that held.

The attacker is a hostile cassette file (a recording committed to a repository is data anyone may edit), a
hostile server answering a recorded call, or the person's own odd input. The rules judged against: a coded
error with a stable code, never a Python exception out of the engine; every read bounded in bytes, items,
depth and time; no secret value in a cassette, output or error; the contained worker never sees a
cassette; a stand-in secret is never sent anywhere; ``limits.llm_cost`` holds for every real call.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, Session, make_settings

pytestmark = pytest.mark.timeout(180)

TOKEN = "sk-live-7f3a9c21"
PLACED = "\u2063s2o-secret:TOK\u2063"  # what the run holds for sys.secret['TOK'] (run/scopes.placeholder)
DB_REQUEST = {"sql": "SELECT 1", "params": {}, "max_rows": 10000}
DB_CALL = {"db": {"profile": "demo", "sql": "SELECT 1"}}


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The modes as the settings give them (these tests may run under CI=true), the demo database fresh."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("S2O_REPLAY", raising=False)
    monkeypatch.setenv("S2O_DATA_DIR", str(tmp_path / "s2o-data"))


def _cassette(path: Path, entries: list[dict[str, Any]] | str) -> Path:
    """Write a cassette of ``entries`` (or of the raw text of its entries list) at ``path``."""
    raw = entries if isinstance(entries, str) else json.dumps(entries)
    path.write_text('{"format": 1, "entries": ' + raw + "}")
    return path


def _db_entry(outcome: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"kind": "db", "profile": "demo", "request": DB_REQUEST, "outcome": outcome, **more}


def _session(data: dict[str, Any], isolated: bool) -> Any:
    return IsolatedSession(make_settings(data)) if isolated else Session(Engine(make_settings(data)))


def _run(data: dict[str, Any], isolated: bool, fragment: Any) -> Any:
    """The run of ``fragment``; a Python exception out of the session is returned as it is (not raised), so a
    test can say it should have been a coded error."""
    session = _session(data, isolated)
    try:
        return session.run_fragment(fragment)
    except Exception as exc:  # the finding: the engine let a Python exception out
        return exc
    finally:
        if isolated:
            session.close()


def _coded(run: Any) -> tuple[str, str]:
    """``(code, message)`` of a failed run; a raw exception (the finding) as ``("raised", "Type: text")``."""
    if isinstance(run, BaseException):
        return "raised", f"{type(run).__name__}: {run}"
    assert run.error is not None, (run.code, run.value)
    return run.error.code, run.error.message


ISOLATION = pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "worker"])


# -- a server of the test's own: it records every request whole and answers with a fixed body -------------
class _Capture(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, dict(self.headers.items()), body))
        answer = self.server.answer
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = _serve


@contextlib.contextmanager
def _capture(answer: bytes = b'{"ok": true}') -> Iterator[Any]:
    """A server on 127.0.0.1 answering every request with ``answer``; ``.seen`` holds every request received
    as ``(method, raw path with query, headers, body bytes)`` and ``.url`` is its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    httpd.daemon_threads = True
    httpd.seen, httpd.answer = [], answer  # type: ignore[attr-defined]
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _everything_sent(server: Any) -> bytes:
    return b"\n".join(f"{m} {p} {h}".encode() + b" " + body for m, p, h, body in server.seen)


# == 1. a placeholder that is data becomes the secret's value (secret exfiltration) =======================
@ISOLATION
def test_a_placeholder_in_a_replayed_result_is_never_turned_into_the_secret(isolated: bool, tmp_path: Path) -> None:
    """HIGH. A cassette entry's result holds the placeholder text of secret TOK, which the fragment never reads.
    In ``record`` the entry is replayed, the agent forwards the row to an api (an ordinary pattern), and the
    gateway's ``unplace`` turns the text into TOK's value: the server receives the secret."""
    cassette = _cassette(tmp_path / "forged.cassette.json", [_db_entry({"result": [{"note": PLACED}]})])
    with _capture() as server:
        data = {"secrets": {"TOK": TOKEN}, "replay": {"mode": "record", "cassette": str(cassette)},
                "profiles": {"api": {"crm": {"url": server.url}}}}
        run = _run(data, isolated, [DB_CALL, {"api": {"profile": "crm", "method": "POST", "path": "/notes",
                                                       "body": {"note": "{ result[0]['note'] }"}}}])
        assert not isinstance(run, BaseException), run
        assert TOKEN.encode() not in _everything_sent(server), server.seen


def test_a_placeholder_in_a_server_response_is_never_turned_into_the_secret() -> None:
    """HIGH (the same cause, live, no cassette): a hostile server answers with the placeholder text of TOK; an
    agent that echoes the answer back (a chat loop) sends TOK's value to that server."""
    with _capture(json.dumps({"note": PLACED}).encode()) as server:
        data = {"secrets": {"TOK": TOKEN}, "profiles": {"api": {"evil": {"url": server.url}}}}
        run = _run(data, False, [{"api": {"profile": "evil", "path": "/message"}},
                                 {"api": {"profile": "evil", "method": "POST", "path": "/reply",
                                          "body": {"echo": "{ result['note'] }"}}}])
        assert not isinstance(run, BaseException), run
        assert TOKEN.encode() not in _everything_sent(server), server.seen


# == 2. a secret in the cassette, base64-encoded after a prefix =============================================
def test_a_secret_base64_encoded_after_a_prefix_is_refused(http_server: Any, tmp_path: Path) -> None:
    """HIGH. ``/b64auth`` answers with the Authorization header it received, base64-encoded. The docs' own
    header, ``Bearer {secret}``, puts the secret 7 bytes in: its base64 is not the secret's base64, so
    :meth:`Cassette.write` (which looks for ``b64encode(secret)`` only) writes the file, and anyone reading
    the committed cassette decodes ``Bearer sk-live-…``."""
    cassette = tmp_path / "b64.cassette.json"
    data = {"secrets": {"TOK": TOKEN}, "replay": {"mode": "record", "cassette": str(cassette)},
            "profiles": {"api": {"crm": {"url": http_server.url, "allow_headers": True}}}}
    run = _run(data, False, {"api": {"profile": "crm", "path": "/b64auth",
                                     "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOK\"]}' }"}}})
    written = cassette.read_text() if cassette.exists() else ""
    decoded = [base64.b64decode(v) for e in json.loads(written or '{"entries": []}')["entries"]
               for v in (e["outcome"].get("result") or {}).values()]
    assert TOKEN.encode() not in b"".join(decoded), written
    assert _coded(run)[0] == "cassette-secret"


# == 3. a recorded price lifts limits.llm_cost for the real calls that follow ===============================
@ISOLATION
def test_a_negative_recorded_cost_does_not_lift_the_cost_limit(isolated: bool, tmp_path: Path) -> None:
    """MEDIUM. In ``record`` a replayed turn's ``cost`` is added to the run's spend unchecked: a cassette entry
    with ``"cost": -1e12`` lets every later live (paid) call through ``limits.llm_cost``. Without the
    poisoned entry the second call alone trips ``cost-limit``."""
    request = {"messages": [{"role": "user", "content": "hi"}], "tools": [], "stream": False, "model": "scripted"}
    cassette = _cassette(tmp_path / "cost.cassette.json", [{"kind": "llm", "profile": "pricey", "request": request,
                         "outcome": {"result": {"text": "ok", "tool_calls": [], "input_tokens": 1,
                                                "output_tokens": 1, "cost": -1e12}}}])
    pricey = {"adapter": "scripted", "model": "scripted", "price_input": 1_000_000.0, "price_output": 0.0}
    data = {"limits": {"llm_cost": 5.0}, "profiles": {"llm": {"pricey": pricey}},
            "replay": {"mode": "record", "cassette": str(cassette)}}
    run = _run(data, isolated, [{"llm": {"profile": "pricey", "input": "hi"}},
                                {"llm": {"profile": "pricey", "input": "one two three four five six seven"}},
                                {"llm": {"profile": "pricey", "input": "one two three four five six seven eight"}}])
    live = len(json.loads(cassette.read_text())["entries"]) - 1
    code = getattr(getattr(run, "error", None), "code", getattr(run, "code", run))
    # fixed: the poisoned entry is refused as not a model turn (cassette), or the limit holds (cost-limit)
    assert code in ("cost-limit", "cassette") and live <= 1, f"{code}: {live} live calls of $7-$8 each under $5"


# == 4. a stand-in secret reaches a real server ============================================================
def test_a_stand_in_credential_is_never_sent_after_a_mode_switch(tmp_path: Path) -> None:
    """MEDIUM. A notebook whose cassette exists replays with stand-ins for the secrets its profiles read
    (docs/testing.md: "each stands in for itself, and is never sent anywhere"). After ``%replay record``
    (``update_settings``) the stand-in stays a secret, the profile's ``query`` evaluates it, and the real
    server receives ``?key=%E2%81%A3s2o-secret%3ACRM_KEY%E2%81%A3``; only a call's own fields are checked
    for stand-ins (``missing-secret``), never the profile's credentials."""
    cassette = _cassette(tmp_path / "keys.cassette.json", [])
    with _capture() as server:
        data = {"replay": {"mode": "replay", "cassette": str(cassette)},
                "profiles": {"api": {"crm": {"url": server.url, "query": {"key": "{ sys.secret['CRM_KEY'] }"}}}}}
        session = Session(Engine(make_settings(data)))
        session.update_settings({"replay": {"mode": "record"}})  # what %replay record does
        run = session.run_fragment({"api": {"profile": "crm", "path": "/orders"}})
        sent = _everything_sent(server)
        assert b"s2o-secret" not in sent and b"%E2%81%A3" not in sent, sent
        assert server.seen == [] and run.error is not None and run.error.code == "missing-secret", (run, sent)


# == 5. a cassette write that fails is a Python exception, not a coded error ================================
@ISOLATION
@pytest.mark.parametrize("attack", ["server-lone-surrogate", "nan-in-cassette", "unwritable-folder"])
def test_a_cassette_that_cannot_be_written_is_a_coded_error(attack: str, isolated: bool, tmp_path: Path) -> None:
    """MEDIUM. ``Cassette.write`` raises ``UnicodeEncodeError`` (a server's JSON ``"\\ud800"``, which a live run
    takes as it is), ``ValueError`` (``NaN`` in the file: ``json.loads`` takes it, ``allow_nan=False`` refuses
    to write it back) or ``OSError`` (mkdir/mkstemp/replace); ``Gateway._keep`` catches ``S2OError`` only. In-process
    the run ends ``unexpected: UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800'…``; in the
    worker the exception leaves ``IsolatedSession.run_fragment`` raw, with its traceback."""
    fragment: Any = DB_CALL
    answer = b'{"ok": true}'
    if attack == "server-lone-surrogate":
        cassette, answer, fragment = tmp_path / "s.cassette.json", b'{"s": "\\ud800"}', {"api": {"profile": "crm",
                                                                                                  "path": "/x"}}
    elif attack == "nan-in-cassette":
        cassette = _cassette(tmp_path / "nan.cassette.json", '[{"kind": "db", "profile": "demo", '
                             '"request": {"other": 1}, "outcome": {"result": NaN}}]')
    else:
        cassette = Path("/proc/self/no-folder-to-write.cassette.json")
    with _capture(answer) as server:
        data = {"replay": {"mode": "record", "cassette": str(cassette)},
                "profiles": {"api": {"crm": {"url": server.url}}}}
        run = _run(data, isolated, fragment)
        if attack == "server-lone-surrogate":  # fixed: written with \u escapes, and replayed as recorded
            assert not isinstance(run, BaseException) and run.code == "success", run
            data["replay"]["mode"] = "replay"
            assert _run(data, isolated, [fragment, {"return": "{ result }"}]).value == {"s": "\ud800"}
            return
        code, message = _coded(run)
    assert code not in ("raised", "unexpected", "worker-protocol"), message
    assert "Error:" not in message, message


# == 6. a cassette that never answers: no bound in time =====================================================
def _unblock(fifo: Path) -> None:
    """Let a reader stuck opening ``fifo`` go on (it reads an empty file)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def _within(seconds: float, work: Any, fifo: Path) -> tuple[bool, Any]:
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    finished = not thread.is_alive()
    while thread.is_alive():
        _unblock(fifo)
        thread.join(0.5)
    return finished, done[0] if done else None


def test_a_fifo_as_cassette_does_not_hang_loading_the_settings(tmp_path: Path) -> None:
    """MEDIUM. ``%replay replay pipe`` (or ``replay.cassette`` in s2o.toml, or a notebook's cassette name taken by
    a FIFO): ``bare_settings`` → ``stand_ins`` opens the path with no bound in time, so the kernel's
    ``update_settings`` (and its start) blocks forever."""
    fifo = tmp_path / "pipe.cassette.json"
    os.mkfifo(fifo)
    finished, _ = _within(5, lambda: make_settings({"replay": {"mode": "replay", "cassette": str(fifo)}}), fifo)
    assert finished, "make_settings was still opening the cassette after 5 s"


def test_a_fifo_as_cassette_does_not_hang_a_contained_run_past_its_time_limit(tmp_path: Path) -> None:
    """MEDIUM. In ``record`` the kernel's process opens the cassette for a worker's call (``Gateway._take`` in
    ``call_sync``) outside any deadline: a run with ``limits.time = 2`` still waits after 15 s. (In-process the
    run does end, ``timedOut``, leaving a thread blocked in ``open``.)"""
    fifo = tmp_path / "pipe.cassette.json"
    os.mkfifo(fifo)
    session = IsolatedSession(make_settings({"limits": {"time": 2},
                                             "replay": {"mode": "record", "cassette": str(fifo)}}))
    try:
        finished, _ = _within(15, lambda: session.run_fragment(DB_CALL), fifo)
    finally:
        session.close()
    assert finished, "the contained run was still waiting on the cassette 13 s past its time limit"


# == 7. a replayed outcome is taken unchecked: none of a live response's bounds ==============================
DEEP = "[" * 900 + "]" * 900


@ISOLATION
@pytest.mark.parametrize(("attack", "entries"), [
    ("result nested 900 deep", '[{"kind": "db", "profile": "demo", "request": ' + json.dumps(DB_REQUEST)
     + ', "outcome": {"result": ' + DEEP + "}}]"),
    ("result NaN", '[{"kind": "db", "profile": "demo", "request": ' + json.dumps(DB_REQUEST)
     + ', "outcome": {"result": NaN}}]'),
    ("error details a string", json.dumps([_db_entry({"error": {"code": "db-failed", "message": "m",
                                                               "details": "oops"}})])),
])  # fmt: skip
def test_a_replayed_outcome_is_bounded_and_checked_as_a_live_one(attack: str, entries: str, isolated: bool,
                                                                  tmp_path: Path) -> None:
    """LOW-MEDIUM. ``Take.replay`` hands on what the file holds: a live response nested past the engine's depth
    bound is ``too-deep`` and a non-finite number is not JSON, but replayed both reach the run (``success``);
    a recorded error's ``details`` of any type is raised as it is, which the worker's reply check reports as
    ``worker-protocol: … an error whose details is not dict or null`` (the worker is blamed for the file)."""
    cassette = _cassette(tmp_path / "shape.cassette.json", entries)
    run = _run({"replay": {"mode": "replay", "cassette": str(cassette)}}, isolated,
               [DB_CALL, {"return": "{ result }"}])
    code, message = _coded(run) if isinstance(run, BaseException) or run.error is not None else ("success", "")
    assert code in ("cassette", "too-deep", "db-failed"), (attack, code, message[:200])
    assert run.error.details is None or type(run.error.details) is dict, (attack, run.error.details)


@ISOLATION
def test_streamed_chunks_that_are_not_a_list_are_a_coded_error(isolated: bool, tmp_path: Path) -> None:
    """MEDIUM. ``"chunks": 5`` on a streamed llm entry: ``Take.replay`` iterates it; in-process the run ends
    ``unexpected: TypeError: 'int' object is not iterable``, in the worker the ``TypeError`` leaves
    ``IsolatedSession.run_fragment`` raw."""
    request = {"messages": [{"role": "user", "content": "Hello"}], "tools": [], "stream": True, "model": "scripted"}
    cassette = _cassette(tmp_path / "chunks.cassette.json", [{
        "kind": "llm", "profile": "scripted", "request": request, "chunks": 5,
        "outcome": {"result": {"text": "hi", "tool_calls": [], "input_tokens": 1, "output_tokens": 1, "cost": 0.0}}}])
    run = _run({"replay": {"mode": "replay", "cassette": str(cassette)}}, isolated,
               {"llm": {"profile": "scripted", "input": "Hello", "streamOutput": True}})
    code, message = _coded(run)
    assert code == "cassette", message


@pytest.mark.parametrize(("attack", "entries", "call"), [
    ("unknown code of 1 MB", [_db_entry({"error": {"code": "A" * 1_000_000}})], DB_CALL),
    ("closest entry's profile of 1 MB", [{"kind": "db", "profile": "P" * 1_000_000, "request": {}, "outcome": {}}],
     DB_CALL),
    ("closest entry's key of 1 MB", [{"kind": "db", "profile": "demo", "request": {"K" * 1_000_000: 1},
                                      "outcome": {}}], DB_CALL),
])  # fmt: skip
def test_an_error_quotes_a_bounded_part_of_the_cassette(attack: str, entries: Any, call: Any, tmp_path: Path) -> None:
    """LOW. The errors quote the file whole: ``Take.replay``'s ``unknown code {code!r}`` and ``Cassette._miss``'s
    closest profile and differing paths; a 1 MB value makes a 1 MB message (SPEC bounds: ``QUOTE`` = 80)."""
    cassette = _cassette(tmp_path / "quote.cassette.json", entries)
    code, message = _coded(_run({"replay": {"mode": "replay", "cassette": str(cassette)}}, False, call))
    assert code in ("cassette", "replay-miss") and len(message) < 2_000, (attack, code, len(message))


# == 8. a replayed outcome is not masked ===================================================================
def test_a_replayed_outcome_is_masked_as_a_live_one(tmp_path: Path) -> None:
    """LOW. A live result, output or error that holds a secret the session knows shows it as ``***``
    (``Gateway._serve`` masks); a replayed one (``Gateway._replayed``) is handed on unmasked. A cassette holds
    such a value when it was recorded before the value became a secret (a login's token set as a secret
    later), or when anyone edits it."""
    cassette = _cassette(tmp_path / "leak.cassette.json", [
        _db_entry({"result": [{"leak": "token=" + TOKEN}]}),
        _db_entry({"error": {"code": "db-failed", "message": "bad " + TOKEN, "details": {"d": TOKEN}}})])
    session = Session(Engine(make_settings({"secrets": {"TOK": TOKEN},
                                            "replay": {"mode": "replay", "cassette": str(cassette)}})))
    shown = session.run_fragment([DB_CALL, {"output": "{ result[0]['leak'] }"}, {"return": "{ result }"}])
    failed = session.run_fragment(DB_CALL)
    assert failed.error is not None
    seen = repr((shown.value, shown.outputs, failed.error.message, failed.error.details))
    assert TOKEN not in seen, seen


def test_to_script_masks_what_it_shows_and_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LOW (the same cause): ``%replay to-script`` shows and writes the recorded turns unmasked
    (``replay_magic._to_script``: ``emit_result`` and ``write_text`` redact nothing)."""
    from s2o_kernel import engine
    from s2o_kernel.kernel.runner import CellRunner

    monkeypatch.chdir(tmp_path)
    _cassette(tmp_path / "turns.cassette.json", [{"kind": "llm", "profile": "scripted", "request": {},
                                                  "outcome": {"result": {"text": "the key is " + TOKEN}}}])
    runner = CellRunner(Session(Engine(make_settings({"secrets": {"TOK": TOKEN}}))), engine)
    assert runner.run("%replay replay turns.cassette.json").ok
    shown = runner.run("%replay to-script scripted")
    assert runner.run("%replay to-script scripted clerk.toml").ok
    assert TOKEN not in repr(shown.outputs), shown.outputs
    assert TOKEN not in (tmp_path / "clerk.toml").read_text()


# == 9. the contained worker reads the cassette ==============================================================
def test_the_contained_worker_never_opens_the_cassette(tmp_path: Path) -> None:
    """LOW-MEDIUM. SPEC 13: "the contained worker never sees a cassette". ``worker_settings`` keeps ``replay``
    (mode and path), and the worker's ``do_init`` → ``bare_settings`` → ``stand_ins`` opens the file and reads up
    to 64 MiB of it (before its memory cap; a FIFO there stalls the worker's start). Run in a fresh interpreter
    so the worker is a fork that carries a spy on ``open`` in :mod:`~s2o_kernel.engine.outside.cassette`."""
    cassette = _cassette(tmp_path / "w.cassette.json", [])
    script = textwrap.dedent(f"""
        import os, sys
        import s2o_kernel.engine.outside.cassette as cassette
        from s2o_kernel.engine import IsolatedSession, make_settings
        parent = os.getpid()
        def spy(file, *args, **kwargs):
            if os.getpid() != parent and str(file) == {str(cassette)!r}:
                os.write(2, b"WORKER-OPENED-THE-CASSETTE\\n")
            return open(file, *args, **kwargs)
        cassette.open = spy
        session = IsolatedSession(make_settings({{"replay": {{"mode": "replay", "cassette": {str(cassette)!r}}}}}),
                                  fork=True)
        session.update_settings({{"limits": {{"time": 9}}}})
        print(session.run_fragment({{"return": 1}}).value)
        session.close()
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    env = {k: v for k, v in env.items() if not k.startswith("S2O_SECRET_")}  # a process with no credential forks
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.strip() == "1", done.stderr[-2000:]
    assert "WORKER-OPENED-THE-CASSETTE" not in done.stderr


# == 10. replaying a password answer in record mode rewrites the recorded entry =============================
def test_recording_again_after_a_replayed_password_keeps_the_file_as_it_was(tmp_path: Path) -> None:
    """LOW. ``Gateway._replayed`` puts the run's placeholder into the cassette entry's own result dict (in
    place). The next write in ``record`` saves it: the entry's ``"pin": "<secret pin>"`` becomes the raw
    ``"\\u2063s2o-secret:ask.0.pin\\u2063"`` (an internal marker, in a file; the recording changes with no change
    of behaviour, against SPEC 13's "recording again with no change leaves the file as it was")."""
    cassette = tmp_path / "ask.cassette.json"
    ask = {"ask": {"inputs": [{"name": "who"}, {"name": "pin", "type": "password"}]}}
    data = {"replay": {"mode": "record", "cassette": str(cassette)}}
    session = Session(Engine(make_settings(data)))
    session.outside.answer = lambda message, questions: {"who": "ada", "pin": "9911"}
    assert session.run_fragment(ask).code == "success"
    recorded = json.loads(cassette.read_text())["entries"][0]
    again = Session(Engine(make_settings(data)))
    assert again.run_fragment([ask, DB_CALL]).code == "success"
    text = cassette.read_text()
    assert "\u2063" not in text and json.loads(text)["entries"][0] == recorded, text[:600]


# == 11. %replay to-script and the kernel's rendering of a hostile cassette ==================================
def test_kernel_cells_end_by_code_on_a_hostile_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LOW-MEDIUM. Through the kernel's cell runner (in-process session): ``%replay to-script`` of a turn whose
    recorded ``arguments`` nest 900 deep ends ``unexpected: RecursionError`` (``_drop_nulls``, ``tomli_w``; the
    kernel logs a Python traceback); a replayed error whose ``details`` is a string ends ``unexpected:
    AttributeError: 'str' object has no attribute 'get'`` (``render._detail_lines``)."""
    from s2o_kernel import engine
    from s2o_kernel.kernel.runner import CellRunner

    monkeypatch.chdir(tmp_path)
    _cassette(tmp_path / "deep.cassette.json", '[{"kind": "llm", "profile": "scripted", "request": {}, "outcome": '
              '{"result": {"text": "t", "tool_calls": [{"name": "f", "arguments": {"a": ' + DEEP + "}}]}}}]")
    _cassette(tmp_path / "details.cassette.json", [_db_entry({"error": {"code": "db-failed", "message": "m",
                                                                        "details": "oops"}})])
    runner = CellRunner(Session(Engine(make_settings({}))), engine)

    def ended(cell: str) -> tuple[str, str]:
        try:
            out = runner.run(cell)
        except Exception as exc:  # the kernel's last line of defence shows it as ``unexpected``
            return "unexpected", f"{type(exc).__name__}: {exc}"[:120]
        return ("ok", "") if out.error is None else (out.error.ename, out.error.evalue[:120])

    assert runner.run("%replay replay deep.cassette.json").ok
    script = ended("%replay to-script scripted")
    assert runner.run("%replay replay details.cassette.json").ok
    failed = ended(json.dumps(DB_CALL))
    assert script[0] != "unexpected" and failed[0] != "unexpected", (script, failed)


# == regression tests: attacks that held ====================================================================
@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\n", b"[" * 100_000 + b"]" * 100_000,
                                     b"\xff\xfe\x00", b'{"format": 1, "entries": [], "entries": 5}'],
                         ids=["passwd-like", "deep-100k", "not-utf8", "duplicate-keys"])
def test_regression_a_file_that_is_not_a_cassette_is_refused_without_quoting_it(content: bytes,
                                                                                 tmp_path: Path) -> None:
    """Regression (held): not JSON, nested 100,000 deep, not UTF-8, or not of format 1: ``cassette``, naming the
    file and quoting none of it; the path of a directory is ``cassette`` too."""
    bad = tmp_path / "bad.cassette.json"
    bad.write_bytes(content)
    for path in (bad, tmp_path):
        code, message = _coded(_run({"replay": {"mode": "replay", "cassette": str(path)}}, False, DB_CALL))
        assert code == "cassette" and "root:" not in message and len(message) < 300, message


def test_regression_a_replay_miss_names_fields_never_values(tmp_path: Path) -> None:
    """Regression (held): a miss on a request that sends a secret names the differing path, masked, and neither
    the secret nor the closest entry's values."""
    cassette = _cassette(tmp_path / "miss.cassette.json", [{
        "kind": "api", "profile": "crm", "outcome": {"result": 1},
        "request": {"method": "POST", "path": "/x", "body": {"k": "recorded-value-42"}, "has_body": True}}])
    data = {"secrets": {"TOK": TOKEN}, "replay": {"mode": "replay", "cassette": str(cassette)},
            "profiles": {"api": {"crm": {"url": "http://127.0.0.1:9"}}}}
    run = _run(data, False, {"api": {"profile": "crm", "method": "POST", "path": "/x",
                                     "body": {"k": "{ f'{sys.secret[\"TOK\"]}' }"}}})
    code, message = _coded(run)
    assert code == "replay-miss" and "body.k" in message, message
    assert TOKEN not in repr((message, run.error.details)) and "recorded-value-42" not in message


def test_regression_ci_refuses_record_from_the_settings_and_a_mode_switch(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """Regression (held): under ``CI=true`` a session whose settings, or a later ``update_settings``, ask for
    ``record`` or ``rewrite`` makes no call (``replay-mode``)."""
    monkeypatch.setenv("CI", "true")
    with _capture() as server:
        data = {"replay": {"mode": "replay", "cassette": str(tmp_path / "ci.cassette.json")},
                "profiles": {"api": {"crm": {"url": server.url}}}}
        session = Session(Engine(make_settings(data)))
        for mode in ("record", "rewrite"):
            session.update_settings({"replay": {"mode": mode}})
            run = session.run_fragment({"api": {"profile": "crm", "path": "/x"}})
            assert run.error is not None and run.error.code == "replay-mode", run
        assert server.seen == []


def test_regression_a_symlink_cassette_is_replaced_never_written_through(tmp_path: Path) -> None:
    """Regression (held): recording to a cassette path that is a link replaces the link; its target is
    untouched."""
    target = _cassette(tmp_path / "target.json", [])
    before = target.read_text()
    link = tmp_path / "link.cassette.json"
    link.symlink_to(target)
    assert _run({"replay": {"mode": "record", "cassette": str(link)}}, False, DB_CALL).code == "success"
    assert target.read_text() == before and not link.is_symlink()


def test_regression_a_cassette_larger_than_its_bound_is_refused(tmp_path: Path) -> None:
    """Regression (held): ``/dev/zero`` as the cassette is refused by code (now before any read: not a
    regular file)."""
    start = time.monotonic()
    code, message = _coded(_run({"replay": {"mode": "replay", "cassette": "/dev/zero"}}, False, DB_CALL))
    assert code == "cassette" and ("larger than" in message or "not a regular file" in message)
    assert time.monotonic() - start < 30
