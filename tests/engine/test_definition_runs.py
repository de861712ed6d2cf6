"""Running a definition from a notebook (issue 31 item 2): its value lands in ``result`` as a ``call``'s
does, and a notebook variable named inside it gets an error that says how to pass it (SPEC 7)."""

from __future__ import annotations

from typing import Any

import pytest

from s2o_kernel.bounds import MAX_USER_FRAMES
from s2o_kernel.engine import Engine, IsolatedSession, S2OError, Session, bare_settings


@pytest.fixture(params=["in-process", "isolated"])
def session(request: pytest.FixtureRequest) -> Any:
    made = Session(Engine(bare_settings({}))) if request.param == "in-process" else IsolatedSession(bare_settings({}))
    yield made
    if request.param == "isolated":
        made.close()


@pytest.mark.parametrize(("fragment", "inputs", "expected"), [
    ({"functions": {"main": {"args": {"n": "int"}, "commands": [{"return": "{ n * 2 }"}]}}}, {"n": 4}, 8),
    ({"functions": {"main": {"commands": [{"return": "{ sys.inputs['n'] + 1 }"}]}}}, {"n": 4}, 5),
    ({"args": {"n": "int"}, "commands": [{"return": "{ n - 1 }"}]}, {"n": 4}, 3),
    ({"functions": {"main": {"commands": [{"log": "no return"}]}}}, {}, None),
])
def test_a_definition_run_gives_result_its_value(session: Any, fragment: dict[str, Any], inputs: dict[str, Any],
                                                 expected: Any) -> None:
    run = session.run_fragment(fragment, inputs=inputs)
    assert (run.code, run.value) == ("success", expected), run
    assert session.evaluate("result") == expected


def test_a_failed_definition_run_leaves_result_as_it_was(session: Any) -> None:
    assert session.run_fragment({"functions": {"main": {"commands": [{"return": "before"}]}}}).code == "success"
    run = session.run_fragment({"functions": {"main": {"commands": [{"return": "{ 1 / 0 }"}]}}})
    assert run.code == "errorInAgent"
    assert session.evaluate("result") == "before"


def test_a_notebook_variable_named_in_a_definition_says_how_to_pass_it(session: Any) -> None:
    session.run_fragment({"var": {"n": 7}})
    run = session.run_fragment({"functions": {"main": {"commands": [{"return": "{ n + missing }"}]}}})
    assert run.code == "errorInAgent"
    errors = run.error.errors
    assert [e.code for e in errors] == ["unknown-name", "unknown-name"]
    assert "'n' is a notebook variable" in errors[0].message and "sys.inputs['n']" in errors[0].message
    assert "notebook variable" not in errors[1].message  # 'missing' is set nowhere: no such hint
    assert (errors[0].path, errors[0].line, errors[0].col) == ("functions.main.commands[0].return", 1, 0)


def test_an_error_in_a_tool_call_names_the_model_turn_and_the_calls(session: Any) -> None:
    """Issue 31 item 4: an error inside a function the model called says which command, model turn and tool
    call made it, outermost first, after the calls that led to the ``llm`` command."""
    session.update_settings({"profiles": {"llm": {"mine": {"adapter": "scripted", "script": [
        {"call": "getOrder", "args": {"order_id": 0}}, {"text": "never"}]}}}})
    run = session.run_fragment({"functions": {
        "main": {"commands": [{"call": {"function": "ask_model"}}]},
        "ask_model": {"commands": [{"llm": {"profile": "mine", "input": "where is order 0?",
                                            "functions": ["getOrder"]}}]},
        "getOrder": {"args": {"order_id": "int"}, "commands": [{"return": "{ 10 // order_id }"}]}}})
    assert (run.code, run.error.code, run.error.path) == ("errorInAgent", "runtime",
                                                         "functions.getOrder.commands[0].return")
    calls = run.error.details["calls"]
    assert calls[0] == "functions.main.commands[0].call (ask_model)"
    assert calls[1].startswith("functions.ask_model.commands[0].llm (model turn 1, tool call ")
    assert calls[1].endswith(": getOrder)") and len(calls) == 2


@pytest.mark.parametrize("where", ["in-process", "isolated"])
def test_the_users_frames_are_the_innermost_ones_and_none_of_ours(where: str) -> None:
    settings = bare_settings({"allowlist": "s2o_user_code.deep as deep"})
    session = Session(Engine(settings)) if where == "in-process" else IsolatedSession(settings)
    try:
        with pytest.raises(S2OError) as caught:
            session.evaluate("deep(15)")
    finally:
        if where == "isolated":
            session.close()
    frames = caught.value.details["frames"]
    assert len(frames) == MAX_USER_FRAMES
    assert all(f["file"].endswith("s2o_user_code.py") and f["function"] == "deep" for f in frames)
    assert frames[-1]["text"] == "return 1 // n"  # the innermost, where it raised


def test_the_run_and_the_session_give_result_without_reading_locals(session: Any) -> None:
    """Issue 31 item 12: ``RunResult.result`` and ``Session.result`` (``result`` is a runtime name, not a local)."""
    assert session.result is None
    run = session.run_fragment({"functions": {"main": {"commands": [{"return": "{ [{'n': 7}] }"}]}}})
    assert (run.code, run.result) == ("success", [{"n": 7}])
    later = session.run_fragment([{"var": {"x": 1}}, {"return": "{ x }"}])  # produces no result: result stays
    assert (later.value, later.result) == (1, [{"n": 7}])
    assert session.result == [{"n": 7}]
    assert "result" not in session.locals


def test_an_isolated_session_is_a_context_manager() -> None:
    with IsolatedSession(bare_settings({})) as session:
        assert session.evaluate("1 + 1") == 2
        channel = session._channel
        assert channel is not None and channel.proc.poll() is None
    assert channel.proc.poll() is not None  # the worker stopped when the block ended


@pytest.mark.parametrize("where", ["in-process", "isolated"])
def test_the_standard_library_and_installed_packages_are_not_your_code(where: str) -> None:
    """``json.loads`` granted and raising shows no frame of ``json`` (not the user's code; SPEC 9: no host frames)."""
    settings = bare_settings({"allowlist": "json"})
    session = Session(Engine(settings)) if where == "in-process" else IsolatedSession(settings)
    try:
        with pytest.raises(S2OError) as caught:
            session.evaluate("json.loads('[' * 10 + '}')")
    finally:
        if where == "isolated":
            session.close()
    assert caught.value.code == "runtime" and caught.value.message.startswith("JSONDecodeError")
    assert "frames" not in (caught.value.details or {})
