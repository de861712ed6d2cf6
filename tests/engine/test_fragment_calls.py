"""Each function call of a fragment has its own locals, also when calls run at the same time (SPEC 7; issue 8).

The finding: ``parallel`` over two ``call`` commands swapped the branches' locals through the shared
globals dict (each call replaced the locals in place, so a call that awaited came back to the other
call's arguments). Calls now run in namespaces of their own, held per task; ``command`` and ``exc``
are per task too.
"""

from __future__ import annotations

import pytest

from s2o_kernel.engine import Engine, S2OError, Session, bare_settings


def session() -> Session:
    return Session(Engine(bare_settings({"allowlist": "asyncio.sleep\nstr"})))


def branch(name: str, delay: float, target: str) -> list[dict]:
    return [{"call": {"function": "f", "args": {"a": name, "d": delay}}}, {"var": {target: "{ result }"}}]


F = {"args": {"a": "str", "d": "float"}, "commands": [
    {"var": {"before": "{ a }"}},
    {"var": {"slept": "{ await asyncio.sleep(d) }"}},
    {"return": "{ [before, a, d, sys.exists('local', 'r1'), sys.exists('local', 'mine')] }"}]}


def test_two_calls_in_parallel_each_await_then_read_their_own_arguments():
    s = session()
    run = s.run_fragment({"functions": {"f": F, "main": {"commands": [
        {"var": {"mine": "main's"}},
        {"parallel": [branch("one", 0.05, "r1"), branch("two", 0.0, "r2")]},
        {"return": "{ [r1, r2, mine] }"}]}}})
    assert run.code == "success", run.error
    assert run.value == [["one", "one", 0.05, False, False], ["two", "two", 0.0, False, False], "main's"]


def test_a_call_neither_sees_nor_changes_its_callers_locals():
    s = session()
    run = s.run_fragment({"functions": {
        "g": {"args": {"x": "int"}, "commands": [
            {"var": {"y": "{ x + 1 }"}},
            {"return": "{ [y, sys.exists('local', 'y0'), sys.exists('local', 'x')] }"}]},
        "main": {"commands": [
            {"var": {"y0": 10, "x": 100}},
            {"call": {"function": "g", "args": {"x": 1}}},
            {"return": "{ [result, x, y0, sys.exists('local', 'y')] }"}]}}})
    assert run.code == "success", run.error
    assert run.value == [[2, False, True], 100, 10, False]


def test_notebook_locals_are_untouched_by_calls_in_parallel():
    s = session()
    s.set_local("kept", 7)
    run = s.run_fragment([
        {"var": {"kept2": 8}},
        {"parallel": [branch("one", 0.02, "r1"), branch("two", 0.0, "r2")]}])
    assert run.code == "errorInAgent"  # no agent defines f yet: unknown-function at validation
    s.run_fragment({"functions": {"f": F, "main": {"commands": {"return": 0}}}})
    run = s.run_fragment([{"parallel": [branch("one", 0.02, "r1"), branch("two", 0.0, "r2")]}])
    assert run.code == "success", run.error
    assert s.locals == {"kept": 7, "r1": ["one", "one", 0.02, False, False], "r2": ["two", "two", 0.0, False, False]}


def test_each_parallel_branch_handles_its_own_error():
    """The second branch's handler starts while the first one's waits: each still reads its own ``exc``."""
    s = session()
    run = s.run_fragment({"parallel": [
        [{"var": {"a": "{ 1 / 0 }"}, "onError": [{"var": {"w": "{ await asyncio.sleep(0.05) }"}},
                                                  {"var": {"e1": "{ exc.message }"}}]}],
        [{"var": {"v": "{ await asyncio.sleep(0.01) }"}},
         {"var": {"b": "{ {}['k'] }"}, "onError": [{"var": {"w2": "{ await asyncio.sleep(0.1) }"}},
                                                    {"var": {"e2": "{ exc.message }"}}]}]]})
    assert run.code == "success", run.error
    locs = s.locals
    assert locs["e1"].startswith("ZeroDivisionError") and locs["e2"].startswith("KeyError")
    with pytest.raises(S2OError) as info:  # no handler's error outlives it
        s.evaluate("exc.code")
    assert info.value.code == "not-set"


def test_each_parallel_branch_reads_its_own_command_fields_across_an_await():
    s = session()
    run = s.run_fragment({"parallel": [
        [{"var": {"p1": "left", "r1": "{ [await asyncio.sleep(0.05), command.p1][1] }"}}],
        [{"var": {"p2": "right", "r2": "{ [await asyncio.sleep(0.0), command.p2][1] }"}}]]})
    assert run.code == "success", run.error
    assert (s.locals["r1"], s.locals["r2"]) == ("left", "right")
