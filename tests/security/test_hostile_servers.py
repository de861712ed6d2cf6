"""The kernel's process as a boundary (SPEC 7.1, 12; issue 30): the work and the memory a hostile server, or a
cell, can make the kernel's process take through an outside call.

Two real servers on 127.0.0.1 (``tests/support/hostile_servers.py``), an HTTP API and an OpenAI-compatible
chat-completions server, each serve a table of hostile answers: exotic charsets, floods past the caps,
compression bombs, amplifying JSON, deep JSON, slow drips. The calls are made as the kernel makes its worker's
(``Gateway.call_sync``, the run's time limit as the call's timeout), in a process of their own
(``tests/support/call_meter.py``) that measures each call's peak memory from a clean start. Every row asserts
its code and the containment bound: the call ends within the limit plus 2 s, and the process's peak resident
memory grows by at most 4× the bytes the call may read (its profile's ``max_response_bytes``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import pytest
from hostile_servers import (
    HostileServer,
    Responder,
    batched,
    chunked,
    delta,
    event,
    forever,
    gzip_bomb,
    once,
    sse,
    whole,
)

from s2o_kernel.bounds import DEFAULT_MAX_RESPONSE, MAX_JSON_DEPTH, MAX_TOOL_CALLS, TIME_GRACE
from s2o_kernel.engine import default_settings, make_settings
from s2o_kernel.engine.errors import S2OError
from s2o_kernel.engine.outside import gateway as gateway_module
from s2o_kernel.engine.outside.bounded import CHARSETS, Budget, decode_text
from s2o_kernel.engine.outside.call import OutsideCall
from s2o_kernel.engine.outside.gateway import Gateway
from s2o_kernel.engine.settings import merge

MiB = 1 << 20
#: The run's time limit each call is given (what is left of the run, as the kernel hands it on).
LIMIT = 2.0
#: What an api call may read: the default ``max_response_bytes`` (the issue's floods were against it).
API_CAP = DEFAULT_MAX_RESPONSE
#: What an llm reply may hold in these tests (a smaller cap keeps the floods short).
LLM_CAP = 2 * MiB
METER = Path(__file__).parent.parent / "support" / "call_meter.py"


@dataclass
class Row:
    """One hostile answer: ``name`` (the route, or the model), ``respond`` (the server's answer; ``None`` for a
    call that needs no server), the code the call must end with, and what else to check of its result."""

    name: str
    respond: Responder | None
    code: str
    check: Callable[[dict[str, Any]], None] | None = None
    call: dict[str, Any] = field(default_factory=dict)


def _deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def _reads_as(text: str) -> Callable[[dict[str, Any]], None]:
    def check(got: dict[str, Any]) -> None:
        assert got["value"] == text[:200]
    return check


def _at(path: str) -> Callable[[dict[str, Any]], None]:
    def check(got: dict[str, Any]) -> None:
        assert got["json_path"] == path
    return check


def _says(part: str) -> Callable[[dict[str, Any]], None]:
    def check(got: dict[str, Any]) -> None:
        assert part in got["message"]
    return check


PUNY = b"-" + b"a" * 800_000  # 800 KB of punycode's extended digits: half a minute of quadratic decoding
RECORDS = json.dumps([{"id": i, "name": f"user{i}", "active": True} for i in range(20_000)]).encode()

#: The HTTP API's answers. Each is a route ``/<name>`` of profile ``h`` (max_response_bytes: the default).
API_ROWS = [
    # charsets SPEC 7.1 does not list are read as UTF-8 (with replacement), at the speed of a C codec
    Row("charset-punycode", whole(200, "text/plain; charset=punycode", PUNY), "success", _reads_as(PUNY.decode())),
    Row("charset-utf-7", whole(200, "text/plain; charset=utf-7", b"+AGEAYgBj-" * 80_000), "success",
        _reads_as("+AGEAYgBj-" * 20)),
    Row("charset-idna", whole(200, "text/plain; charset=idna", b"xn--bcher-kva.example"), "success",
        _reads_as("xn--bcher-kva.example")),
    Row("charset-windows-1252", whole(200, "text/plain; charset=windows-1252", b"caf\xe9"), "success",
        _reads_as("caf\ufffd")),
    Row("charset-rot13", whole(200, "text/plain; charset=rot13", b"uryyb"), "success", _reads_as("uryyb")),
    # ... and those it lists are decoded as declared
    Row("charset-latin-1", whole(200, 'text/plain; charset="ISO-8859-1"', b"caf\xe9"), "success", _reads_as("café")),
    Row("charset-utf-16", whole(200, "text/plain; charset=UTF-16", "h\u00e9llo".encode("utf-16")), "success",
        _reads_as("héllo")),
    # floods past the cap, with and without a length, and compressed
    Row("flood-length", whole(200, "text/plain", b"x" * 10, headers={"Content-Length": str(300 * MiB)}),
        "api-too-large"),
    Row("flood-chunked", chunked("text/plain", forever(b"x" * 65536)), "api-too-large"),
    Row("bomb-gzip", whole(200, "application/json", gzip_bomb(64 * MiB), headers={"Content-Encoding": "gzip"}),
        "api-too-large"),
    Row("bomb-deflate", whole(200, "text/plain", zlib.compress(bytes(64 * MiB), 1),
                              headers={"Content-Encoding": "deflate"}), "api-too-large"),
    Row("encoding-br", whole(200, "text/plain", b"\x0b\x02\x80hello\x03", headers={"Content-Encoding": "br"}),
        "api-failed", _says("'br'")),
    # JSON that amplifies once parsed (a 10 MiB `[[],…]` under the cap took the kernel to 536 MB)
    Row("json-lists", whole(200, "application/json", b"[" + b"[]," * (API_CAP // 3 - 1) + b"[]]"), "api-too-large"),
    Row("json-objects", whole(200, "application/json", b"[" + b'{"a":0},' * (9 * MiB // 8) + b"{}]"),
        "api-too-large"),
    Row("json-strings", whole(200, "application/json", b"[" + b'"",' * (API_CAP // 3 - 1) + b'""]'),
        "api-too-large"),
    Row("json-wide-escape", whole(200, "application/json", b'["' + b"a" * (9 * MiB) + b'\\ud83d\\ude00"]'),
        "api-too-large"),
    Row("text-wide", whole(200, "text/plain; charset=utf-8", b"a" * (API_CAP - 4) + "\U0001f600".encode()),
        "api-too-large"),
    # deep JSON: too-deep at its JSON path, never RecursionError (950 levels made the masker raise it)
    Row("json-deep-950", whole(200, "application/json", _deep(950)), "too-deep", _at("$" + "[0]" * MAX_JSON_DEPTH)),
    Row("json-deep-100k", whole(200, "application/json", _deep(100_000)), "too-deep",
        _at("$" + "[0]" * MAX_JSON_DEPTH)),
    Row("json-deep-300", whole(200, "application/json", b'{"a": [1, ' + _deep(300) + b"]}"), "too-deep",
        _at("$.a[1]" + "[0]" * (MAX_JSON_DEPTH - 2))),
    Row("status-deep", whole(500, "application/json", _deep(950)), "too-deep"),
    # slow: a drip of a byte every 50 ms (each read is quick: only the call's own deadline ends it)
    Row("drip", chunked("text/plain", forever(b"x"), delay=0.05), "api-timeout"),
    # what fits still decodes, and the gateway still serves calls after all of the above
    Row("records", whole(200, "application/json", RECORDS), "success",
        lambda got: (got["value"][:13] == '[{"id": 0, "n') or pytest.fail(str(got["value"])[:80])),
    # a cell's request: JSON that amplifies in the copies made on its way (2,000,000 lists took 631 MB)
    Row("echo-amplifier", None, "api-too-large", _says("JSON items"), call={
        "profile": "echo", "fields_expr": "{'method': 'POST', 'has_body': True, 'body': [[]] * 2000000}"}),
    Row("echo-text", None, "success", lambda got: None, call={
        "profile": "echo", "fields_expr": "{'method': 'POST', 'has_body': True, 'body': '[' + '[],' * 3000000 + '[]]'}"}),
    Row("request-deep", None, "too-deep", _at("api.body.k" + "[0]" * (MAX_JSON_DEPTH - 2)), call={
        "profile": "echo", "fields_expr": "{'method': 'POST', 'has_body': True, 'body': {'k': "
        "__import__('json').loads('[' * 300 + ']' * 300)}}"}),
    Row("after", whole(200, "application/json", b'{"ok": true}'), "success", lambda got: None),
]


def _call_piece(index: int, name: str | None, arguments: str) -> dict[str, Any]:
    function = {"arguments": arguments} | ({"name": name} if name else {})
    return delta(calls=[{"index": index, **({"id": f"call_{index}"} if name else {}), "function": function}])


DONE = event(b"[DONE]")
USAGE = event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
#: An object in 8,000 pieces of tool-call arguments, 128 bytes each (1 MB).
PIECES = ['{"k": "'] + ["x" * 128] * 8_000 + ['"}']

#: The model server's answers, by the profile's ``model`` (max_response_bytes: :data:`LLM_CAP`).
LLM_ROWS = [
    Row("ok", sse(once(event(delta("hello ")), event(delta("world")), event(_call_piece(0, "get_order", '{"id":')),
                       event(_call_piece(0, None, ' "A-1"}')), USAGE, DONE)), "success",
        lambda got: (got["value"]["text"], got["value"]["tool_calls"]) == (
            "hello world", [{"id": "call_0", "name": "get_order", "arguments": {"id": "A-1"}}]) or pytest.fail(
            str(got["value"]))),
    # floods: text, tool-call arguments, one line that never ends, a compressed stream, a whole JSON body
    Row("flood-text", sse(forever(event(delta("x" * 8192)))), "llm-too-large", _says("text and tool calls")),
    Row("flood-arguments", sse(lambda: chain([event(_call_piece(0, "f", ""))],
                                             forever(event(_call_piece(0, None, "[" * 65536)))())),
        "llm-too-large", _says("text and tool calls")),
    Row("flood-line", sse(forever(b"data: " + b"x" * 65536)), "llm-too-large", _says("an event")),
    Row("bomb-gzip", whole(200, "text/event-stream", gzip_bomb(64 * MiB), headers={"Content-Encoding": "gzip"}),
        "llm-too-large"),
    Row("flood-json", chunked("application/json", forever(b"x" * 65536)), "llm-too-large"),
    Row("flood-status", chunked("application/json", forever(b"x" * 65536), status=500), "llm-too-large"),
    Row("many-calls", sse(lambda: batched(event(_call_piece(i, "f", "{}")) for i in range(100_000))),
        "llm-too-large", _says(f"more than {MAX_TOOL_CALLS} tool calls")),
    Row("text-wide", sse(lambda: chain(batched(event(delta("a" * 8192)) for _ in range(LLM_CAP // 8192 - 8)),
                                       [event(delta("\U0001f600")), DONE])), "llm-too-large"),
    # amplifying and deep JSON in an event, and in a whole reply
    Row("json-lists", sse(once(event(b'{"choices": [], "x": [' + b"[]," * (LLM_CAP // 3 - 10) + b"[]]}"), DONE)),
        "llm-too-large"),
    Row("json-deep", sse(once(event(b'{"choices": [{"delta": {"content": "a"}, "x": ' + _deep(950) + b"}]}"),
                              DONE)), "too-deep", _at("$.choices[0].x" + "[0]" * (MAX_JSON_DEPTH - 3))),
    Row("json-deep-reply", whole(200, "application/json", b'{"choices": [{"message": ' + _deep(300) + b"}]}"),
        "too-deep"),
    # tool-call arguments in many pieces, joined once
    Row("arguments-in-pieces", sse(lambda: chain(batched(event(_call_piece(0, "f" if i == 0 else None, p))
                                                         for i, p in enumerate(PIECES)), [USAGE, DONE])),
        "success", lambda got: None),
    # a stream's charset is UTF-8 whatever the header says
    Row("charset-punycode", sse(once(event(delta("h\u00e9llo")), USAGE, DONE),
                                ctype="text/event-stream; charset=punycode"), "success",
        lambda got: got["value"]["text"] == "héllo" or pytest.fail(str(got["value"]))),
    # slow: one-character deltas as fast as they come, and a comment byte every 50 ms
    Row("drip-deltas", sse(lambda: batched((event(delta("x")) for _ in iter(int, 1)), 4096)), "timedOut"),
    Row("drip", sse(forever(b":"), delay=0.05), "timedOut"),
    # a request: JSON nested too deeply in the conversation the worker sends
    Row("request-deep", None, "too-deep", _at("llm.messages[0].x" + "[0]" * (MAX_JSON_DEPTH - 3)), call={
        "profile": "ok", "fields_expr": "{'messages': [{'role': 'user', 'content': 'hi', 'x': "
        "__import__('json').loads('[' * 300 + ']' * 300)}], 'tools': [], 'stream': False}"}),
    Row("ok-after", sse(once(event(delta("still here")), USAGE, DONE)), "success",
        lambda got: got["value"]["text"] == "still here" or pytest.fail(str(got["value"]))),
]

MESSAGES = {"messages": [{"role": "user", "content": "hi"}], "tools": [], "stream": False}


def _spec(kind: str, rows: list[Row], settings: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for row in rows:
        default = {"profile": "h", "fields": {"path": row.name}} if kind == "api" else \
            {"profile": row.name, "fields": MESSAGES}
        calls.append({"kind": kind, "timeout": LIMIT, **default, **row.call})
    return {"settings": settings, "warm": [calls[-1]], "calls": calls}


def _meter(spec: dict[str, Any], folder: Path) -> subprocess.Popen[str]:
    """Start the meter on ``spec``; every large allocation of its process is its own mapping
    (``MALLOC_MMAP_THRESHOLD_``), so freed memory is returned at once and never hides a later call's growth."""
    path = folder / f"spec-{len(list(folder.iterdir()))}.json"
    path.write_text(json.dumps(spec))
    with path.open() as given:
        return subprocess.Popen([sys.executable, str(METER)], stdin=given, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"})


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``{(kind, row name): result}`` of every row of both tables, measured by two meters at once."""
    api = HostileServer({row.name: row.respond for row in API_ROWS if row.respond is not None})
    llm = HostileServer({row.name: row.respond for row in LLM_ROWS if row.respond is not None}, by_model=True)
    try:
        api_profiles = {"h": {"url": api.url, "timeout": 30}}
        llm_profiles = {row.name: {"adapter": "openai", "model": row.name, "url": llm.url, "key": "k",
                                   "max_response_bytes": LLM_CAP} for row in LLM_ROWS}
        folder = tmp_path_factory.mktemp("meters")
        meters = {"api": (_meter(_spec("api", API_ROWS, {"profiles": {"api": api_profiles}}), folder), API_ROWS),
                  "llm": (_meter(_spec("llm", LLM_ROWS, {"profiles": {"llm": llm_profiles}}), folder), LLM_ROWS)}
        results: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, (proc, rows) in meters.items():
            out, err = proc.communicate(timeout=600)
            lines = out.splitlines()
            gone = {"code": f"no result: the meter ended ({proc.returncode}): {err[-2000:]}"}
            results.update({(kind, row.name): json.loads(lines[i]) if i < len(lines) else gone
                            for i, row in enumerate(rows)})
        yield results
    finally:
        api.stop()
        llm.stop()


def _contained(got: dict[str, Any], row: Row, allowed: int) -> None:
    assert got["code"] == row.code, got
    assert got["seconds"] <= LIMIT + TIME_GRACE, got
    assert got["growth"] <= 4 * allowed, f"{got['growth'] / MiB:.1f} MiB for {allowed / MiB:g} MiB allowed"
    if row.check is not None:
        row.check(got)


@pytest.mark.parametrize("row", API_ROWS, ids=lambda row: row.name)
def test_an_api_server_cannot_hold_the_kernel_past_its_limit_or_its_memory_bound(measured: Any, row: Row) -> None:
    _contained(measured["api", row.name], row, API_CAP)


@pytest.mark.parametrize("row", LLM_ROWS, ids=lambda row: row.name)
def test_a_model_server_cannot_hold_the_kernel_past_its_limit_or_its_memory_bound(measured: Any, row: Row) -> None:
    _contained(measured["llm", row.name], row, LLM_CAP)


#: Declared charsets, each with a body and what it reads as: SPEC 7.1's by their names and aliases decode as
#: declared; any other (a text transform, a codec written in Python, a legacy code page) reads as UTF-8.
CHARSET_CASES = [
    ("utf-8", "h\u00e9llo".encode(), "héllo"),
    ("UTF8", "h\u00e9llo".encode(), "héllo"),
    ("us-ascii", b"caf\xe9", "caf\ufffd"),
    ("'latin1'", b"caf\xe9", "café"),
    ("utf-16le", "h\u00e9llo".encode("utf-16-le"), "héllo"),
    ("UTF-16BE", "h\u00e9llo".encode("utf-16-be"), "héllo"),
    ("utf-32", "h\u00e9llo".encode("utf-32"), "héllo"),
    ("punycode", b"bcher-kva", "bcher-kva"),
    ("utf-7", b"+AGEAYgBj-", "+AGEAYgBj-"),
    ("idna", b"xn--bcher-kva", "xn--bcher-kva"),
    ("rot13", b"uryyb", "uryyb"),
    ("hex", b"6869", "6869"),
    ("zlib", b"x\x9c", "x\ufffd"),
    ("uu", b"begin", "begin"),
    ("cp1252", b"caf\xe9", "caf\ufffd"),
    ("utf-8-sig", b"\xef\xbb\xbfa", "\ufeffa"),
    ("", b"caf\xc3\xa9", "café"),
]


@pytest.mark.parametrize(("charset", "raw", "text"), CHARSET_CASES, ids=[c[0] or "none" for c in CHARSET_CASES])
def test_only_the_charsets_spec_7_1_lists_are_decoded(charset: str, raw: bytes, text: str) -> None:
    budget = Budget(1000, "api-too-large", "max_response_bytes = 1000")
    assert decode_text(raw, f"text/plain; charset={charset}", budget, "the response") == text
    assert set(CHARSETS.values()) == {"utf-8", "ascii", "latin-1", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
                                      "utf-32-le", "utf-32-be"}


def _blocking(seconds: float) -> Any:
    async def hold_the_loop(gw: Gateway, profile: Any, request: OutsideCall, on_stream: Any) -> Any:
        time.sleep(seconds)  # a step no timeout on the loop can reach (C code, a quadratic decoder)
        return "late"
    return hold_the_loop


def test_a_call_that_holds_the_gateways_loop_keeps_no_caller_past_its_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``call_sync`` (the kernel's thread) and ``call`` (an in-process session) wait at most the call's timeout
    plus a grace, and the gateway then serves the next call on a new loop while the old one is still held."""
    gw = Gateway(make_settings(merge(default_settings().to_dict(), {})))
    try:
        monkeypatch.setitem(gateway_module.HANDLERS, "api", _blocking(6.0))
        for wait in (lambda call: gw.call_sync(call), lambda call: asyncio.run(gw.call(call))):
            start = time.monotonic()
            with pytest.raises(S2OError) as caught:
                wait(OutsideCall("api", "echo", {}, "commands[0].api", 1.0))
            assert (caught.value.code, caught.value.path) == ("api-timeout", "commands[0].api")
            assert time.monotonic() - start <= 1.0 + TIME_GRACE
        monkeypatch.undo()
        start = time.monotonic()
        assert gw.call_sync(OutsideCall("api", "echo", {"path": "/again"}, "api", 5.0))["path"] == "/again"
        assert time.monotonic() - start < 2.0
    finally:
        gw.close()
