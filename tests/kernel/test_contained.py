"""The kernel's cell runner on the real engine, contained (the default) and in-process.

Jupyter-free: a :class:`CellRunner` over the session that ``startup`` makes,
so the magics that touch files, settings and variables (``%run``,
``%state``, ``%config``, ``%secret``) and the forwarding of printed text are
tested against both kinds of session without starting a kernel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import containment as C
import pytest

import s2o_kernel.engine as api
from s2o_kernel.kernel import startup
from s2o_kernel.kernel.contract import ContainedSessionLike
from s2o_kernel.kernel.runner import CellRunner, Outcome

pytestmark = pytest.mark.timeout(60)

MODES = ["isolated", "in-process"]


def _session(monkeypatch: pytest.MonkeyPatch, mode: str, settings: Any = None) -> Any:
    monkeypatch.setenv(startup.ISOLATE_ENV, "1" if mode == "isolated" else "0")
    return startup.make_session(settings or api.default_settings())


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def runner(mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[CellRunner]:
    monkeypatch.chdir(tmp_path)
    session = _session(monkeypatch, mode)
    assert isinstance(session, api.IsolatedSession) == (mode == "isolated")
    try:
        runner = CellRunner(session, api)
        runner.display = "json"  # %display json: results carry their JSON form, which value() reads
        yield runner
    finally:
        close = getattr(session, "close", None)
        if close is not None:
            close()


def ok(outcome: Outcome) -> Outcome:
    assert outcome.ok, outcome.error
    return outcome


def value(outcome: Outcome) -> Any:
    data = [c["data"] for t, c in ok(outcome).outputs if t == "execute_result"]
    assert len(data) == 1, outcome.outputs
    return data[0].get("application/json", data[0]["text/plain"])


def stream(outcome: Outcome, name: str) -> str:
    return "".join(c["text"] for t, c in outcome.outputs if t == "stream" and c["name"] == name)


# -- startup ----------------------------------------------------------------------


def test_contained_is_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(startup.ISOLATE_ENV, raising=False)
    monkeypatch.delenv("S2O_CONFIG", raising=False)
    started = startup.start_session()
    try:
        assert isinstance(started.session, api.IsolatedSession)
        assert started.pending_error is None and started.warnings == []
        assert started.session.evaluate("1 + 2") == 3
    finally:
        started.session.close()
    assert started.session.pid is None  # close() stopped the worker


@pytest.mark.parametrize("problem", [OSError("no processes"),
                                     api.S2OError("unexpected", "the evaluation worker could not be started")])
def test_worker_that_cannot_start_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             problem: BaseException) -> None:  # fmt: skip
    class Broken:
        def __init__(self, settings: Any) -> None:
            raise problem

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(startup.ISOLATE_ENV, raising=False)
    monkeypatch.delenv("S2O_CONFIG", raising=False)
    monkeypatch.setattr(api, "IsolatedSession", Broken)
    started = startup.start_session()
    assert isinstance(started.session, api.Session)
    assert started.pending_error is None
    assert any("containment worker could not be started" in w for w in started.warnings)


def test_settings_refused_by_the_worker_are_a_load_error(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:  # fmt: skip
    bad = tmp_path / "bad.toml"
    bad.write_text('allowlist = "nosuchmodule"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(startup.ISOLATE_ENV, raising=False)
    monkeypatch.setenv("S2O_CONFIG", str(bad))
    before = _workers()
    started = startup.start_session()
    try:
        assert isinstance(started.session, api.IsolatedSession)
        assert started.pending_error is not None and started.pending_error.code == "allowlist"
        # The worker that refused the settings is gone; only the default's runs.
        assert len(_workers() - before) == 1
    finally:
        started.session.close()


def _workers() -> set[int]:
    """Running (not zombie) worker processes that are children of this process (Linux /proc)."""
    found = set()
    for pid in C.descendants():
        try:
            with open(f"/proc/{pid}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z" and C.is_worker(pid):
            found.add(pid)
    return found


def test_telling_a_contained_session_does_not_wake_its_worker(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:  # fmt: skip
    # The kernel asks isinstance(session, ContainedSessionLike) when it starts and when it shuts
    # down; that must not call the worker (a call after close() would start a new one).
    monkeypatch.chdir(tmp_path)
    session = _session(monkeypatch, "isolated")
    session.close()
    before = _workers()
    assert isinstance(session, ContainedSessionLike)
    CellRunner(session, api)
    assert _workers() == before


# -- printed text -------------------------------------------------------------------


def test_printed_text_reaches_the_cell_in_order(runner: CellRunner) -> None:
    ok(runner.run("%%allowlist\nprint\nlen"))
    sent: list[tuple[str, str]] = []

    def publish(msg_type: str, content: dict[str, Any]) -> None:
        sent.append((msg_type, content.get("text") or content["data"]["text/plain"]))

    runner.publisher = publish
    out = ok(runner.run("print('hello', 'world')"))
    if isinstance(runner.session, api.IsolatedSession):  # in-process, print writes to sys.stdout
        assert sent == [("stream", "hello world\n")]
        assert out.published == 1
        sent.clear()
        ok(runner.run('[{"var": {"a": "{ print(\'one\') }"}}, {"output": "part"},'
                      ' {"var": {"b": "{ print(\'two\', end=\'\') }"}}]'))  # fmt: skip
        # Printed text travels in order with the output parts, a line at a time;
        # text without an end of line goes out when the request ends.
        assert sent == [("stream", "one\n"), ("display_data", "part"), ("stream", "two")]
        # Silent cells show nothing, and the text does not leak into the next cell.
        sent.clear()
        ok(runner.run("print('quiet')", silent=True))
        assert sent == []
        ok(runner.run("len('x')"))
        assert sent == []


# -- %run ---------------------------------------------------------------------------

AGENT = {
    "functions": {
        "main": {
            "args": {"name": "str"},
            "commands": [
                {"output": "{ 'Hello ' + name }"},
                {"log": "{ 'greeted ' + name }"},
                {"var": {"agent.greeted": "{ name }"}},
                {"return": "{ len(name) }"},
            ],
        },
        "shout": {"commands": [{"return": "{ sys.inputs['word'].upper() }"}]},
        "broken": {"commands": [{"var": {"x": "{ 1 / 0 }"}}]},
        "opaque": {"commands": [{"var": {"agent.bad": "{ set() }"}}]},
        "spin": {"commands": [{"while": {"condition": "{ True }", "commands": [{"var": {"i": 1}}]}}]},
        "refuse": {"commands": [{"fail": "out of stock"}]},
    }
}


def test_run_magic_on_the_engine(runner: CellRunner, tmp_path: Path) -> None:
    (tmp_path / "agent.json").write_text(json.dumps(AGENT))
    out = runner.run('%run agent.json --inputs {"name": "Ann"}')
    assert value(out) == 3
    assert [t for t, _ in out.outputs] == ["display_data", "stream", "execute_result"]
    assert out.outputs[0][1]["data"] == {"text/plain": "Hello Ann"}
    assert stream(out, "stderr") == "greeted Ann\n"
    assert runner.session.agent_vars["greeted"] == "Ann"
    assert value(runner.run('%run agent.json --function shout --inputs {"word": "hey"}')) == "HEY"
    for function, ename in [("broken", "runtime"), ("opaque", "not-json"), ("spin", "loop-limit"),
                            ("refuse", "failCommand"), ("nosuch", "unknown-function")]:  # fmt: skip
        out = runner.run(f'%run agent.json --function {function} --inputs {{"name": "x"}}')
        assert out.error is not None and out.error.ename == ename, (function, out.error)
    missing = runner.run("%run agent.json")  # main's argument is missing
    assert missing.error.ename == "argument"
    # %%run FILE: the body is the inputs, a JSON object over lines (a new user's trial, 2026-12-04: the body
    # was read as more arguments)
    assert value(runner.run('%%run agent.json\n{\n  "name": "Bo"\n}')) == 2  # len(name)
    assert runner.session.agent_vars["greeted"] == "Bo"
    assert value(runner.run('%%run agent.json --function shout\n{"word": "hi"}')) == "HI"
    assert value(runner.run('%%run agent.json\n--inputs {"name": "Cyd"}')) == 3  # options in the body, as before
    for body, ename in (('{"name": "x"', "syntax"), ("[1]", "magic")):
        out = runner.run(f"%%run agent.json\n{body}")
        assert out.error is not None and out.error.ename == ename, (body, out.error)
    twice = runner.run('%%run agent.json --inputs {"name": "a"}\n{"name": "b"}')  # --inputs takes one object
    assert twice.error is not None and twice.error.ename in ("magic", "syntax")
    assert value(runner.run('%%run agent.json --inputs\n{"name": "Dee"}')) == 3  # --inputs's JSON below it


def test_run_magic_time_limit(runner: CellRunner, tmp_path: Path) -> None:
    ok(runner.run('%limits {"time": 1}'))
    (tmp_path / "slow.json").write_text(json.dumps([{"output": "started"}, {"var": {"t": "{ sum(endless()) }"}}]))
    out = runner.run("%run slow.json")
    assert out.error.ename == "timedOut"
    assert [t for t, _ in out.outputs] == ["display_data"]


# -- %state -------------------------------------------------------------------------

TRICKY = {
    "agent": {
        "braces": "{not an expression}",
        "dict_display": '{"a": 1}',
        "accents": "{caf\u00e9 \u2020 \U0001f600}",
        "mark": "\u2020agent.x",
        "quotes": "{'\"\\\\n}",
        "nested": [{"k": "{x}", "n": None, "f": 1.5, "b": True}, "{}", "{ }"],
        "plain": "Hello {name}",
        "number": 7,
    },
    "conv": {"turns": [], "last": {"text": "{ 6 * 7 }"}},
}


def test_state_round_trip_keeps_every_value_literal(runner: CellRunner, tmp_path: Path) -> None:
    (tmp_path / "tricky.json").write_text(json.dumps(TRICKY))
    out = ok(runner.run("%state load tricky.json"))
    assert stream(out, "stdout") == "Loaded 8 agent and 2 conversation variables from tricky.json.\n"
    session = runner.session
    assert session.agent_vars == TRICKY["agent"] and session.conv_vars == TRICKY["conv"]
    ok(runner.run("%state save again.json"))
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8")) == TRICKY
    ok(runner.run("%reset"))
    ok(runner.run("%state load again.json"))
    assert session.agent_vars == TRICKY["agent"] and session.conv_vars == TRICKY["conv"]


def test_state_load_is_all_or_nothing(runner: CellRunner, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"agent": {"good": 1, "_hidden": 2}}))
    out = runner.run("%state load bad.json")
    assert out.error is not None
    assert "Nothing was loaded from bad.json." in out.error.traceback
    assert runner.session.agent_vars == {}


def test_state_bigger_than_the_definition_limit(runner: CellRunner, tmp_path: Path) -> None:
    ok(runner.run('%limits {"definition_length": 100}'))
    big = {"agent": {"text": "x" * 500, "braced": "{" + "y" * 300 + "}"}, "conv": {}}
    (tmp_path / "big.json").write_text(json.dumps(big))
    ok(runner.run("%state load big.json"))
    assert runner.session.agent_vars == big["agent"]
    assert value(runner.run("%limits"))["definition_length"] == 100


# -- %secret and %config ---------------------------------------------------------------


def test_secret_and_config_on_the_engine(runner: CellRunner, tmp_path: Path) -> None:
    runner.getpass = lambda prompt: "tok-123"
    ok(runner.run("%secret TOKEN"))
    out = runner.run("f'Bearer {sys.secret[\"TOKEN\"]}'")
    assert value(out) == "'Bearer ***'"  # opaque secret text: masked repr, no JSON form
    assert "tok-123" not in json.dumps(out.outputs)
    assert value(runner.run("%validate sys.secret['TOKEN']")) == {
        "ok": True, "allowlist_names": [], "local_names": [], "secrets": ["TOKEN"]}  # fmt: skip
    (tmp_path / "more.toml").write_text('[limits]\nloop_iterations = 123\n[secrets]\nOTHER = "o-456"\n')
    ok(runner.run("%config more.toml"))
    assert value(runner.run("%limits"))["loop_iterations"] == 123
    # Secrets from the file add to those already set.
    assert value(runner.run("f'{sys.secret[\"TOKEN\"]}/{sys.secret[\"OTHER\"]}'")) == "'***/***'"
    assert sorted(runner.session.settings.secrets) == ["OTHER", "TOKEN"]
    # All or nothing.
    (tmp_path / "refused.toml").write_text("[limits]\ntime = 5\nnope = 1\n")
    assert runner.run("%config refused.toml").error.ename == "settings"
    assert value(runner.run("%limits"))["time"] == 30


# -- containment ----------------------------------------------------------------------


@pytest.fixture
def contained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[CellRunner]:
    monkeypatch.chdir(tmp_path)
    session = _session(monkeypatch, "isolated")
    try:
        runner = CellRunner(session, api)
        runner.display = "json"  # %display json: results carry their JSON form, which value() reads
        yield runner
    finally:
        session.close()


def test_lots_of_printed_text_does_not_block(contained: CellRunner) -> None:
    # More than a pipe holds (64 KiB): the worker must not block on a full pipe.
    ok(contained.run("%%allowlist\nprint\nrange"))
    out = ok(contained.run("[print('x' * 1000) for i in range(300)]"))
    assert stream(out, "stdout") == ("x" * 1000 + "\n") * 300

