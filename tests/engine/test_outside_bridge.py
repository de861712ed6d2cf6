"""Outside calls across the containment worker's boundary (SPEC 7.1, 12).

The worker holds no secret and no credential and may not open a socket; its run's calls travel to the
parent as ``outside`` events, where an :class:`~s2o_kernel.engine.outside.gateway.Gateway` makes them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from s2o_kernel.engine import IsolatedSession, default_settings, make_settings
from s2o_kernel.engine.errors import S2OError
from s2o_kernel.engine.outside.call import OutsideCall
from s2o_kernel.engine.outside.secrets import placeholder, unplace, worker_settings
from s2o_kernel.engine.settings import merge
from s2o_kernel.engine.worker import wire

TOKEN = "tok-bridge-4c2f-secret"
DB_PASSWORD = "pw-literal-in-url-88"


ENV_SECRET = "env-only-secret-6e0a"


@pytest.fixture
def isolated(http_server: Any, tmp_path: Any, data_dir: Any,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[IsolatedSession]:
    monkeypatch.setenv("S2O_SECRET_ENVONLY", ENV_SECRET)  # the kernel's environment holds a secret
    data = merge(default_settings().to_dict(), {
        "allow_unsafe_entries": True,
        "allowlist": default_settings().allowlist + "\nsocket.create_connection\n",
        "secrets": {"TOKEN": TOKEN},
        "profiles": {
            "api": {"srv": {"url": http_server.url, "headers": {"Authorization": "{ f'Bearer {sys.secret[\"TOKEN\"]}' }"},
                            "allow_headers": True}},
            "db": {"lit": {"url": f"postgresql://u:{DB_PASSWORD}@127.0.0.1:1/db"},
                   "local": {"url": f"sqlite:///{tmp_path / 'b.sqlite'}"}},
        },
    })
    session = IsolatedSession(make_settings(data))
    try:
        yield session
    finally:
        session.close()


def _scan(pid: int, needles: list[bytes]) -> set[bytes]:
    """Which of ``needles`` are anywhere in the readable memory of process ``pid``."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+)", line)
            if m is None or "r" not in m[3]:
                continue
            try:
                mem.seek(int(m[1], 16))
                data = mem.read(int(m[2], 16) - int(m[1], 16))
            except (OSError, ValueError, OverflowError):
                continue
            found.update(n for n in needles if n in data)
    return found


def test_an_api_call_through_the_confined_worker(isolated: IsolatedSession, http_server: Any) -> None:
    sent = len(http_server.requests)
    run = isolated.run_fragment([{"api": {"profile": "srv", "path": "/whoami", "headers": {
        "X-Echo": "{ f'k={sys.secret[\"TOKEN\"]}' }"}}}, {"return": "{ result }"}])
    assert (run.code, run.value) == ("success", {"auth": "***"}), run.error
    headers = http_server.requests[sent][2]
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["X-Echo"] == f"k={TOKEN}"  # the worker's placeholder, resolved by the parent
    # the worker itself cannot reach the same server
    host, port = http_server.url.removeprefix("http://").split(":")
    with pytest.raises(S2OError) as refused:
        isolated.evaluate(f"socket.create_connection(('{host}', {port}), 2)")
    assert refused.value.code == "runtime" and "PermissionError" in refused.value.message
    assert len(http_server.requests) == sent + 1


def test_the_worker_holds_no_secret_and_no_credential(isolated: IsolatedSession) -> None:
    marker = "visible-marker-31415-in-worker"
    isolated.set_vars(locals={"m": marker})
    assert isolated.evaluate("f'{sys.secret[\"TOKEN\"]}'") is not None  # the worker used its copy
    pid = isolated.pid
    assert pid is not None
    found = _scan(pid, [marker.encode(), TOKEN.encode(), DB_PASSWORD.encode(), ENV_SECRET.encode()])
    assert found == {marker.encode()}  # the scan sees the worker's memory; no credential is in it
    with open(f"/proc/{pid}/environ", "rb") as environ:
        assert b"S2O_SECRET_" not in environ.read()
    shown = json.dumps(worker_settings(isolated.settings.to_dict()), ensure_ascii=False)
    assert TOKEN not in shown and DB_PASSWORD not in shown and placeholder("TOKEN") in shown


def test_db_calls_and_their_errors_come_back_through_the_worker(isolated: IsolatedSession) -> None:
    run = isolated.run_fragment([{"db": {"profile": "local", "sql": "SELECT 40 + :n AS v", "params": {"n": 2}}},
                                 {"return": "{ result }"}])
    assert (run.code, run.value) == ("success", [{"v": 42}]), run.error
    run = isolated.run_fragment({"db": {"profile": "lit", "sql": "SELECT 1"}})
    assert (run.code, run.error.code, run.error.path) == ("callFailed", "db-failed", "db")
    assert DB_PASSWORD not in run.error.message
    handled = isolated.run_fragment({"db": {"profile": "local", "sql": "SELECT * FROM nowhere"},
                                     "onError": {"return": "{ exc.code }"}})
    assert (handled.code, handled.value) == ("success", "db-failed")
    assert isolated.evaluate("1 + 1") == 2  # in step after every call


def test_settings_changes_and_reset_reach_the_gateway(isolated: IsolatedSession) -> None:
    first = isolated.outside
    isolated.update_settings({"secrets": {"OTHER": "other-secret-value"}})
    assert isolated.outside is not first  # new secrets: a new gateway
    run = isolated.run_fragment([{"api": {"profile": "echo", "body": "{ f'{sys.secret[\"OTHER\"]}' }"}},
                                 {"return": "{ result['body'] }"}])
    assert (run.code, run.value) == ("success", "***")
    isolated.reset()
    assert isolated.run_fragment({"api": {"profile": "echo"}}).code == "success"


def test_wire_outside_event_and_reply_shapes() -> None:
    call = OutsideCall("api", "echo", {"path": "/x"}, "api", 2.0)
    line = wire.encode_outside(7, call)
    event = wire.decode_message(line, 7)
    assert isinstance(event, wire.Event) and event.kind == "outside" and event.payload == call
    bad = json.dumps({"id": 7, "event": "outside", "call": {"kind": "rm -rf", "fields": {}}}).encode()
    with pytest.raises(S2OError) as fault:
        wire.decode_message(bad, 7)
    assert fault.value.code == "worker-protocol"
    ok = wire.encode_outside_reply(7, {"a": [1]})
    assert ok.startswith(wire.OUTSIDE_REPLY_PREFIX)
    assert wire.decode_outside_reply(ok, 7).result == {"a": [1]}
    err = wire.decode_outside_reply(wire.encode_outside_reply(7, error=S2OError("db-failed", "no")), 7).error
    assert err is not None and (err.code, err.message) == ("db-failed", "no")
    with pytest.raises(S2OError):
        wire.decode_outside_reply(ok, 8)


def test_placeholders_resolve_only_known_secrets() -> None:
    text = f"a {placeholder('K')} b {placeholder('NOPE')}"
    assert unplace({"h": [text]}, {"K": "v"}) == {"h": [f"a v b {placeholder('NOPE')}"]}
    assert os.environ.get("S2O_SECRET_K") is None


def test_a_call_that_outlives_its_run_leaves_the_worker_in_step(isolated: IsolatedSession, http_server: Any) -> None:
    isolated.update_settings({"limits": {"time": 1}})
    isolated.set_vars(agent={"kept": 3})
    run = isolated.run_fragment({"api": {"profile": "srv", "path": "/slow", "timeout": 10}})
    assert (run.code, run.error.code) == ("timedOut", "timedOut"), run.error
    assert isolated.restarts == 0  # answered in time, no kill
    for _ in range(3):
        again = isolated.run_fragment([{"api": {"profile": "srv", "path": "/whoami"}}, {"return": "{ result }"}])
        assert (again.code, again.value) == ("success", {"auth": "***"}), again.error
    assert isolated.agent_vars == {"kept": 3}
