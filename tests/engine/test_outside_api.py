"""The ``api`` command (SPEC 7.1) against a real HTTP server on 127.0.0.1 (``tests/support/http_fixture.py``),
and the embedded ``echo`` profile, served in-process with no socket."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from s2o_kernel.engine import Engine, Session, default_settings, make_settings
from s2o_kernel.engine.settings import merge

TOKEN = "tok-9d1e-very-secret"


def _session(server_url: str, **extra: Any) -> Session:
    data = merge(default_settings().to_dict(), {
        "secrets": {"TOKEN": TOKEN},
        "profiles": {"api": {
            "srv": {"url": server_url, "timeout": 5,
                    "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOKEN\"]}' }"}},
            "fixed": {"url": server_url + "/json", "allow_path": False, "query": {"k": "v"}},
            "open": {"url": server_url, "allow_headers": True, "max_response_bytes": 1000},
        }},
        **extra,
    })
    return Session(Engine(make_settings(data)))


def _run(session: Session, fields: dict[str, Any], on_error: Any = None) -> Any:
    command: dict[str, Any] = {"api": fields}
    if on_error is not None:
        command["onError"] = on_error
    return session.run_fragment([command, {"return": "{ result }"}])


def test_json_and_text_results(http_server: Any) -> None:
    s = _session(http_server.url)
    run = _run(s, {"profile": "srv", "method": "post", "path": "/json", "query": {"q": "{ 'a' + 'b' }", "n": 2},
                   "body": {"items": [1, "{ 1 + 1 }"]}})
    assert run.code == "success", run.error
    assert run.value["method"] == "POST" and run.value["path"] == "/json"
    assert run.value["query"] == {"q": "ab", "n": "2"}
    assert json.loads(run.value["body"]) == {"items": [1, 2]} and run.value["ctype"] == "application/json"
    text_body = _run(s, {"profile": "srv", "method": "PUT", "path": "/json", "body": "plain words"}).value
    assert (text_body["body"], text_body["ctype"]) == ("plain words", "text/plain; charset=utf-8")
    assert _run(s, {"profile": "srv", "path": "/text"}).value == "hello, world"


def test_profile_query_and_path_rules(http_server: Any) -> None:
    s = _session(http_server.url)
    run = _run(s, {"profile": "fixed", "query": {"k": "mine", "extra": "1"}})
    # the profile wins; its query value is a credential, masked where the server reflects it (SPEC 7.1)
    assert run.value["path"] == "/json" and run.value["query"] == {"k": "***", "extra": "1"}
    refused = s.run_fragment({"api": {"profile": "fixed", "path": "/text"}})
    assert (refused.error.code, refused.error.path, refused.error.stage) == ("fragment", "api.path", "validate")
    refused = s.run_fragment({"api": {"profile": "srv", "path": "/json", "headers": {"X-A": "1"}}})
    assert (refused.error.code, refused.error.path) == ("fragment", "api.headers")
    sent = len(http_server.requests)
    assert _run(s, {"profile": "open", "path": "/json", "headers": {"X-Trace": "{ 'abc' }"}}).code == "success"
    assert http_server.requests[sent][2].get("X-Trace") == "abc"


def test_statuses_raise_api_status_with_status_and_body(http_server: Any) -> None:
    s = _session(http_server.url)
    s.set_vars(agent={"kept": 1})
    run = _run(s, {"profile": "srv", "path": "/status/404"})
    assert (run.code, run.error.code, run.error.path) == ("callFailed", "api-status", "[0].api")
    assert "404" in run.error.message and run.error.details["status"] == 404
    assert s.agent_vars == {"kept": 1}
    handled = s.run_fragment([{"api": {"profile": "srv", "path": "/status/503"},
                               "onError": {"return": "{ [exc.code, exc.status, exc.body] }"}}])
    assert handled.code == "success"
    # the evaluated header read a secret: it is masked whole
    assert handled.value == ["api-status", 503, {"error": "status 503", "auth": "***"}]


def test_timeouts_failures_and_too_large(http_server: Any) -> None:
    s = _session(http_server.url)
    run = _run(s, {"profile": "srv", "path": "/slow", "timeout": 1})
    assert (run.code, run.error.code) == ("callFailed", "api-timeout")
    for path in ("/big/5000", "/chunked/5000"):
        run = _run(s, {"profile": "open", "path": path})
        assert (run.code, run.error.code) == ("callFailed", "api-too-large"), path
        assert "max_response_bytes = 1000" in run.error.message
    assert _run(s, {"profile": "open", "path": "/big/1000"}).value == "x" * 1000
    with socket.socket() as sock:  # a port nothing listens on: held, never listening, so no other process
        sock.bind(("127.0.0.1", 0))  # (another xdist worker's server or kernel) can take it meanwhile
        port = sock.getsockname()[1]
        s.update_settings({"profiles": {"api": {"down": {"url": f"http://127.0.0.1:{port}"}}}})
        run = _run(s, {"profile": "down"})
    assert (run.code, run.error.code) == ("callFailed", "api-failed")
    s.update_settings({"limits": {"time": 1}})
    run = _run(s, {"profile": "srv", "path": "/slow", "timeout": 10})  # the run's time limit covers the call
    assert (run.code, run.error.code) == ("timedOut", "timedOut"), run.error


def test_a_secret_header_reaches_the_server_and_never_shows(http_server: Any) -> None:
    s = _session(http_server.url)
    sent = len(http_server.requests)
    run = _run(s, {"profile": "srv", "path": "/whoami"})
    assert http_server.requests[sent][2]["Authorization"] == f"Bearer {TOKEN}"
    assert run.value == {"auth": "***"}
    failed = _run(s, {"profile": "srv", "path": "/status/401"})
    shown = json.dumps([failed.error.message, failed.error.details, failed.logs, repr(failed.error)])
    assert TOKEN not in shown and '"auth": "***"' in shown
    logged = s.run_fragment([{"api": {"profile": "srv", "path": "/whoami"}}, {"log": "{ result['auth'] }"},
                             {"output": {"text": "{ str(result) }"}}])
    assert logged.logs == ["***"] and TOKEN not in json.dumps(logged.outputs)
    assert TOKEN not in json.dumps(s.settings_dict())


def test_validation_unknown_profile_timeout_type_and_missing_secret(http_server: Any) -> None:
    s = _session(http_server.url)
    for fields, code, path, message in [
        ({"profile": "nope"}, "unknown-profile", "api.profile", "no api profile named 'nope'"),
        ({"profile": "srv", "timeout": "5"}, "fragment", "api.timeout", "timeout is expected to be int, got str"),
        ({"profile": "srv", "method": "FETCH"}, "fragment", "api.method", "method is one of"),
    ]:
        run = s.run_fragment({"api": fields})
        assert (run.error.code, run.error.path, run.error.stage) == (code, path, "validate"), run.error
        assert message in run.error.message
    s.update_settings({"profiles": {"api": {"keyed": {"url": "{ f'{sys.secret[\"NOT_SET\"]}' }"}}}})
    run = s.run_fragment({"api": {"profile": "keyed"}})
    assert (run.error.code, run.error.path) == ("missing-secret", "api.profile")


def test_the_echo_profile_answers_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_socket(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the echo profile opened a socket")

    s = Session(Engine(default_settings()))
    monkeypatch.setattr(socket.socket, "connect", no_socket)
    run = _run(s, {"profile": "echo", "method": "POST", "path": "/orders/7", "query": {"q": "x"},
                   "body": {"qty": "{ 3 }"}})
    assert run.value == {"method": "POST", "path": "/orders/7", "query": {"q": "x"}, "body": {"qty": 3}}


def test_fields_of_the_wrong_type_are_refused_before_any_request(http_server: Any) -> None:
    s = _session(http_server.url)
    sent = len(http_server.requests)
    for fields, message in (({"profile": "open", "query": "{ [1, 2] }"}, "query is expected to be dict, got list"),
                            ({"profile": "open", "headers": "{ 'X' }"}, "headers is expected to be dict, got str"),
                            ({"profile": "open", "path": "{ 3 }"}, "path is expected to be str, got int")):
        run = s.run_fragment({"api": fields})
        assert (run.code, run.error.code, run.error.message) == ("errorInAgent", "fragment", message)
    assert len(http_server.requests) == sent


def test_the_urls_own_query_stays_when_a_command_adds_parameters(http_server: Any) -> None:
    """A profile url with a query of its own (``.../json?version=2``) keeps it when a command adds ``query``;
    the profile wins over a command's parameter of the same name. (httpx drops a base url's query as soon as
    a request has parameters.)"""
    s = _session(http_server.url, profiles={"api": {"v": {"url": http_server.url + "/json?version=two"}}})
    plain = _run(s, {"profile": "v"})
    added = _run(s, {"profile": "v", "query": {"page": "three", "version": "nine"}})
    assert plain.value["path"] == added.value["path"] == "/json", (plain.error, added.error)
    assert plain.value["query"] == {"version": "***"}  # a url's query values are credentials (SPEC 7.1)
    assert added.value["query"] == {"version": "***", "page": "three"}
