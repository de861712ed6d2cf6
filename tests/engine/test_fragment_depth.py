"""Deep fragments are ``too-deep``, never a ``RecursionError`` out of ``run_fragment`` (SPEC 7, 12; issue 8).

The findings: a 975-deep list in a ``var`` value, 300 nested ``if`` commands and a chain of 250
``call`` commands each raised ``RecursionError`` out of ``Session.run_fragment`` (the kernel showed
``unexpected``). Validation now refuses them with the JSON path, and the interpreter counts the same
levels while it runs.
"""

from __future__ import annotations

import time

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings
from s2o_kernel.engine.commands.call import CallFields
from s2o_kernel.engine.fragments.depth import MAX_NESTING
from s2o_kernel.engine.fragments.interpreter import run_program
from s2o_kernel.engine.fragments.parser import parse_fragment
from s2o_kernel.engine.fragments.tree import Command
from s2o_kernel.engine.run.scopes import MAX_JSON_DEPTH


def session(allowlist: str = "", **limits) -> Session:
    return Session(Engine(bare_settings({"allowlist": allowlist, "limits": {"definition_length": 10 ** 6, **limits}})))


def nested_list(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


def nested_ifs(depth: int, leaf: dict) -> dict:
    cmd = leaf
    for _ in range(depth):
        cmd = {"if": {"condition": "{ True }", "then": cmd}}
    return cmd


def call_chain(length: int) -> dict:
    functions = {f"f{i}": {"commands": [{"call": {"function": f"f{i + 1}"}}, {"return": "{ result }"}]}
                 for i in range(length)}
    functions[f"f{length}"] = {"commands": {"return": "end"}}
    functions["main"] = {"commands": [{"call": {"function": "f0"}}, {"return": "{ result }"}]}
    return {"functions": functions}


def test_a_975_deep_list_in_a_var_value_is_too_deep_with_its_path():
    run = session().run_fragment({"var": {"x": nested_list(975)}})
    assert run.code == "errorInAgent"
    err = run.error
    assert (err.code, err.stage) == ("too-deep", "validate")
    # the top object is level 1, var's fields 2, x's list 3: the first value past the bound is
    # the list at JSON depth MAX_JSON_DEPTH + 1
    assert err.path == "var.x" + "[0]" * (MAX_JSON_DEPTH - 2)


def test_a_list_at_the_bound_is_accepted():
    run = session().run_fragment({"var": {"x": nested_list(MAX_JSON_DEPTH - 2)}})
    assert run.code == "success", run.error


def test_300_nested_ifs_are_too_deep():
    run = session().run_fragment(nested_ifs(300, {"log": "deep"}))
    assert run.code == "errorInAgent"
    assert (run.error.code, run.error.stage) == ("too-deep", "validate")
    assert run.error.path.startswith("if.then.if.then")


def test_command_nesting_past_the_bound_is_too_deep_at_the_list_that_goes_past_it():
    run = session().run_fragment(nested_ifs(MAX_NESTING + 5, {"log": "deep"}))
    assert (run.error.code, run.error.stage) == ("too-deep", "validate")
    assert run.error.path == ".".join(["if.then"] * MAX_NESTING)
    assert f"more than {MAX_NESTING} levels" in run.error.message


def test_command_nesting_at_the_bound_runs():
    run = session().run_fragment(nested_ifs(MAX_NESTING - 1, {"log": "deep"}))
    assert run.code == "success", run.error
    assert run.logs == ["deep"]


def test_a_chain_of_250_calls_is_too_deep_naming_the_chain():
    run = session().run_fragment(call_chain(250))
    assert run.code == "errorInAgent"
    errors = getattr(run.error, "errors", [run.error])
    assert len(errors) == 1  # reported once, at the function that starts the chain
    assert (run.error.code, run.error.stage, run.error.path) == ("too-deep", "validate", "functions.main")
    assert "main → f0 → f1" in run.error.message and "f250" in run.error.message


def test_a_chain_of_calls_within_the_bound_runs():
    run = session().run_fragment(call_chain(MAX_NESTING - 2))  # main's call, then 49 bodies: 50 levels
    assert run.code == "success", run.error
    assert run.value == "end"
    one_more = session().run_fragment(call_chain(MAX_NESTING - 1))
    assert one_more.error.code == "too-deep" and f"commands nest {MAX_NESTING + 1} levels" in one_more.error.message


def test_nesting_adds_up_through_calls_to_functions_of_an_earlier_cell():
    s = session()
    inner = nested_ifs(30, {"return": "deep"})
    first = s.run_fragment({"functions": {"main": {"commands": {"return": 1}}, "g": {"commands": inner}}})
    assert first.code == "success", first.error
    run = s.run_fragment(nested_ifs(30, {"call": {"function": "g"}}))
    assert (run.error.code, run.error.stage) == ("too-deep", "validate")
    assert "<cell> → g" in run.error.message
    shallow = s.run_fragment(nested_ifs(5, {"call": {"function": "g"}}))
    assert shallow.code == "success", shallow.error


def test_a_run_that_goes_past_the_bound_stops_with_too_deep():
    """The interpreter's own count: a program the parser did not see (a cycle made after parsing)."""
    s = session()
    program = parse_fragment(s.engine, {"functions": {
        "main": {"commands": {"call": {"function": "f"}}},
        "f": {"commands": {"call": {"function": "g"}}},
        "g": {"commands": {"return": 1}}}})
    back = Command("call", {"function": "f"}, "functions.g.commands.call", model=CallFields(function="f"))
    program.functions["g"].commands = [back]
    start = time.monotonic()
    code, _value, _outputs, _logs, error, _trace = s.execution.run_coroutine(run_program(s, program, None, start), start)
    assert code == "errorInAgent"
    assert (error.code, error.stage) == ("too-deep", "run")
    assert f"more than {MAX_NESTING} levels" in error.message


def test_values_built_deeper_than_json_allows_are_coded_errors_in_agent_and_conv():
    s = session("range")
    build = [{"var": {"x": 0}}, {"for": {"item": "i", "in": "{ range(2000) }", "commands": {"var": {"x": "{ [x] }"}}}}]
    run = s.run_fragment([*build, {"var": {"agent.y": "{ x }"}}])
    assert (run.code, run.error.code, run.error.stage, run.error.path) == ("errorInAgent", "too-deep", "run", "[2].var.agent.y")
    assert s.agent_vars == {}
    with pytest.raises(S2OError) as info:
        s.set_conv("z", nested_list(MAX_JSON_DEPTH + 1))
    assert info.value.code == "too-deep"
    with pytest.raises(S2OError) as info:
        Session(agent={"deep": nested_list(MAX_JSON_DEPTH + 1)})
    assert info.value.code == "too-deep"


def test_commands_that_show_values_give_coded_errors_for_values_that_cannot_be_shown():
    s = session("range")
    build = [{"var": {"x": 0}}, {"for": {"item": "i", "in": "{ range(2000) }", "commands": {"var": {"x": "{ [x] }"}}}}]
    deep_out = s.run_fragment([*build, {"output": {"text": "{ x }"}}])
    assert (deep_out.code, deep_out.error.code, deep_out.error.path) == ("errorInAgent", "runtime", "[2].output.text")
    big_out = s.run_fragment({"output": {"text": "{ 10**5000 }"}})
    assert (big_out.error.code, big_out.error.python_type) == ("runtime", "ValueError")
    big_html = s.run_fragment({"output": {"html": "{ 10**5000 }"}})
    assert big_html.error.code == "runtime"
    log = s.run_fragment([*build, {"log": "{ x }"}, {"log": "{ 10**5000 }"}])
    assert log.code == "success", log.error
    assert log.logs[0].startswith("[[[[") and log.logs[1] == "<int with about 5,001 digits>"
    fail = s.run_fragment({"fail": "{ 10**5000 }"})
    assert (fail.code, fail.error.message) == ("failCommand", "<int with about 5,001 digits>")
    deep_fail = s.run_fragment([*build, {"fail": "{ x }"}])
    assert deep_fail.code == "failCommand" and deep_fail.error.message.startswith("[[[[")


def test_a_host_iterator_that_fails_in_a_for_loop_is_a_coded_error_at_in():
    s = Session(locals={"it": map(int, ["1", "x"])})
    run = s.run_fragment({"for": {"item": "i", "in": "{ it }", "commands": {"var": {"last": "{ i }"}}}})
    assert (run.code, run.error.code, run.error.path) == ("errorInAgent", "runtime", "for.in")
    assert run.error.message.startswith("ValueError: invalid literal for int()")


def test_a_fragment_holding_a_value_json_cannot_hold_is_a_coded_error():
    run = Session().run_fragment({"var": {"x": {1, 2}}})
    assert (run.code, run.error.code, run.error.stage) == ("errorInAgent", "fragment", "validate")
