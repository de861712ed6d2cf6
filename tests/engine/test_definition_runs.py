"""Running a definition from a notebook (issue 31 item 2): its value lands in ``result`` as a ``call``'s
does, and a notebook variable named inside it gets an error that says how to pass it (SPEC 7)."""

from __future__ import annotations

from typing import Any

import pytest

from s2o_kernel.engine import Engine, IsolatedSession, Session, bare_settings


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
